// RECALL_KERNELS=reference against the fast paths: the model's forward and backward, and a short
// training run, agree within float32 tolerances.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "recall/ops/kernels.h"
#include "recall/train/trainer.h"
#include "test_paths.h"
#include "train_test_util.h"

namespace recall {
namespace {

// Every fast path at once: LayerNorm with bias, the fused linear + GELU MLP, attention with memory
// key-values, learned positions, an untied head.
TrainConfig every_fast_path(std::vector<std::string> extra = {}) {
  std::vector<std::string> o{"norm=layernorm", "ffn=mlp",         "activation=gelu", "bias=true",
                             "pos=learned",    "tied_head=false", "attn_mem_kv=2"};
  o.insert(o.end(), extra.begin(), extra.end());
  return test::tiny_mqar(o);
}

struct Pass {
  torch::Tensor logits;
  std::vector<torch::Tensor> grads;
};

Pass forward_backward(Transformer& model, const torch::Tensor& x, const torch::Tensor& y,
                      Kernels kernels) {
  ScopedKernels scope(kernels);
  Pass out;
  out.logits = model(x);
  torch::nn::functional::cross_entropy(out.logits.reshape({-1, out.logits.size(-1)}), y.reshape(-1))
      .backward();
  for (auto& p : model->parameters()) {
    out.grads.push_back(p.grad().clone());
    p.mutable_grad().reset();
  }
  return out;
}

// Logits of order 1 and gradients of order 0.1 to 1: the fast kernels sum in other orders (blocked
// GEMMs, vectorised rows), so they differ from torch's ops in float32 rounding only: 1e-5 relative
// to the largest magnitude.
TEST(ReferenceKernels, ModelForwardAndBackwardAgree) {
  const TrainConfig cfg = every_fast_path();
  torch::manual_seed(5);
  Transformer model(cfg.model);
  auto x = torch::randint(cfg.model.vocab_size, {4, cfg.model.seq_len});
  auto y = torch::randint(cfg.model.vocab_size, {4, cfg.model.seq_len});
  const Pass fast = forward_backward(model, x, y, Kernels::kFast);
  const Pass ref = forward_backward(model, x, y, Kernels::kReference);
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>() / std::max(1e-12, b.abs().max().item<double>());
  };
  EXPECT_LT(rel(fast.logits, ref.logits), 1e-5);
  ASSERT_EQ(fast.grads.size(), ref.grads.size());
  for (size_t i = 0; i < ref.grads.size(); ++i)
    EXPECT_LT(rel(fast.grads[i], ref.grads[i]), 1e-5) << model->named_parameters()[i].key();
}

// 40 steps of mqar: data-parallel step and fused AdamW against one backward and torch's AdamW. The
// rounding differences grow through training but the loss curves agree to 1e-3.
TEST(ReferenceKernels, ShortMqarRunSameLossCurve) {
  const TrainConfig cfg = every_fast_path({"steps=40", "log_every=40"});
  auto run = [&](Kernels kernels, const std::string& out) {
    ScopedKernels scope(kernels);
    TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return train(cfg, o);
  };
  test::TempDir dir;
  const TrainResult fast = run(Kernels::kFast, dir / "fast");
  const TrainResult ref = run(Kernels::kReference, dir / "reference");
  ASSERT_EQ(fast.losses.size(), 40u);
  ASSERT_EQ(ref.losses.size(), 40u);
  double worst = 0;
  for (size_t i = 0; i < fast.losses.size(); ++i)
    worst = std::max(worst, std::abs(fast.losses[i] - ref.losses[i]));
  EXPECT_LT(worst, 1e-3);
  EXPECT_LT(fast.losses.back(), fast.losses.front());  // it trained
  EXPECT_NEAR(fast.eval.at("loss"), ref.eval.at("loss"), 1e-3);
}

TEST(ReferenceKernels, CliRefusesAnUnknownValue) {
  test::TempDir dir;
  const std::string cmd = "RECALL_KERNELS=slow " + recall::test::recall_binary() +
                          " train --config mqar-tiny --set steps=1 --out " + dir / "run" + " 2>" +
                          dir / "err.txt" + " >/dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(test::read_text(dir / "err.txt"),
            "error: RECALL_KERNELS = 'slow': must be fast (the default) or reference\n");
}

}  // namespace
}  // namespace recall
