// --device: parsing and refusal, and the code a non-CPU device runs. On a CPU-only machine the
// tests force that code (every fast path's torch-ops fallback, one backward per step, torch's
// AdamW) onto CPU tensors with the reference switch and compare it with the fast paths; with
// RECALL_TEST_DEVICE=cuda the same tests run the model on the GPU against the CPU.
#include <gtest/gtest.h>

#include <optional>

#include "device_test_util.h"
#include "recall/core/error.h"
#include "recall/ops/kernels.h"
#include "recall/train/checkpoint.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

// The code a non-CPU device runs: on the CPU, forced by the reference switch for the scope.
#define RECALL_AS_OFF_CPU(device)             \
  std::optional<ScopedKernels> off_cpu_scope; \
  if ((device).is_cpu()) off_cpu_scope.emplace(Kernels::kReference)

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu() - b.cpu()).abs().max().item<double>() /
         std::max(1e-12, b.cpu().abs().max().item<double>());
}

TEST(Device, ParseDevice) {
  EXPECT_EQ(parse_device("cpu"), torch::Device(torch::kCPU));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CPU", ""})
    EXPECT_THROW(parse_device(bad), UsageError) << bad;
  if (torch::cuda::is_available()) {
    EXPECT_EQ(parse_device("cuda"), torch::Device(torch::kCUDA, 0));
    const auto n = static_cast<int>(torch::cuda::device_count());
    EXPECT_EQ(parse_device(fmt::format("cuda:{}", n - 1)), torch::Device(torch::kCUDA, n - 1));
    EXPECT_THROW(parse_device(fmt::format("cuda:{}", n)), UsageError);
  } else {
    for (const char* cuda : {"cuda", "cuda:0", "cuda:1"}) {
      try {
        parse_device(cuda);
        ADD_FAILURE() << cuda << " accepted without CUDA";
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("use --device cpu"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Device, EveryCommandRefusesAnUnknownOrMissingDevice) {
  test::TempDir dir;
  const std::vector<std::vector<std::string>> commands = {
      {"train", "--config", "mqar-tiny", "--out", dir / "run"},
      {"eval", "--checkpoint", dir / "run"},
      {"sample", "--checkpoint", dir / "run"},
      {"inspect", "--checkpoint", dir / "run"},
      {"extrapolate", "--checkpoints", dir / "run"},
      {"probe", "--stores", "softmax", "--no-rules"},
      {"fit", "--width", "4", "--dk", "4"},
      {"bench", "train", "--config", "mqar-tiny"},
      {"bench", "probe", "--stores", "softmax", "--no-rules"}};
  test::UsageCases cases;
  for (const auto& args : commands) {
    auto bad = args;
    bad.insert(bad.end(), {"--device", "tpu"});
    cases.emplace_back(bad, "--device tpu: unknown device");
  }
  // The refusal itself is parse_device's (above); through the binary once.
  if (!torch::cuda::is_available())
    cases.push_back({{"train", "--config", "mqar-tiny", "--out", dir / "run", "--device", "cuda"},
                     "--device cuda: "});
  test::expect_usage_errors(cases, dir);
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));  // refused before any work
}

// Every path with a CPU fast path or a table built per call: LayerNorm with bias, the fused
// linear + GELU MLP, memory key-values, an untied head; then RoPE with the learned ssmax scale.
TEST(Device, ModelOnTheTestDeviceMatchesTheCpuFastPaths) {
  RECALL_TEST_DEVICE_OR_SKIP(device);
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"norm=layernorm", "ffn=mlp", "activation=gelu", "bias=true", "pos=learned",
            "tied_head=false", "attn_mem_kv=2"},
           {"pos=rope", "attn_rule=ssmax", "ffn=glu", "activation=silu"}}) {
    const TrainConfig cfg = test::tiny_mqar(extra);
    torch::manual_seed(3);
    Transformer cpu(cfg.model);
    auto there = std::dynamic_pointer_cast<TransformerImpl>(cpu->clone(device));
    auto x = torch::randint(cfg.model.vocab_size, {4, cfg.model.seq_len});
    auto y = torch::randint(cfg.model.vocab_size, {4, cfg.model.seq_len});
    auto pass = [&](torch::nn::Module& m, const torch::Tensor& logits) {
      torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                           y.reshape(-1).to(logits.device()))
          .backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : m.parameters()) grads.push_back(p.grad().cpu());
      return grads;
    };
    const auto fast_logits = cpu->forward(x);
    const auto fast = pass(*cpu, fast_logits);
    RECALL_AS_OFF_CPU(device);
    const auto other_logits = there->forward(x.to(device));
    const auto other = pass(*there, other_logits);
    EXPECT_LT(rel(other_logits, fast_logits), 1e-5) << extra[0];
    ASSERT_EQ(fast.size(), other.size());
    for (size_t i = 0; i < fast.size(); ++i)
      EXPECT_LT(rel(other[i], fast[i]), 1e-4) << cpu->named_parameters()[i].key();
  }
}

// Training on the test device follows the CPU's loss curve; its checkpoint, stopped halfway,
// resumes on the CPU (model and optimizer state mapped over) and lands on the same curve.
TEST(Device, TrainingOnTheTestDeviceFollowsTheCpuAndResumesOnTheCpu) {
  RECALL_TEST_DEVICE_OR_SKIP(device);
  const TrainConfig cfg = test::tiny_mqar({"steps=16"});
  test::TempDir dir;
  auto run = [&](const std::string& out, const torch::Device& on, bool resume, int64_t stop_at) {
    TrainOptions o;
    o.out_dir = dir / out;
    o.progress = false;
    o.device = on;
    o.resume = resume;
    if (stop_at > 0) o.stop = [stop_at](int64_t step) { return step == stop_at ? 99 : 0; };
    RECALL_AS_OFF_CPU(on);
    return train(cfg, o);
  };
  TrainOptions fast_options;
  fast_options.out_dir = dir / "cpu";
  fast_options.progress = false;
  const TrainResult fast = train(cfg, fast_options);
  const TrainResult there = run("device", device, false, 0);
  ASSERT_EQ(there.losses.size(), fast.losses.size());
  for (size_t i = 0; i < fast.losses.size(); ++i)
    EXPECT_NEAR(there.losses[i], fast.losses[i], 1e-3) << "step " << i + 1;

  const TrainResult first = run("split", device, false, 8);
  ASSERT_EQ(first.stopped_by, 99);
  TrainOptions rest;
  rest.out_dir = dir / "split";
  rest.progress = false;
  rest.resume = true;
  const TrainResult second = train(cfg, rest);  // on the CPU, fast paths
  ASSERT_EQ(second.losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(second.losses[i], there.losses[8 + i], 1e-3);

  // The device's checkpoint restores on the CPU and scores what the device run scored.
  Restored r = restore(dir / "device", torch::kCPU);
  EXPECT_TRUE(r.model->parameters().front().device().is_cpu());
  TrainConfig resolved = cfg;
  auto task = resolve_task(resolved);
  Rng rng(static_cast<uint64_t>(cfg.trainer.seed) ^ 0x5bd1e9955bd1e995ULL);  // the run's eval set
  const auto set =
      task->eval_set(cfg.trainer.eval_batches, cfg.trainer.batch_size, cfg.model.seq_len, rng);
  EXPECT_NEAR(evaluate(r.model, *task, set).at("loss"), there.eval.at("loss"), 1e-4);
}

}  // namespace
}  // namespace recall
