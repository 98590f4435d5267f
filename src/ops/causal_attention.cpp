#include "recall/ops/causal_attention.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <atomic>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "recall/core/error.h"
#include "recall/core/threads.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/ops/precision.h"
#include "recall/ops/row_math.h"

namespace recall {

namespace {

constexpr int64_t kBlock = 64;  // query rows per block

// Where each query block's logits live inside one item's packed buffer: block b holds rows
// [t0, t1) against the first w = N + t1 keys, row-major (rows x w).
struct Layout {
  int64_t T, N;
  std::vector<int64_t> offset;  // per block, in floats
  int64_t item = 0;             // floats per item
  Layout(int64_t T_, int64_t N_) : T(T_), N(N_) {
    for (int64_t t0 = 0; t0 < T; t0 += kBlock) {
      offset.push_back(item);
      item += rows(t0) * width(t0);
    }
  }
  int64_t rows(int64_t t0) const { return std::min(kBlock, T - t0); }
  int64_t width(int64_t t0) const { return N + t0 + rows(t0); }
};

// One (batch, head) item of a (B, rows, H, d) tensor of float32 (or bfloat16 bits, T uint16_t):
// its first row and the stride between rows.
template <typename Ptr>
struct Item {
  Ptr p;
  int64_t ld;
  Ptr row(int64_t t) const { return p + t * ld; }
};

template <typename T = float>
Item<const T*> item_of(const torch::Tensor& x, int64_t b, int64_t h) {
  return {static_cast<const T*>(x.data_ptr()) + b * x.stride(0) + h * x.stride(2), x.stride(1)};
}
Item<float*> item_of(torch::Tensor& x, int64_t b, int64_t h) {
  return {x.data_ptr<float>() + b * x.stride(0) + h * x.stride(2), x.stride(1)};
}

// q, k, v, or the output gradient as the products take them: float32 with unit stride along d;
// under precision bf16, rounded to bfloat16 once: the bits where attention_blocks_on_bf16_gemm,
// else the values as float32 (exact). The backward reads which from the saved q's dtype.
torch::Tensor product_operand(const torch::Tensor& x, bool bf16) {
  if (bf16)
    return round_to_bf16(x, attention_blocks_on_bf16_gemm() ? torch::kBFloat16 : torch::kFloat32);
  return x.stride(3) == 1 ? x : x.contiguous();
}

// The kernel's products, float32 sums into float32 C: the sgemm on float32 operands (under bf16
// holding bf16 values), the bf16 GEMM on bf16 bits.
void gemm(bool bf16, char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (bf16) count_fast_call(FastKernel::kBf16AsFloat);
  const int status = fast_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  TORCH_CHECK(status == 0, fast_gemm_name(), " failed with status ", status);
}
void gemm(bool, char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
          int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int status = fast_bf16_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  TORCH_CHECK(status == 0, bf16_gemm_name(), " failed with status ", status);
}

// Under bf16, one block's weights (kBlock rows of up to `width` keys) and (backward) their
// gradients rounded to bfloat16 (T: float values or uint16_t bits), the next products' operands,
// as autocast rounds softmax's float32 output before its product with v; empty in float32, where
// the blocks themselves are the operands.
template <typename T>
struct Rounded {
  std::vector<T> p, g;
  Rounded(int64_t width, bool weights, bool gradients = false) {
    if (weights) p.resize(static_cast<size_t>(kBlock * width));
    if (gradients) g.resize(static_cast<size_t>(kBlock * width));
  }
  T* weights() { return p.empty() ? nullptr : p.data(); }
  T* gradients() { return g.empty() ? nullptr : g.data(); }
  // A product's operand: the rounded block under bf16, the float32 block itself in fp32.
  static const T* operand(const T* rounded, const float* block) {
    if constexpr (std::is_same_v<T, float>) return rounded ? rounded : block;
    return rounded;
  }
};

// The forward of every (batch, head) item, a block of kBlock queries at a time against the keys its
// last row sees: y = softmax_causal(alpha q k^T) v. With `probs` ((B H, lay.item) of Op), each
// block's weights stay there for the backward: as float32 where the products take float32 (in
// fp32, and under bf16 on the sgemm), else as the bf16 bits that are the product's operand, whose
// float32 block is then only the thread's scratch (half the bytes written, and read back by the
// backward). Without, each thread reuses one block's scratch, so inference at long context needs
// no (T x T) buffer per item. Under bf16 the weights are rounded per block for their product with
// v. Inference runs its items under parallel_claim (core/threads.h), not an OpenMP region:
// oneDNN's sgemm inside libgomp's spinning region took 9x longer on 2 threads than on 1 when the
// cores were busy elsewhere (`recall bench eval`). Training keeps torch's parallel_for, whose
// threads are the ones its other ops just used. Op is the operands' element type (float, or
// uint16_t for bfloat16 bits: product_operand).
template <typename Op>
void attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t n_mem,
            double alpha, bool bf16, const Layout& lay, Op* probs, torch::Tensor& y) {
  constexpr bool kBits = std::is_same_v<Op, uint16_t>;
  const int64_t H = q.size(2), d = q.size(3), width = lay.width(lay.T - 1);
  // scratch: one block's float32 logits and weights where they are not kept
  auto item = [&](int64_t i, std::vector<float>& scratch, Rounded<Op>& rounded) {
    const auto qi = item_of<Op>(q, i / H, i % H), ki = item_of<Op>(k, i / H, i % H),
               vi = item_of<Op>(v, i / H, i % H);
    const auto yi = item_of(y, i / H, i % H);
    for (size_t b = 0; b < lay.offset.size(); ++b) {
      const int64_t t0 = static_cast<int64_t>(b) * kBlock, r = lay.rows(t0), w = lay.width(t0);
      Op* kept = probs ? probs + i * lay.item + lay.offset[b] : nullptr;  // (r, w)
      float* P = scratch.data();                                          // (r, w)
      Op* R = rounded.weights();  // (r, w) rounded, the product's operand (bf16)
      if constexpr (kBits) {
        if (kept) R = kept;
      } else {
        if (kept) P = kept;
      }
      gemm(bf16, 'N', 'T', r, w, d, static_cast<float>(alpha), qi.row(t0), qi.ld, ki.p, ki.ld, 0.0f,
           P, w);  // alpha q_blk k^T
      // In place; row t0 + j sees the memories and context keys up to its own position.
      row_math::causal_softmax_rows(P, r, w, n_mem + t0, R);
      gemm(bf16, 'N', 'N', r, d, w, 1.0f, Rounded<Op>::operand(R, P), w, vi.p, vi.ld, 0.0f,
           yi.row(t0), yi.ld);  // P v
    }
  };
  const int64_t n = q.size(0) * H;
  const bool need_scratch = !probs || kBits;
  if (probs) {
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(need_scratch ? static_cast<size_t>(kBlock * width) : 0);
      Rounded<Op> rounded(width, bf16 && !kBits);
      for (int64_t i = begin; i < end; ++i) item(i, scratch, rounded);
    });
    return;
  }
  // one block's weights per worker
  struct Worker {
    std::vector<float> scratch;
    std::unique_ptr<Rounded<Op>> rounded;
  };
  std::vector<Worker> workers(static_cast<size_t>(at::get_num_threads()));
  parallel_claim(n, [&](int64_t i, int worker) {
    auto& mine = workers[static_cast<size_t>(worker)];
    if (mine.scratch.empty()) {
      mine.scratch.resize(static_cast<size_t>(kBlock * width));
      mine.rounded = std::make_unique<Rounded<Op>>(width, bf16);
    }
    item(i, mine.scratch, *mine.rounded);
  });
}

// The backward of attend, item by item: from the kept weights P of each block and the output
// gradient gy,
//   dP = gy v^T,  gv += P^T gy,  dS = P * (dP - rowsum(P * dP)),  gq = alpha dS k,
//   gk += alpha dS^T q.
// Under bf16 P and dS are rounded per block for their products, as autocast rounds each
// product's float32 operands; where the forward kept P as bf16 bits (Op uint16_t), dS is computed
// from those, the rounded P (within the bound the tests check). The blocks run last to first: the
// last one sees every key, so its products write all of gk and gv (beta 0) and the earlier ones
// add to them, and gk, gv need no zero fill. gq, gk and gv may be views with any row stride (the
// slices of one packed gradient).
template <typename Op>
void attend_backward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const Op* probs, const torch::Tensor& gy, int64_t n_mem, float alpha,
                     bool bf16, torch::Tensor& gq, torch::Tensor& gk, torch::Tensor& gv) {
  constexpr bool kBits = std::is_same_v<Op, uint16_t>;
  const int64_t T = q.size(1), H = q.size(2), d = q.size(3), S = k.size(1);
  const Layout lay(T, n_mem);
  at::parallel_for(0, q.size(0) * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> dP(static_cast<size_t>(kBlock * S));
    // under bf16: dS always, P unless the forward kept it rounded
    Rounded<Op> rounded(S, /*weights=*/bf16 && !kBits, /*gradients=*/bf16);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b_ = i / H, h = i % H;
      const auto qi = item_of<Op>(q, b_, h), ki = item_of<Op>(k, b_, h), vi = item_of<Op>(v, b_, h),
                 gi = item_of<Op>(gy, b_, h);
      const auto gqi = item_of(gq, b_, h), gki = item_of(gk, b_, h), gvi = item_of(gv, b_, h);
      for (size_t b = lay.offset.size(); b-- > 0;) {
        const int64_t t0 = static_cast<int64_t>(b) * kBlock, r = lay.rows(t0), w = lay.width(t0);
        const float first = b + 1 == lay.offset.size() ? 0.0f : 1.0f;  // the last block writes
        const Op* P = probs + i * lay.item + lay.offset[b];            // (r, w)
        float* G = dP.data();                                          // (r, w)
        gemm(bf16, 'N', 'T', r, w, d, 1.0f, gi.row(t0), gi.ld, vi.p, vi.ld, 0.0f, G,
             w);  // gy v^T
        // dS = P * (dP - sum_j P dP), in place; under bf16 into the rounded P and dS instead
        const Op* Pr = P;  // P as the products take it
        if constexpr (kBits) {
          row_math::softmax_backward_rows(P, G, r, w, rounded.gradients());
        } else {
          row_math::softmax_backward_rows(P, G, r, w, rounded.weights(), rounded.gradients());
          Pr = Rounded<Op>::operand(rounded.weights(), P);
        }
        gemm(bf16, 'T', 'N', w, d, r, 1.0f, Pr, w, gi.row(t0), gi.ld, first, gvi.p,
             gvi.ld);  // gv += P^T gy
        const Op* dS = Rounded<Op>::operand(rounded.gradients(), G);
        gemm(bf16, 'N', 'N', r, d, w, alpha, dS, w, ki.p, ki.ld, 0.0f, gqi.row(t0),
             gqi.ld);  // dS k
        gemm(bf16, 'T', 'N', w, d, r, alpha, dS, w, qi.row(t0), qi.ld, first, gki.p,
             gki.ld);  // += dS^T q
      }
    }
  });
}

// f(T{}) with T the operands' element type: uint16_t for bfloat16 bits, else float.
template <typename F>
void with_operand_type(const torch::Tensor& x, F&& f) {
  if (x.scalar_type() == torch::kBFloat16) return f(uint16_t{});
  f(float{});
}

// The forward both autograd functions run: y (B, T, H, d), and the weights the backward reads
// (`probs`); the rule's settings go into ctx.
std::array<torch::Tensor, 2> attention_forward(torch::autograd::AutogradContext* ctx,
                                               const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, int64_t n_mem, double alpha,
                                               bool bf16) {
  const Layout lay(q.size(1), n_mem);
  auto y = torch::empty(q.sizes(), q.options().dtype(torch::kFloat32));  // (B, T, H, d)
  torch::Tensor probs;  // packed, the operands' type: float32, or bfloat16 bits
  with_operand_type(q, [&](auto t) {
    using Op = decltype(t);
    probs = torch::empty({q.size(0) * q.size(2), lay.item}, q.options().dtype(q.scalar_type()));
    attend<Op>(q, k, v, n_mem, alpha, bf16, lay, static_cast<Op*>(probs.data_ptr()), y);
  });
  ctx->saved_data["n_mem"] = n_mem;
  ctx->saved_data["alpha"] = alpha;
  ctx->saved_data["bf16"] = bf16;
  return {y, probs};
}

// The backward both run, into gq, gk and gv: uninitialised, and views of any row stride.
void attention_backward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                        const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& probs,
                        const torch::Tensor& gy, torch::Tensor& gq, torch::Tensor& gk,
                        torch::Tensor& gv) {
  const int64_t n_mem = ctx->saved_data["n_mem"].toInt();
  const float alpha = static_cast<float>(ctx->saved_data["alpha"].toDouble());
  const bool bf16 = ctx->saved_data["bf16"].toBool();  // as the forward ran
  // gy rounded as the forward rounded q: to bits or to values
  const auto g = bf16 ? round_to_bf16(gy, q.scalar_type()) : product_operand(gy, false);
  with_operand_type(q, [&](auto t) {
    using Op = decltype(t);
    attend_backward<Op>(q, k, v, static_cast<const Op*>(probs.data_ptr()), g, n_mem, alpha, bf16,
                        gq, gk, gv);
  });
}

struct CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, int64_t n_mem,
                               double alpha) {
    RECORD_USER_SCOPE("recall::attention");  // a part of the step's profile
    const bool bf16 = matmul_precision() == Precision::kBf16;
    // under bf16 the rounded copies are what the backward's products take
    auto q = product_operand(q_in, bf16), k = product_operand(k_in, bf16),
         v = product_operand(v_in, bf16);
    auto [y, probs] = attention_forward(ctx, q, k, v, n_mem, alpha, bf16);
    ctx->save_for_backward({q, k, v, probs});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_USER_SCOPE("recall::attention_backward");
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3];
    const auto f32 = q.options().dtype(torch::kFloat32);
    auto gq = torch::empty(q.sizes(), f32);
    auto gk = torch::empty(k.sizes(), f32), gv = torch::empty(k.sizes(), f32);
    attention_backward(ctx, q, k, v, probs, grads[0], gq, gk, gv);
    return {gq, gk, gv, torch::Tensor(), torch::Tensor()};
  }
};

// q, k and v as the three slices of one (B, T, 3, H, d) projection: the same kernel, whose
// backward writes the projection's gradient as one tensor, where a split of the projection into
// q, k, v would gather three gradients into one with a copy (a cat) in its backward.
struct PackedAttentionFunction : public torch::autograd::Function<PackedAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv_in,
                               double alpha) {
    RECORD_USER_SCOPE("recall::attention");
    const bool bf16 = matmul_precision() == Precision::kBf16;
    auto qkv = product_operand(qkv_in, bf16);  // (B, T, 3, H, d), rounded once under bf16
    auto [y, probs] = attention_forward(ctx, qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2),
                                        0, alpha, bf16);
    ctx->save_for_backward({qkv, probs});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_USER_SCOPE("recall::attention_backward");
    const auto saved = ctx->get_saved_variables();
    const auto &qkv = saved[0], &probs = saved[1];
    auto g = torch::empty(qkv.sizes(), qkv.options().dtype(torch::kFloat32));  // (B, T, 3, H, d)
    auto gq = g.select(2, 0), gk = g.select(2, 1), gv = g.select(2, 2);
    attention_backward(ctx, qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2), probs, grads[0],
                       gq, gk, gv);
    return {g, torch::Tensor()};
  }
};

}  // namespace

// A block's products are small (64 rows by d_head). Where AMX runs the bf16 GEMM, its per-call
// set-up (tiles, packing) outweighs them: oneDNN's took 59 ms of a bench-gpt step where the sgemm
// took 28. Elsewhere (AVX512-BF16 without AMX) the bf16 GEMM ran the block shapes at 1.7x to 2x
// the sgemm's rate on one core of an AMD Zen 4 (150 to 188 against 70 to 110 GFLOP/s).
namespace {
std::atomic<int> blocks_on_bf16_gemm{-1};  // -1: the CPU decides
}  // namespace

bool attention_blocks_on_bf16_gemm() {
  static const bool by_cpu = !bf16_gemm_name().empty() && cpu_bf16_units() != "AMX";
  const int forced = blocks_on_bf16_gemm.load();
  return forced < 0 ? by_cpu : forced == 1;
}

bool set_attention_blocks_on_bf16_gemm(bool on) {
  const bool was = attention_blocks_on_bf16_gemm();
  blocks_on_bf16_gemm = on ? 1 : 0;
  return was;
}

bool causal_attention_runs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return fast_gemm_available() && fast_kernels(q.device()) && q.scalar_type() == torch::kFloat32 &&
         k.scalar_type() == torch::kFloat32 && v.scalar_type() == torch::kFloat32 && q.numel() > 0;
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, int64_t n_mem, double alpha) {
  check_arg(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && q.size(0) == k.size(0) &&
                q.size(2) == k.size(2) && q.size(3) == k.size(3) && n_mem >= 0 &&
                k.size(1) == n_mem + q.size(1),
            "causal_attention: expected q (B, T, H, d), k and v (B, N + T, H, d)");
  check_arg(causal_attention_runs(q, k, v),
            "causal_attention: needs non-empty float32 CPU tensors, oneDNN's sgemm and the fast "
            "kernels; elsewhere run causal_attention_reference");
  count_fast_call(FastKernel::kAttention);
  const bool grad = torch::GradMode::is_enabled() &&
                    (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (grad) return CausalAttentionFunction::apply(q, k, v, n_mem, alpha);
  // inference: the same blocks without keeping their weights
  RECORD_USER_SCOPE("recall::attention");
  const bool bf16 = matmul_precision() == Precision::kBf16;
  auto qc = product_operand(q, bf16), kc = product_operand(k, bf16), vc = product_operand(v, bf16);
  auto y = torch::empty(q.sizes(), q.options());  // (B, T, H, d)
  const Layout lay(q.size(1), n_mem);
  with_operand_type(
      qc, [&](auto t) { attend<decltype(t)>(qc, kc, vc, n_mem, alpha, bf16, lay, nullptr, y); });
  return y;
}

torch::Tensor causal_attention_packed(const torch::Tensor& qkv, double alpha) {
  check_arg(qkv.dim() == 5 && qkv.size(2) == 3,
            "causal_attention_packed: expected qkv (B, T, 3, H, d)");
  const auto q = qkv.select(2, 0);
  check_arg(causal_attention_runs(q, q, q),
            "causal_attention_packed: needs a non-empty float32 CPU tensor, oneDNN's sgemm and the "
            "fast kernels; elsewhere run causal_attention_reference");
  if (!torch::GradMode::is_enabled() || !qkv.requires_grad())  // inference: nothing to gather
    return causal_attention(q, qkv.select(2, 1), qkv.select(2, 2), 0, alpha);
  count_fast_call(FastKernel::kAttention);
  return PackedAttentionFunction::apply(qkv, alpha);
}

Attended causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& scale,
                                    int64_t n_mem, int64_t offset) {
  const int64_t T = q.size(1), S = n_mem + offset + T;
  check_arg(
      q.dim() == 4 && k.dim() == 4 && k.size(1) == S && q.size(2) == k.size(2) &&
          q.size(3) == k.size(3) && (!v.defined() || v.sizes() == k.sizes()),
      fmt::format("attention reference: expected q (B, T, H, dh) and k, v (B, N + offset + T, "
                  "H, dh) with N = {} memories and offset {}",
                  n_mem, offset));
  auto logits = torch::einsum("bthd,bshd->bhts", {q, k}) * scale.unsqueeze(-1);  // (B, H, T, S)
  // query t sees the N memories and context keys s <= offset + t: key column j when j <= N + p
  const auto index = q.options().dtype(torch::kInt64);
  auto col = torch::arange(S, index).unsqueeze(0);                   // (1, S)
  auto row = torch::arange(offset, offset + T, index).unsqueeze(1);  // (T, 1)
  auto hidden = col.gt(row + n_mem);                                 // (T, S)
  auto w = torch::softmax(logits.masked_fill(hidden, -std::numeric_limits<double>::infinity()), -1);
  if (!v.defined()) return {torch::Tensor(), w};
  return {torch::einsum("bhts,bshd->bthd", {w, v}), w};  // (B, T, H, dh)
}

}  // namespace recall
