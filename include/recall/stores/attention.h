// Causal multi-head softmax attention: a softmax store over the context (docs/science.md §4, §5).
// For query position t the logits are
//   scale q_t . k_s / sqrt(d_head) * beta(M) / beta_0,   M = t + 1, L = seq_len,
// with beta(M) / beta_0 from the layer's rule (rule none with scale 1 is standard attention). ssmax
// learns the scale per head (initialised so that it equals su).
//
// With qk_norm (the essay's store, as in QKNorm), each head's query and key are scaled to unit
// length and the logits are
//   beta_h(M) cos(q_t, k_s),   beta_h(M) = scale_h * beta(M) / beta_0,
// so the sharpness is bounded by what the layer says, not by what training makes of |q| |k|: the
// interference of M memories, and the log-M rules that answer it, then act as on a random store.
// With learn_scale, scale_h is a parameter per head (`beta`, initialised to `scale`).
//
// With mem_kv = N, N learned key/value vectors per head are concatenated in front of the context
// keys and are visible to every query. As a store: the memories of query t are the N learned
// key/values and the t + 1 context ones; keys()/values() are the N learned ones (H, N, d_head),
// recall_weights the attention weights.
//
// With qk_rmsnorm (Qwen3's q_norm and k_norm), each head's query and key is RMS-normed with learned
// gains g_q, g_k (d_head,) before RoPE, as transformers does:
//   q' = sqrt(d_head) g_q * q / |q|,   k' = sqrt(d_head) g_k * k / |k|   (eps aside),
// so the logit q' . k' / sqrt(d_head) is sqrt(d_head) sum_i g_q,i g_k,i qhat_i khat_i: with gains
// constant across channels (g_q = a 1, g_k = b 1, and RoPE, a rotation of channel pairs, keeps
// that), the essay's store with unit keys, beta cos(q, k), at beta = a b sqrt(d_head) times scale
// and the rule's factor. Unequal gains weigh the channels of the cosine; inspect reads the keys
// after the norm.
//
// With n_kv_heads = G < H (grouped-query attention), the projection gives H query heads and G key
// and value heads; kv head j serves query heads j H/G .. (j + 1) H/G - 1 (transformers' repeat_kv).
// They are repeated to H heads before the attention (the fused kernel, the reference and the
// activation cache see H heads, so heads of one group share their keys); the KV cache keeps G.
//
// With conv = W >= 2 (Primer's multi-dconv-head attention), each channel of the q, k and v
// projections is a causal depthwise convolution of width W over positions before the heads split:
//   z'_t = sum_{j < W} c_j * z_{t-j}   (z_{t-j} = 0 before the sequence starts),
// so a key can hold its token's predecessor. That is how a model without positions forms the key ->
// value link of associative recall from content alone (docs/science.md §7).
#pragma once
#include <array>

#include "recall/core/torch.h"
#include "recall/ops/causal_attention.h"
#include "recall/ops/layer_norm.h"
#include "recall/stores/beta_rule.h"
#include "recall/stores/rope.h"
#include "recall/stores/store.h"

namespace recall {

// The widest convolution of q, k, v (attn_conv): a short one is all that content recall needs.
inline constexpr int64_t kMaxConv = 16;

struct AttentionOptions {
  AttentionOptions(int64_t d_model, int64_t n_heads, int64_t seq_len)
      : d_model_(d_model), n_heads_(n_heads), seq_len_(seq_len) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, n_heads);
  TORCH_ARG(int64_t, seq_len);  // L of the beta rule
  TORCH_ARG(BetaRule, rule) = BetaRule::kNone;
  TORCH_ARG(bool, rope) = true;
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(int64_t, mem_kv) = 0;
  TORCH_ARG(double, scale) = 1.0;  // logit multiplier on top of 1 / sqrt(d_head) and the rule
  TORCH_ARG(int64_t, conv) = 0;    // width of the causal convolution of q, k, v; 0: none
  // unit q and k per head: the logit is beta cos(q, k), beta = scale (no 1 / sqrt(d_head))
  TORCH_ARG(bool, qk_norm) = false;
  TORCH_ARG(bool, learn_scale) = false;  // scale learned per head, from `scale`
  TORCH_ARG(int64_t, n_kv_heads) = 0;    // G key/value heads; 0: n_heads
  TORCH_ARG(int64_t, d_head) = 0;        // 0: d_model / n_heads
  TORCH_ARG(double, rope_base) = kRopeBase;
  TORCH_ARG(bool, qkv_bias) = false;       // biases on q, k, v alone; `bias` sets them and out's
  TORCH_ARG(bool, qk_rmsnorm) = false;     // Qwen3's per-head RMSNorm of q and k, learned gains
  TORCH_ARG(double, norm_eps) = kNormEps;  // qk_rmsnorm's eps
};

// The keys and values of the positions decoded so far, for incremental decoding: k, v (B, n, G,
// d_head) with G the key/value heads, k after RoPE, without the learned memories; undefined before
// the first call. With a convolution, tail holds the last conv - 1 projections before it
// (B, conv - 1, (H + 2 G) d_head).
struct AttentionKv {
  torch::Tensor k, v, tail;
  int64_t length() const { return k.defined() ? k.size(1) : 0; }
};

// One forward of the plain-torch path with its pieces, for the activation cache.
struct AttentionTrace {
  torch::Tensor q;        // (B, T, H, dh) after RoPE (and, with qk_norm, unit)
  torch::Tensor k, v;     // (B, N + T, H, dh), the N memories first
  torch::Tensor weights;  // (B, H, T, N + T); each row sums to 1
  torch::Tensor out;      // (B, T, d_model): forward(x)
};

// A context m times longer, emulated at the training length for the layered forecast
// (analysis/isr_forecast.h): query t takes the multiplier `scale` (H or 1, T), the rule's at the
// position t_m = m (t + 1) - 1 it would hold, in place of logit_scale's; and every context key but
// the query's heaviest counts `count` (T,) times in its output, count_t = t_m / t: the longer
// prompt holds m copies of the same mix of keys and one key that the query reads. The weights
// that trace returns are the softmax at `scale`, before the count. Undefined tensors: off.
//
// How the copies' values add. As copies (the ISR forecast's reading): m times the same keys, their
// values in phase. In quadrature (the accuracy forecast): the longer prompt's other keys carry
// other values, so their weighted sum grows count times about the values' mean (the causal mean
// v-bar_t of the context's values) and only sqrt(count) times in its spread about it:
//   y_t = (w_c v_c + count W v-bar_t + sqrt(count) (sum_j w_j v_j - W v-bar_t)) / (w_c + count W),
// W = sum_j w_j over the other context keys j (the learned memories count once, in phase).
struct LengthEmulation {
  torch::Tensor scale;  // (H or 1, T), float64
  torch::Tensor count;  // (T,), float64
  bool quadrature = false;
};

// The parameters AttentionImpl registers for `options`, without building it, D = d_model, H heads,
// G key/value heads of width dh, C = (H + 2 G) dh, N memories, W the convolution's width: qkv C D
// and out H dh D (+ C + D biases, C with qkv_bias alone), the memories 2 N H dh, the convolution
// C W, qk_rmsnorm's gains 2 dh, a learned scale per head, and ssmax's per head.
int64_t attention_num_parameters(const AttentionOptions& options);

class AttentionImpl : public StoreModule<AttentionImpl, Store> {
 public:
  explicit AttentionImpl(AttentionOptions options);
  void reset() override;
  // x: (B, T, d_model) -> (B, T, d_model): the fused causal kernel (recall/ops/causal_attention.h)
  // where it runs, attend_reference elsewhere (other dtypes and devices, RECALL_KERNELS=reference)
  torch::Tensor forward(const torch::Tensor& x) override;
  // The same through attend_reference, with the pieces that made it.
  AttentionTrace trace(const torch::Tensor& x);
  // Incremental decoding: x (B, T, d_model) holds the positions kv.length() .. kv.length() + T - 1;
  // their keys and values are appended to kv, and the output equals forward's at those positions
  // of the whole sequence (attend_reference).
  torch::Tensor forward_incremental(const torch::Tensor& x, AttentionKv& kv);

  // As a store: x (B, T, d_model) -> (B, H, T, N + T) attention weights (attend_reference); each
  // row sums to 1, and the weight of context key s > t is 0.
  torch::Tensor recall_weights(const torch::Tensor& x) override;
  // mem_k (unit rows with qk_norm): (H, N, d_head), N = 0 gives an empty tensor
  torch::Tensor keys() const override;
  torch::Tensor values() const override;  // mem_v: (H, N, d_head)
  int64_t size() const override { return options.mem_kv(); }

  // The attention maths in plain torch ops (causal_attention_reference, recall/ops/
  // causal_attention.h) at this layer's logit scale: forward's fallback, trace, incremental
  // decoding and recall_weights. q (B, T, H, dh) holds the positions offset .. offset + T - 1; k
  // and v (B, S, H, dh) the N memories, then the context keys 0 .. offset + T - 1 (as trace gives
  // them). For query t (position p = offset + t)
  //   w_ts = softmax_s(q_t . k_s * logit_scale(p + 1))   over the memories and context s <= p,
  //   y_t = sum_s w_ts v_s.
  // Without v (undefined), the weights alone.
  Attended attend_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            int64_t offset = 0);
  // per head outputs y (B, T, H, dh) -> head_mask (when some head is masked), then the output
  // projection: (B, T, d_model). Every path ends here.
  torch::Tensor output(const torch::Tensor& y);
  // The logit multiplier per query position, scale beta(t + 1) / beta_0 times 1 / sqrt(d_head)
  // (without qk_norm): (H, T) for ssmax or a learned scale, (1, T) otherwise.
  torch::Tensor logit_scale(int64_t T, const torch::TensorOptions& like);
  // Runs every later forward through attend_reference with `e` (undefined tensors: off).
  void set_length_emulation(LengthEmulation e) { emulation_ = std::move(e); }
  // Changes the rule; switching to ssmax without a learned scale adds one at its initial value.
  void set_rule(BetaRule rule);
  // Sets head_mask, the multipliers of each head's output (inspect's ablation).
  void set_head_mask(const torch::Tensor& mask);
  bool heads_masked() const { return heads_masked_; }
  int64_t d_head() const {
    return options.d_head() > 0 ? options.d_head() : options.d_model() / options.n_heads();
  }
  int64_t kv_heads() const {
    return options.n_kv_heads() > 0 ? options.n_kv_heads() : options.n_heads();
  }
  // Module::load, which also reads files written before head_mask was state (all heads on).
  void load(torch::serialize::InputArchive& archive) override;

  AttentionOptions options;
  // d_model -> (H + 2 G) d_head, output rows [q (H heads); k (G heads); v (G heads)]
  torch::nn::Linear qkv{nullptr};
  torch::nn::Linear out{nullptr};  // H d_head -> d_model
  torch::Tensor mem_k, mem_v;      // (H, mem_kv, d_head), mem_kv > 0 only
  torch::Tensor conv;  // ((H + 2 G) d_head, conv): c_j of each q, k, v channel; conv > 0 only
  torch::Tensor q_norm, k_norm;  // (d_head,) the gains g_q, g_k; qk_rmsnorm only
  SsmaxScale ssmax{nullptr};     // rule ssmax only
  torch::Tensor beta;            // (H,) the learned scale_h; learn_scale only
  // (H,) multipliers of each head's output before the output projection, a buffer of ones; zero
  // ablates a head (recall inspect). Written through set_head_mask, so that forward skips the
  // multiply while every entry is 1.
  torch::Tensor head_mask;

 private:
  // q (B, T, H, dh) after RoPE, k and v (B, N + T, H, dh) with the N memories first.
  std::array<torch::Tensor, 3> heads(const torch::Tensor& x);
  // Whether heads(x) are the projection's three slices as they are: no memories, key-value heads
  // shared, convolution, norm, rotation or unit scaling (then forward hands the kernel the
  // projection whole, causal_attention_packed).
  bool plain_heads() const;
  // q, k, v of x after the convolution, (qk_rmsnorm) the norm of q and k, RoPE and (qk_norm) the
  // unit scaling of q and k: q (B, T, H, d_head), k and v (B, T, G, d_head); x holds positions
  // offset .. offset + T - 1. With a convolution, `tail`
  // (when given) holds the projections of the conv - 1 positions before x (undefined at the start
  // of a sequence) and is advanced past x.
  std::array<torch::Tensor, 3> project(const torch::Tensor& x, int64_t offset = 0,
                                       torch::Tensor* tail = nullptr);
  // The causal depthwise convolution of projections z (B, T, C) given the conv - 1 rows before
  // them, `before` (B, conv - 1, C), zeros when undefined: (B, T, C).
  torch::Tensor convolve(const torch::Tensor& z, const torch::Tensor& before) const;
  // Keys or values of G heads (B, S, G, dh) repeated to the H query heads: (B, S, H, dh), each
  // kv head for H / G query heads in a row; k itself when G = H.
  torch::Tensor repeat_kv(const torch::Tensor& k) const;
  // The N learned memories in front of context keys or values k (B, S, H, dh): (B, N + S, H, dh).
  torch::Tensor with_memories(const torch::Tensor& mem, const torch::Tensor& k);
  // The part of the logit multiplier that no rule or parameter changes: scale / sqrt(d_head), or
  // scale alone with qk_norm; without scale when it is learned (`beta`).
  double fixed_scale() const;
  // attend_reference under the length emulation
  Attended attend_emulated(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           int64_t offset);
  // x (..., d_head) scaled to unit rows with qk_norm; x itself otherwise.
  torch::Tensor unit(const torch::Tensor& x) const;

  bool heads_masked_ = false;  // some entry of head_mask differs from 1
  LengthEmulation emulation_;
};
TORCH_MODULE(Attention);

}  // namespace recall
