#include <gtest/gtest.h>

#include "recall/core/blas.h"
#include "recall/core/threads.h"

int main(int argc, char** argv) {
  recall::ensure_fast_blas(argv);
  recall::set_threads(0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
