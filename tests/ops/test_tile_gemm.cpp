// The probe's tile product (recall/ops/tile_gemm.h) against torch's mm, and its AVX-512 kernel
// against the portable one, bit for bit.
#include <gtest/gtest.h>

#include <tuple>

#include "recall/core/torch.h"
#include "recall/ops/tile_gemm.h"

namespace recall {
namespace {

TEST(TileGemm, MatchesMm) {
  // Row counts off the 4-row blocks and column counts off the 64- and 16-column blocks.
  for (auto [m, n, k] : {std::tuple{7, 83, 19}, {32, 64, 512}, {1, 5, 3}}) {
    auto a = torch::randn({m, k}), b = torch::randn({k, n}), c = torch::randn({m, n});
    auto out = c.clone();
    tile_gemm(a.data_ptr<float>(), k, 1, b.data_ptr<float>(), n, out.data_ptr<float>(), n, m, n, k,
              true);
    EXPECT_TRUE(torch::allclose(out, c + a.mm(b), 1e-4, 1e-4)) << m << " " << n << " " << k;
    tile_gemm(a.data_ptr<float>(), k, 1, b.data_ptr<float>(), n, out.data_ptr<float>(), n, m, n, k,
              false);
    EXPECT_TRUE(torch::allclose(out, a.mm(b), 1e-4, 1e-4)) << m << " " << n << " " << k;
    // A read transposed: a stored as (k, m)
    const auto at = a.t().contiguous();
    tile_gemm(at.data_ptr<float>(), 1, m, b.data_ptr<float>(), n, out.data_ptr<float>(), n, m, n, k,
              false);
    EXPECT_TRUE(torch::allclose(out, a.mm(b), 1e-4, 1e-4)) << m << " " << n << " " << k << " t";
  }
}

TEST(TileGemm, KernelsAgreeBitForBit) {
  if (!tile_gemm_avx512()) GTEST_SKIP() << "the AVX-512 tile kernel does not run here";
  // The AVX-512 kernel and the portable one sum each element over k in the
  // same order with fused multiply-adds: the same bits, so the probe's JSON does not depend on
  // which ran. Shapes off every block, a strided B and a transposed A, as the probe reads them.
  for (auto [m, n, k, ldb] :
       {std::tuple{7, 83, 19, 83}, {512, 32, 64, 256}, {32, 64, 512, 64}, {5, 40, 3, 40}}) {
    auto a = torch::randn({m, k}), b = torch::randn({k, ldb}), c = torch::randn({m, n});
    const auto at = a.t().contiguous();
    for (bool accumulate : {false, true})
      for (bool transposed : {false, true}) {
        const float* pa = transposed ? at.data_ptr<float>() : a.data_ptr<float>();
        const int64_t ar = transposed ? 1 : k, ac = transposed ? m : 1;
        auto fast = c.clone(), portable = c.clone();
        tile_gemm(pa, ar, ac, b.data_ptr<float>(), ldb, fast.data_ptr<float>(), n, m, n, k,
                  accumulate);
        tile_gemm_portable(pa, ar, ac, b.data_ptr<float>(), ldb, portable.data_ptr<float>(), n, m,
                           n, k, accumulate);
        EXPECT_TRUE(torch::equal(fast, portable))
            << m << " " << n << " " << k << " " << accumulate << " " << transposed;
      }
  }
}

}  // namespace
}  // namespace recall
