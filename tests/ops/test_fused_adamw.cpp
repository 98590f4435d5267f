// FusedAdamW against torch::optim::AdamW: the same groups, options and gradients.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "fast_gemm_test_util.h"
#include "recall/ops/fused_adamw.h"
#include "recall/ops/kernels.h"

namespace recall {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::OptimizerParamGroup;

// Shapes that span several of the fused loop's chunks (16384 elements) and chunk edges; parameter
// 2 never gets a gradient.
std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> p;
  for (auto shape : {std::vector<int64_t>{3}, {200, 170}, {7, 5}, {40000}, {1}})
    p.push_back(torch::randn(shape).requires_grad_(true));
  return p;
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

// Two groups as the trainer makes them: decayed matrices at one lr, the rest undecayed at another.
std::vector<OptimizerParamGroup> two_groups(const std::vector<torch::Tensor>& p) {
  auto options = [](double lr, double wd) {
    return std::make_unique<AdamWOptions>(AdamWOptions(lr).betas({0.9, 0.99}).weight_decay(wd));
  };
  return {OptimizerParamGroup({p[1], p[2]}, options(1e-2, 0.1)),
          OptimizerParamGroup({p[0], p[3], p[4]}, options(3e-3, 0.0))};
}

// The same pseudo-random gradients on every copy: step `s`, parameter i.
void set_grads(std::vector<torch::Tensor>& p, int s) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (i == 2) continue;
    torch::manual_seed(1000 * s + i);
    p[i].mutable_grad() = torch::randn_like(p[i]) * (s + 1);
  }
}

double max_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

// Tolerance 1e-6 absolute after 6 steps of size ~1e-2: the two differ only in float rounding
// (torch rounds each of its ~8 ops to float32, the fused loop keeps intermediates in registers).
// The optimizer's state as torch's archive bytes (what a checkpoint keeps), and back.
std::string state_bytes(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}
void load_state_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  optimizer.load(archive);
}

TEST(FusedAdamW, MatchesTorchAdamWWithTwoGroups) {
  auto pa = make_params(9), pb = copies(pa);
  const auto untouched = pa[2].detach().clone();
  torch::optim::AdamW reference(two_groups(pa));
  FusedAdamW fused(two_groups(pb));
  const int64_t calls = fast_calls(FastKernel::kAdamW);
  for (int s = 0; s < 6; ++s) {
    set_grads(pa, s);
    set_grads(pb, s);
    reference.step();
    fused.step();
  }
  EXPECT_LT(max_diff(pa, pb), 1e-6);
  EXPECT_TRUE(torch::equal(pb[2], untouched));
  EXPECT_EQ(fused.state().size(), 4u);  // no state for the parameter without a gradient
  // per-group lr: a schedule sets it through the groups, as the trainer does
  for (auto* opt : std::initializer_list<torch::optim::Optimizer*>{&reference, &fused})
    for (auto& g : opt->param_groups()) g.options().set_lr(g.options().get_lr() * 0.5);
  set_grads(pa, 6);
  set_grads(pb, 6);
  reference.step();
  fused.step();
  EXPECT_LT(max_diff(pa, pb), 1e-6);
  test::expect_fast_calls(FastKernel::kAdamW, calls, 7);
}

// Saved after 3 steps and loaded into a fresh optimizer over copies of the parameters, the run
// continues bit for bit and the two save the same bytes; the state keys are torch's own, so
// AdamW::step finds the same state.
TEST(FusedAdamW, SaveLoadContinuesBitIdentically) {
  auto pa = make_params(4);
  FusedAdamW a(two_groups(pa));
  for (int s = 0; s < 3; ++s) {
    set_grads(pa, s);
    a.step();
  }
  auto pb = copies(pa);
  FusedAdamW b(two_groups(pb));
  load_state_bytes(b, state_bytes(a));
  for (int s = 3; s < 6; ++s) {
    set_grads(pa, s);
    set_grads(pb, s);
    a.step();
    b.step();
  }
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
  EXPECT_TRUE(state_bytes(a) == state_bytes(b));  // keyed by position, not by address

  // A torch AdamW step on the fused optimizer's state: the same state entries, step counts on.
  {
    ScopedKernels reference(Kernels::kReference);
    set_grads(pb, 6);
    b.step();
  }
  EXPECT_EQ(b.state().size(), 4u);
  for (const auto& [key, state] : b.state())
    EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*state).step(), 7) << key;
}

// A clip's coefficient handed to the optimizer (scale_gradients) gives the bits of the gradients
// multiplied first (g.mul_(c), as torch's clip_grad_norm_ does), on the fused path, where the
// step multiplies as it reads, and on the reference one; two scales before a step round twice, as
// two multiplications do. The fused path leaves the gradients unmultiplied, and gives the same
// bits on its own workers (set_workers) as on torch's threads.
TEST(FusedAdamW, ScaledGradientsStepAsMultipliedOnes) {
  // under RECALL_KERNELS=reference (the tests' rerun) the reference path alone
  std::vector<Kernels> paths{Kernels::kReference};
  if (!reference_kernels()) paths.push_back(Kernels::kFast);
  for (auto kernels : paths) {
    ScopedKernels scoped(kernels);
    auto pa = make_params(8), pb = copies(pa);
    FusedAdamW a(two_groups(pa)), b(two_groups(pb));
    b.set_workers(2);  // its loop on parallel_claim's threads, a's on torch's: the same bits
    for (int s = 0; s < 4; ++s) {
      set_grads(pa, s);
      set_grads(pb, s);
      const float c = 0.3f + 0.1f * static_cast<float>(s);  // s = 3: two scales, 0.6 then 0.7
      for (size_t i = 0; i < pa.size(); ++i)
        if (pa[i].grad().defined()) {
          pa[i].mutable_grad().mul_(c);
          if (s == 3) pa[i].mutable_grad().mul_(0.7f);
        }
      const auto before = pb[1].grad().clone();
      b.scale_gradients(c);
      if (s == 3) b.scale_gradients(0.7f);
      if (kernels == Kernels::kFast && s < 3) {
        EXPECT_TRUE(torch::equal(pb[1].grad(), before));
      }
      a.step();
      b.step();
      for (size_t i = 0; i < pa.size(); ++i)
        EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i << ", step " << s;
    }
  }
}

// A state saved by torch's own AdamW (checkpoints written before the fused optimizer) loads.
TEST(FusedAdamW, LoadsTorchAdamWState) {
  auto pa = make_params(6), pb = copies(pa);
  torch::optim::AdamW reference(two_groups(pa));
  for (int s = 0; s < 2; ++s) {
    set_grads(pa, s);
    reference.step();
  }
  FusedAdamW fused(two_groups(pb));
  {
    auto pc = copies(pa);  // the fused optimizer's own parameters take the values
    for (size_t i = 0; i < pb.size(); ++i) pb[i].detach().copy_(pc[i]);
  }
  load_state_bytes(fused, state_bytes(reference));
  set_grads(pa, 2);
  set_grads(pb, 2);
  reference.step();
  fused.step();
  EXPECT_LT(max_diff(pa, pb), 1e-6);
  EXPECT_EQ(fused.state().size(), 4u);
  // a state of other group sizes is refused
  auto pc = make_params(7);
  FusedAdamW one_group(pc);
  EXPECT_THROW(load_state_bytes(one_group, state_bytes(fused)), std::invalid_argument);
}

TEST(FusedAdamW, ZeroGradSetsNoneAndBadInputIsRejected) {
  auto p = torch::ones({3}, torch::requires_grad());
  FusedAdamW opt({p}, AdamWOptions(0.1));
  (p * 2).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  EXPECT_THROW(FusedAdamW({p}, AdamWOptions(-1.0)), std::invalid_argument);
  EXPECT_THROW(FusedAdamW({p}, AdamWOptions(0.1).betas({0.9, 1.0})), std::invalid_argument);
  EXPECT_THROW(FusedAdamW({p}, AdamWOptions(0.1).amsgrad(true)), std::invalid_argument);
  EXPECT_THROW(FusedAdamW({torch::ones({2}, torch::kFloat64)}), std::invalid_argument);
  // a group's own options are checked too
  EXPECT_THROW(FusedAdamW({OptimizerParamGroup(
                   {p}, std::make_unique<AdamWOptions>(AdamWOptions(0.1).weight_decay(-1)))}),
               std::invalid_argument);
}

}  // namespace
}  // namespace recall
