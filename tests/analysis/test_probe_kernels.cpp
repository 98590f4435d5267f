// The probe's fused CPU kernels against their torch-ops references: the vectorised relative
// weights, the tile product, and the whole streamed probe (fused against torch ops, which
// RECALL_KERNELS=reference and CUDA run); and the PyTorch peer against recall's JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "python_test_util.h"
#include "recall/analysis/probe.h"
#include "recall/analysis/probe_output.h"
#include "recall/analysis/probe_weights.h"
#include "recall/analysis/tile_gemm.h"
#include "recall/core/kernels.h"
#include "recall/stores/store.h"

using namespace recall;

TEST(ProbeKernels, RelativeWeightsMatchTorchOps) {
  // s in [-1, 1] as for unit vectors; 37 columns leave a tail past the 16-float vectors.
  auto s = torch::rand({5, 37}) * 2 - 1;
  s[0][0] = 1.0f;
  for (const char* name : {"outer_product", "relu", "relu3", "swiglu", "exp2", "exp4", "softmax"}) {
    const auto w = StoreSpec::parse(name, 8.0).weight;
    const auto ref = relative_weights(w, s.to(torch::kFloat64)).to(torch::kFloat32);
    auto out = torch::empty_like(s);
    relative_weights_rows(w, s.data_ptr<float>(), 37, out.data_ptr<float>(), 37, 5, 37);
    EXPECT_TRUE(torch::allclose(out, ref, 2e-6, 1e-7)) << name;
  }
  const auto soft = softmax_weight(26.0);  // yarn's beta at 4M memories
  auto out = torch::empty_like(s);
  relative_weights_rows(soft, s.data_ptr<float>(), 37, out.data_ptr<float>(), 37, 5, 37);
  // exp(x) with x = beta (s - 1) down to -52: rounding x to float moves it by up to |x| 2^-24,
  // which exp turns into a relative error of as much, on top of exp's own 2e-7.
  const auto s64 = s.to(torch::kFloat64);
  const auto ref = relative_weights(soft, s64);
  const auto bound = ref * (2e-6 + 2 * (26.0 * (1.0 - s64)).abs() * std::ldexp(1.0, -24));
  EXPECT_TRUE(((out.to(torch::kFloat64) - ref).abs() <= bound).all().item<bool>());
}

TEST(ProbeKernels, TileGemmMatchesMm) {
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

TEST(ProbeKernels, TileGemmKernelsAgreeBitForBit) {
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

TEST(ProbeKernels, FusedProbeMatchesTorchOps) {
  // Every weight kind and the rules, queries off the 32-row tiles, chunks off the 512 columns.
  ProbeConfig c;
  c.stores = {"outer_product", "relu", "relu3", "swiglu", "exp3", "softmax"};
  c.d_k = 16;
  c.d_v = 24;
  c.queries = 45;
  c.trials = 2;
  c.m = {8, 100, 700, 3000};
  c.chunk = 1000;
  c.ref_len = 64;
  c.rule_m_max = 4096;
  c.rule_queries = 20;
  const int64_t calls = fast_calls(FastKernel::kProbeTile);
  const auto fused = run_probe(c);
  EXPECT_EQ(fast_calls(FastKernel::kProbeTile) - calls, c.trials) << "the fused path did not run";
  ProbeResult ref;
  {
    ScopedKernels reference(Kernels::kReference);
    ref = run_probe(c);
  }
  EXPECT_EQ(fast_calls(FastKernel::kProbeTile) - calls, c.trials) << "the reference ran fused";
  auto close = [](const IsrSummary& a, const IsrSummary& b) {
    return a.count == b.count && std::abs(a.median - b.median) <= 1e-4 * b.median &&
           std::abs(a.rms - b.rms) <= 1e-4 * b.rms && std::abs(a.p90 - b.p90) <= 1e-4 * b.p90;
  };
  for (size_t s = 0; s < c.stores.size(); ++s)
    for (size_t g = 0; g < c.m.size(); ++g)
      EXPECT_TRUE(close(fused.stores[s].curve[g].isr, ref.stores[s].curve[g].isr))
          << c.stores[s] << " M " << c.m[g];
  for (size_t r = 0; r < fused.rules.size(); ++r)
    for (size_t g = 0; g < fused.rules[r].curve.size(); ++g)
      EXPECT_TRUE(close(fused.rules[r].curve[g].isr, ref.rules[r].curve[g].isr))
          << r << " " << fused.rules[r].curve[g].M;
  EXPECT_GT(fused.profile.accumulate, 0);
  EXPECT_GT(ref.profile.accumulate, 0);
}

// The PyTorch peer (scripts/peer_probe.py) measures recall's plan again with memories of its own
// and must agree with recall's JSON within the trial noise (its --compare).
TEST(ProbePeer, PeerAgreesWithRecallsJson) {
  const std::string python = test::python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch (install python3-torch)";
  ProbeConfig c;
  c.stores = {"outer_product", "least_squares", "relu2", "exp3", "softmax"};
  c.beta = 4;  // softmax capacity ~1.8e3 at d_k = 64: a small plan
  c.queries = 64;
  c.trials = 4;
  c.ref_len = 64;
  c.rule_m_max = 8192;
  c.rule_queries = 32;
  const auto dir = std::filesystem::temp_directory_path() / "recall_probe_peer";
  std::filesystem::create_directories(dir);
  const auto plan = (dir / "probe.json").string();
  std::ofstream(plan) << probe_json(run_probe(c));
  const std::string cmd = python + " '" + RECALL_SOURCE_DIR +
                          "/scripts/peer_probe.py' --threads 1 --compare --plan '" + plan + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
