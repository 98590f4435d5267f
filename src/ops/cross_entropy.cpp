#include "recall/ops/cross_entropy.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>

#include "recall/core/error.h"
#include "recall/ops/kernels.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

// The rows a thread takes at a time: about 16,384 logits.
int64_t grain(int64_t V) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(V, 1));
}

struct CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets) {
    RECORD_USER_SCOPE("recall::cross_entropy");  // a part of the step's profile: the loss
    auto x = logits.contiguous(), y = targets.contiguous();
    const int64_t n = x.size(0), V = x.size(1);
    auto lse = torch::empty({n}, x.options()), loss = torch::empty({n}, x.options());  // (n,)
    at::parallel_for(0, n, grain(V), [&](int64_t begin, int64_t end) {
      row_math::cross_entropy_rows(x.data_ptr<float>() + begin * V, y.data_ptr<int64_t>() + begin,
                                   lse.data_ptr<float>() + begin, loss.data_ptr<float>() + begin,
                                   end - begin, V);
    });
    ctx->save_for_backward({x, y, lse});
    return loss.sum();
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_USER_SCOPE("recall::cross_entropy_backward");
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &y = saved[1], &lse = saved[2];
    const int64_t n = x.size(0), V = x.size(1);
    const float g = grads[0].item<float>();  // the loss is a scalar
    auto gx = torch::empty_like(x);          // (n, V)
    at::parallel_for(0, n, grain(V), [&](int64_t begin, int64_t end) {
      row_math::cross_entropy_backward_rows(
          x.data_ptr<float>() + begin * V, y.data_ptr<int64_t>() + begin,
          lse.data_ptr<float>() + begin, g, gx.data_ptr<float>() + begin * V, end - begin, V);
    });
    return {gx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets) {
  const bool fast = fast_kernels(logits.device()) && logits.scalar_type() == torch::kFloat32 &&
                    logits.dim() == 2 && targets.dim() == 1 &&
                    targets.scalar_type() == torch::kInt64 && targets.size(0) == logits.size(0) &&
                    logits.size(0) > 0 && logits.size(1) > 0;
  if (!fast) return cross_entropy_sum_reference(logits, targets);
  const int64_t V = logits.size(1);
  const auto [low, high] = torch::aminmax(targets);
  check_arg(
      low.item<int64_t>() >= 0 && high.item<int64_t>() < V,
      fmt::format("cross_entropy_sum: targets from {} to {}, where the logits have {} classes",
                  low.item<int64_t>(), high.item<int64_t>(), V));
  count_fast_call(FastKernel::kCrossEntropy);
  return CrossEntropyFunction::apply(logits, targets);
}

torch::Tensor cross_entropy_sum_reference(const torch::Tensor& logits,
                                          const torch::Tensor& targets) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, targets, F::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace recall
