// Training with bf16 products (precision = bf16): the run resumes bit for bit as an fp32 run does,
// its weights and checkpoints stay float32, its losses follow the fp32 run's within bf16's
// rounding, and on the torch-ops path (RECALL_KERNELS=reference, as on CUDA) LibTorch's autocast
// gives the same curve.
#include <gtest/gtest.h>

#include <cmath>

#include "fast_gemm_test_util.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/ops/precision.h"
#include "recall/train/checkpoint.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

TrainResult run(const TrainConfig& cfg, const std::string& out, bool resume = false,
                int64_t stop_at = 0) {
  return test::run_quietly(cfg, out, resume, stop_at);
}

double worst_gap(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST(Bf16Training, ResumesExactlyWithFloat32WeightsAndFollowsFp32) {
  RECALL_BF16_OR_SKIP();
  test::TempDir dir;
  const TrainConfig fp32 = test::tiny_mqar({"eval_every=4"});
  const TrainConfig bf16 = test::tiny_mqar({"eval_every=4", "precision=bf16"});
  const int64_t calls = fast_calls(FastKernel::kBf16Gemm),
                fp32_calls = fast_calls(FastKernel::kSgemm),
                as_float = fast_calls(FastKernel::kBf16AsFloat),
                attention = fast_calls(FastKernel::kAttention);
  const auto straight = run(bf16, dir / "straight");
  EXPECT_GT(fast_calls(FastKernel::kBf16Gemm), calls) << "the bf16 GEMM did not run";
  // every product of the run on bf16 operands: the fused attention's small block products on the
  // bf16 GEMM, or (where AMX runs it) on the sgemm, their operands bf16 values held as float32
  // (exact), and no other sgemm
  EXPECT_GT(fast_calls(FastKernel::kAttention), attention) << "the fused attention did not run";
  if (attention_blocks_on_bf16_gemm())
    EXPECT_EQ(fast_calls(FastKernel::kBf16AsFloat), as_float);
  else
    EXPECT_GT(fast_calls(FastKernel::kBf16AsFloat), as_float);
  EXPECT_EQ(fast_calls(FastKernel::kSgemm) - fp32_calls,
            fast_calls(FastKernel::kBf16AsFloat) - as_float)
      << "a float32 product ran under bf16";
  EXPECT_EQ(matmul_precision(), Precision::kFp32) << "the run's precision outlived it";
  const auto first = run(bf16, dir / "split", false, 6);
  const auto second = run(bf16, dir / "split", true);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(joined, straight.losses);  // bit for bit
  EXPECT_EQ(second.eval, straight.eval);
  const Restored r = restore(dir / "straight");
  EXPECT_EQ(r.config.trainer.precision, Precision::kBf16);
  for (const auto& p : r.model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
  // The same run in fp32: other bits, the same curve within bf16's rounding
  const auto f = run(fp32, dir / "fp32");
  EXPECT_NE(f.losses, straight.losses);
  EXPECT_LT(worst_gap(f.losses, straight.losses), 0.02);
}

TEST(Bf16Training, AutocastOnTheTorchOpsPathGivesTheSameCurve) {
  RECALL_BF16_OR_SKIP();
  test::TempDir dir;
  const TrainConfig bf16 = test::tiny_mqar({"precision=bf16"});
  const auto fast = run(bf16, dir / "fast");
  TrainResult ref, ref_fp32;
  {
    const ScopedKernels reference(Kernels::kReference);
    const int64_t calls = fast_calls(FastKernel::kBf16Gemm);
    ref = run(bf16, dir / "reference");
    EXPECT_EQ(fast_calls(FastKernel::kBf16Gemm), calls)
        << "the torch-ops path ran recall's bf16 GEMM";
    ref_fp32 = run(test::tiny_mqar(), dir / "reference-fp32");
  }
  EXPECT_NE(ref.losses, ref_fp32.losses) << "autocast did not change the products";
  EXPECT_LT(worst_gap(fast.losses, ref.losses), 0.02);
  EXPECT_NEAR(fast.eval.at("loss"), ref.eval.at("loss"), 0.02);
}

}  // namespace
}  // namespace recall
