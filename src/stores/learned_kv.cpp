#include "recall/stores/learned_kv.h"

#include <fmt/format.h>

#include <cmath>

#include "recall/core/error.h"
#include "recall/ops/gemm.h"
#include "recall/stores/feed_forward.h"
#include "recall/stores/init.h"

namespace recall {

LearnedKvStoreImpl::LearnedKvStoreImpl(LearnedKvStoreOptions options_) : options(options_) {
  reset();
}

void LearnedKvStoreImpl::reset() {
  const int64_t D = options.d_model(), H = options.n_heads(), S = options.slots();
  check_arg(S >= 1, fmt::format("LearnedKvStoreOptions: slots {} is below 1", S));
  check_arg(D >= 1 && H >= 1 && D % H == 0,
            fmt::format("LearnedKvStoreOptions: d_model {} is no multiple of n_heads {}", D, H));
  // Registered as w1 and w2, the input and output maps of every feed-forward kind: the state's
  // names are the same for all (checkpoints, exports, the Python twin, fit's initialisation).
  wq = register_module("w1", make_linear(D, D, options.bias()));
  wo = register_module("w2", make_linear(D, D, options.bias()));
  slot_keys = register_parameter("keys", torch::randn({H, S, D / H}) / std::sqrt(D / H));
  slot_values = register_parameter("values", torch::randn({H, S, D / H}) * kInitStd);
}

namespace {
// softmax over the slots of q (H, n, dh): (H, n, S)
torch::Tensor slot_weights(const torch::Tensor& q, const torch::Tensor& keys, int64_t dh) {
  auto logits = fast_matmul(q, keys.transpose(1, 2), 1.0 / std::sqrt(static_cast<double>(dh)));
  return torch::softmax(logits, -1);
}
}  // namespace

torch::Tensor LearnedKvStoreImpl::recall_weights(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  const int64_t H = options.n_heads(), dh = d_head();
  auto shape = x.sizes().vec();
  shape.back() = H;
  shape.push_back(-1);
  auto q = fast_linear(x, wq->weight, wq->bias).reshape({-1, H, dh}).transpose(0, 1);  // (H, n, dh)
  return slot_weights(q, slot_keys, dh).transpose(0, 1).reshape(shape);  // (..., H, S)
}

torch::Tensor LearnedKvStoreImpl::key_weights(const torch::Tensor& q) {
  const int64_t H = options.n_heads(), dh = d_head();
  check_arg(q.dim() == 3 && q.size(0) == H && q.size(2) == dh,
            fmt::format("queries: shape {} must be (H = {}, n, d_head = {})", c10::str(q.sizes()),
                        H, dh));
  return slot_weights(q, slot_keys, dh);
}

std::optional<FeedForwardOptions> LearnedKvStoreImpl::feed_forward_options() const {
  return FeedForwardOptions(options.d_model())
      .kind(FfnKind::kLearnedKv)
      .slots(options.slots())
      .n_heads(options.n_heads())
      .bias(options.bias());
}

torch::Tensor LearnedKvStoreImpl::forward(const torch::Tensor& x) {
  detail::check_features(x, options.d_model());
  const int64_t H = options.n_heads(), dh = d_head();
  auto shape = x.sizes().vec();  // (..., d_model)
  auto q = fast_linear(x, wq->weight, wq->bias).reshape({-1, H, dh}).transpose(0, 1);  // (H, n, dh)
  auto y = fast_matmul(slot_weights(q, slot_keys, dh), slot_values);  // (H, n, S) @ (H, S, dh)
  return fast_linear(y.transpose(0, 1).reshape(shape), wo->weight, wo->bias);  // (..., d_model)
}

}  // namespace recall
