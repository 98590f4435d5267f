#include "recall/ops/fused_adamw.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "recall/core/error.h"
#include "recall/core/threads.h"
#include "recall/ops/kernels.h"

#ifdef __SSE2__
#include <immintrin.h>
#endif

namespace recall {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::OptimizerParamGroup;

void check_options(const AdamWOptions& o) {
  const auto [b1, b2] = o.betas();
  check_arg(o.lr() >= 0, fmt::format("lr = {}: must be >= 0", o.lr()));
  check_arg(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1,
            fmt::format("betas = ({}, {}): each must be in [0, 1)", b1, b2));
  check_arg(o.eps() > 0, fmt::format("eps = {}: must be > 0", o.eps()));
  check_arg(o.weight_decay() >= 0,
            fmt::format("weight_decay = {}: must be >= 0", o.weight_decay()));
  check_arg(!o.amsgrad(), "amsgrad = true: FusedAdamW has no amsgrad; use torch::optim::AdamW");
}

// float32 and contiguous, all on one device (the fused loop reads them as flat float arrays).
void check_params(const std::vector<torch::Tensor>& params, const c10::Device& device) {
  for (const auto& p : params)
    check_arg(p.scalar_type() == torch::kFloat32 && p.device() == device && p.is_contiguous(),
              fmt::format("FusedAdamW: a parameter of type {} on {}{}: parameters must be "
                          "contiguous float32 tensors on one device ({})",
                          c10::toString(p.scalar_type()), p.device().str(),
                          p.is_contiguous() ? "" : " (not contiguous)", device.str()));
}

// Checked before torch's constructor, whose own checks throw c10::Error.
const AdamWOptions& checked(const AdamWOptions& defaults) {
  check_options(defaults);
  return defaults;
}

// The key of a parameter's state in Optimizer::state_: the address of its TensorImpl, as text in
// LibTorch 1.x (c10::guts::to_string) and as the pointer itself in 2.x.
template <class Key>
Key state_key(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << p.unsafeGetTensorImpl();  // what c10::guts::to_string writes
    return os.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// One parameter's share of the fused loop.
struct Item {
  float* p;
  const float* g;
  float *m, *v;
  float decay, b1, b2, step_size, sqrt_bc2, eps;
  float scale;  // the gradient's multiplier (scale_gradients); 1 for none
};

// The AdamW update of elements [lo, hi) of one parameter. On x86-64 four at a time on SSE2 (its
// baseline): the scalar loop could not vectorise, as sqrtf may set errno, and took 2.5 ms of a
// 75 ms bench-gpt step. Every operation rounds as the scalar one does, in the same order (no fused
// multiply-adds on either path), so both give the same bits.
void update(const Item& it, int64_t lo, int64_t hi) {
  int64_t j = lo;
#ifdef __SSE2__
  const __m128 b1 = _mm_set1_ps(it.b1), c1 = _mm_set1_ps(1.0f - it.b1), b2 = _mm_set1_ps(it.b2),
               c2 = _mm_set1_ps(1.0f - it.b2), decay = _mm_set1_ps(it.decay),
               step_size = _mm_set1_ps(it.step_size), sqrt_bc2 = _mm_set1_ps(it.sqrt_bc2),
               eps = _mm_set1_ps(it.eps), scale = _mm_set1_ps(it.scale);
  const bool scaled = it.scale != 1.0f;
  for (; j + 4 <= hi; j += 4) {
    const __m128 read = _mm_loadu_ps(it.g + j);
    const __m128 g = scaled ? _mm_mul_ps(read, scale) : read;
    const __m128 m = _mm_add_ps(_mm_mul_ps(b1, _mm_loadu_ps(it.m + j)), _mm_mul_ps(c1, g));
    const __m128 v =
        _mm_add_ps(_mm_mul_ps(b2, _mm_loadu_ps(it.v + j)), _mm_mul_ps(_mm_mul_ps(c2, g), g));
    _mm_storeu_ps(it.m + j, m);
    _mm_storeu_ps(it.v + j, v);
    const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(v), sqrt_bc2), eps);
    const __m128 p = _mm_sub_ps(_mm_mul_ps(_mm_loadu_ps(it.p + j), decay),
                                _mm_div_ps(_mm_mul_ps(step_size, m), denom));
    _mm_storeu_ps(it.p + j, p);
  }
#endif
  for (; j < hi; ++j) {
    const float g = it.scale != 1.0f ? it.g[j] * it.scale : it.g[j];
    const float m = it.b1 * it.m[j] + (1.0f - it.b1) * g;
    const float v = it.b2 * it.v[j] + (1.0f - it.b2) * g * g;
    it.m[j] = m;
    it.v[j] = v;
    it.p[j] = it.p[j] * it.decay - it.step_size * m / (std::sqrt(v) / it.sqrt_bc2 + it.eps);
  }
}

}  // namespace

FusedAdamW::FusedAdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults)
    : torch::optim::AdamW(std::move(groups), checked(defaults)) {
  for (auto& group : param_groups_)
    if (!group.params().empty()) device_ = group.params().front().device();
  for (auto& group : param_groups_) {
    check_options(static_cast<const AdamWOptions&>(group.options()));
    check_params(group.params(), device_);
  }
}

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, AdamWOptions defaults)
    : FusedAdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))},
                 defaults) {}

void FusedAdamW::multiply_gradients(float scale) {
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_)
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
}

void FusedAdamW::scale_gradients(float scale) {
  if (scale == 1.0f) return;
  if (!fast_kernels(device_)) return multiply_gradients(scale);
  // A second scale before the step: the first one is applied now, so each multiplication rounds
  // as it would have.
  if (grad_scale_ != 1.0f) multiply_gradients(grad_scale_);
  grad_scale_ = scale;
}

void FusedAdamW::zero_grad() {
  for (auto& group : param_groups_)
    for (auto& p : group.params()) p.mutable_grad().reset();
  grad_scale_ = 1.0f;
}

// Archive layout: "format" = kFormat; "groups" = G; per group g: "group/g" holding "size" and
// "options" (AdamWOptions), and "state/i" (AdamWParamState) for each parameter i that has state.
namespace {
constexpr const char* kFormat = "recall.FusedAdamW.1";
}

void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  archive.write("format", c10::IValue(std::string(kFormat)));
  archive.write("groups", c10::IValue(static_cast<int64_t>(param_groups_.size())));
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const auto& group = param_groups_[g];
    torch::serialize::OutputArchive group_archive(archive.compilation_unit());
    group_archive.write("size", c10::IValue(static_cast<int64_t>(group.params().size())));
    torch::serialize::OutputArchive options(archive.compilation_unit());
    static_cast<const AdamWOptions&>(group.options()).serialize(options);
    group_archive.write("options", options);
    for (size_t i = 0; i < group.params().size(); ++i) {
      auto it = state_.find(state_key<Key>(group.params()[i]));
      if (it == state_.end()) continue;
      torch::serialize::OutputArchive state(archive.compilation_unit());
      static_cast<const AdamWParamState&>(*it->second).serialize(state);
      group_archive.write(fmt::format("state/{}", i), state);
    }
    archive.write(fmt::format("group/{}", g), group_archive);
  }
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  c10::IValue format;
  if (!archive.try_read("format", format)) return torch::optim::AdamW::load(archive);
  check_arg(format.isString() && format.toStringRef() == kFormat,
            "FusedAdamW: the optimizer state has an unknown format");
  c10::IValue groups;
  archive.read("groups", groups);
  check_arg(
      groups.toInt() == static_cast<int64_t>(param_groups_.size()),
      fmt::format("FusedAdamW: the optimizer state has {} parameter groups, this optimizer {}",
                  groups.toInt(), param_groups_.size()));
  decltype(state_) loaded;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    auto& group = param_groups_[g];
    torch::serialize::InputArchive group_archive;
    archive.read(fmt::format("group/{}", g), group_archive);
    c10::IValue size;
    group_archive.read("size", size);
    check_arg(size.toInt() == static_cast<int64_t>(group.params().size()),
              fmt::format("FusedAdamW: group {} of the optimizer state has {} parameters, this "
                          "optimizer's has {}",
                          g, size.toInt(), group.params().size()));
    torch::serialize::InputArchive options_archive;
    group_archive.read("options", options_archive);
    auto options = std::make_unique<AdamWOptions>();
    options->serialize(options_archive);
    group.set_options(std::move(options));
    for (size_t i = 0; i < group.params().size(); ++i) {
      torch::serialize::InputArchive state_archive;
      if (!group_archive.try_read(fmt::format("state/{}", i), state_archive)) continue;
      auto state = std::make_unique<AdamWParamState>();
      state->serialize(state_archive);
      loaded[state_key<Key>(group.params()[i])] = std::move(state);
    }
  }
  state_ = std::move(loaded);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  if (grad_scale_ != 1.0f && (closure || !fast_kernels(device_))) {
    multiply_gradients(grad_scale_);  // before a closure adds to them, or for torch's step
    grad_scale_ = 1.0f;
  }
  if (!fast_kernels(device_)) return torch::optim::AdamW::step(std::move(closure));
  count_fast_call(FastKernel::kAdamW);
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  std::vector<Item> items;
  std::vector<torch::Tensor> grads;  // keeps contiguous copies alive through the loop
  std::vector<int64_t> offsets{0};   // start of each item in the flat element range
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      check_params({p}, device_);
      grads.push_back(p.grad().contiguous());
      const auto& g = grads.back();
      check_arg(g.scalar_type() == torch::kFloat32 && g.numel() == p.numel(),
                "FusedAdamW: gradients must be float32 and shaped like their parameters");
      auto& slot = state_[state_key<Key>(p)];
      if (!slot) {
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p));
        fresh->exp_avg_sq(torch::zeros_like(p));
        slot = std::move(fresh);
      }
      auto& s = static_cast<AdamWParamState&>(*slot);
      for (const auto& t : {s.exp_avg(), s.exp_avg_sq()})
        check_arg(t.is_contiguous() && t.scalar_type() == torch::kFloat32 && t.numel() == p.numel(),
                  "FusedAdamW: a loaded state does not match its parameter");
      s.step(s.step() + 1);
      const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(s.step()));
      const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(s.step()));
      items.push_back(
          {p.data_ptr<float>(), g.data_ptr<float>(), s.exp_avg().data_ptr<float>(),
           s.exp_avg_sq().data_ptr<float>(), static_cast<float>(1.0 - o.lr() * o.weight_decay()),
           static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(o.lr() / bc1),
           static_cast<float>(std::sqrt(bc2)), static_cast<float>(o.eps()), grad_scale_});
      offsets.push_back(offsets.back() + p.numel());
    }
  }
  // One parallel loop over the flat element range; each chunk walks the parameters it overlaps.
  auto chunk = [&](int64_t begin, int64_t end) {
    size_t i = std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1;
    for (; i < items.size() && offsets[i] < end; ++i) {
      const Item& it = items[i];
      const int64_t lo = std::max(begin, offsets[i]) - offsets[i];
      update(it, lo, std::min(end, offsets[i + 1]) - offsets[i]);
    }
  };
  constexpr int64_t kChunk = 1 << 14;
  const int64_t total = offsets.back();
  if (workers_ > 0)
    parallel_claim((total + kChunk - 1) / kChunk, workers_,
                   [&](int64_t c, int) { chunk(c * kChunk, std::min(total, (c + 1) * kChunk)); });
  else
    at::parallel_for(0, total, kChunk, chunk);
  grad_scale_ = 1.0f;
  return loss;
}

}  // namespace recall
