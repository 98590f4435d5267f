// The machine (recall/core/machine.h): the CPU's theoretical fp32 rate, the upper bound of the peak
// that MFU divides by (recall/ops/peak_flops.h).
#include <gtest/gtest.h>

#include <string>

#include "recall/core/machine.h"

namespace recall {
namespace {

TEST(Machine, TheoreticalRateFollowsTheCoresAndIsAboveAnyCore) {
  std::string how;
  const double one = theoretical_fp32_flops(1, &how);
  if (one == 0) GTEST_SKIP() << "the CPU clock is not readable here";
  EXPECT_NE(how.find("GHz"), std::string::npos) << how;
  // Between 4 FLOPs per cycle at 0.5 GHz and 64 at 6 GHz.
  EXPECT_GE(one, 2e9);
  EXPECT_LE(one, 384e9);
  EXPECT_LE(theoretical_fp32_flops(1 << 20), one * 4096) << "capped at the online cores";
}

}  // namespace
}  // namespace recall
