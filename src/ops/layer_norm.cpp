#include "recall/ops/layer_norm.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>

#include "recall/ops/column_sums.h"
#include "recall/ops/kernels.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

// LayerNorm over the last dim of a 2-D float32 x (n, D), one vectorised pass per row each way
// (torch's kernels make several); RMSNorm where `center` is false (the mean taken as 0). bias is
// empty (0,) for none: autograd functions take no undefined inputs.
struct LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight_in, const torch::Tensor& bias_in,
                               double eps, bool center) {
    // a part of the step's profile
    RECORD_USER_SCOPE(center ? "recall::layer_norm" : "recall::rms_norm");
    auto x = x_in.contiguous(), weight = weight_in.contiguous(), bias = bias_in.contiguous();
    const int64_t n = x.size(0), D = x.size(1);
    auto y = torch::empty_like(x);
    auto mean = torch::empty({n}, x.options()), rstd = torch::empty({n}, x.options());
    const float* pb = bias.numel() > 0 ? bias.data_ptr<float>() : nullptr;
    at::parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)),
                     [&](int64_t begin, int64_t end) {
                       row_math::layer_norm_rows(
                           x.data_ptr<float>() + begin * D, weight.data_ptr<float>(), pb,
                           y.data_ptr<float>() + begin * D, mean.data_ptr<float>() + begin,
                           rstd.data_ptr<float>() + begin, end - begin, D, static_cast<float>(eps),
                           center);
                     });
    ctx->save_for_backward({x, weight, mean, rstd});
    ctx->saved_data["bias"] = bias.numel() > 0;
    ctx->saved_data["center"] = center;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const bool center = ctx->saved_data["center"].toBool();
    RECORD_USER_SCOPE(center ? "recall::layer_norm_backward" : "recall::rms_norm_backward");
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto g = grads[0].contiguous();  // (n, D)
    const int64_t n = x.size(0), D = x.size(1);
    auto gx = torch::empty_like(x);
    // the weight and bias gradients: column sums, [gweight, gbias]
    const auto sums = column_sums(n, D, 2, x.options(), [&](int64_t begin, int64_t end, float* s) {
      row_math::layer_norm_backward_rows(
          g.data_ptr<float>() + begin * D, x.data_ptr<float>() + begin * D,
          weight.data_ptr<float>(), mean.data_ptr<float>() + begin, rstd.data_ptr<float>() + begin,
          gx.data_ptr<float>() + begin * D, s, s + D, end - begin, D, center);
    });
    return {gx, sums[0], ctx->saved_data["bias"].toBool() ? sums[1] : torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fast_layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps) {
  const bool fast = fast_kernels(x.device()) && x.scalar_type() == torch::kFloat32 &&
                    weight.scalar_type() == torch::kFloat32 && x.numel() > 0;
  if (!fast) return layer_norm_reference(x, weight, bias, eps);
  count_fast_call(FastKernel::kLayerNorm);
  const int64_t D = weight.size(0);
  auto b = bias.defined() ? bias : torch::empty({0}, weight.options());
  return LayerNormFunction::apply(x.reshape({-1, D}), weight, b, eps, /*center=*/true)
      .view(x.sizes());  // (n, D) rows back to (..., D)
}

torch::Tensor layer_norm_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, double eps) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const bool fast = fast_kernels(x.device()) && x.scalar_type() == torch::kFloat32 &&
                    weight.scalar_type() == torch::kFloat32 && x.numel() > 0;
  if (!fast) return rms_norm_reference(x, weight, eps);
  count_fast_call(FastKernel::kRmsNorm);
  const int64_t D = weight.size(0);
  return LayerNormFunction::apply(x.reshape({-1, D}), weight, torch::empty({0}, weight.options()),
                                  eps, /*center=*/false)
      .view(x.sizes());  // (n, D) rows back to (..., D)
}

torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  // the forward's part of the step's profile; its backward is autograd's elementwise ops
  RECORD_USER_SCOPE("recall::rms_norm");
  auto inv_rms = torch::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps);  // (..., 1)
  return x * inv_rms * weight;
}

}  // namespace recall
