#include "recall/core/threads.h"

#include <torch/torch.h>

#include <thread>

namespace recall {

int set_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
  return n;
}

}  // namespace recall
