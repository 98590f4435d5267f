// The probe's fused CPU kernels against their torch-ops references: the vectorised relative
// weights and the whole streamed probe (fused against torch ops, which RECALL_KERNELS=reference
// and CUDA run; its tile product is tests/ops/test_tile_gemm.cpp); and the PyTorch peer against
// recall's JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "python_test_util.h"
#include "recall/analysis/probe.h"
#include "recall/analysis/probe_output.h"
#include "recall/analysis/probe_weights.h"
#include "recall/ops/kernels.h"
#include "recall/stores/store.h"
#include "test_paths.h"

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
  const std::string cmd = python + " '" + recall::test::source_dir() +
                          "/scripts/peer_probe.py' --threads 1 --compare --plan '" + plan + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
