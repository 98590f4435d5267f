#include "recall/stores/causal_attention.h"

#include <ATen/Parallel.h>

#include "recall/core/error.h"
#include "recall/core/gemm.h"
#include "recall/core/kernels.h"
#include "recall/core/row_math.h"
#include "recall/core/threads.h"

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

// One (batch, head) item of a (B, rows, H, d) tensor: its first row and the stride between rows.
template <typename Ptr>
struct Item {
  Ptr p;
  int64_t ld;
  Ptr row(int64_t t) const { return p + t * ld; }
};

template <typename T>
Item<T*> item_of(const torch::Tensor& x, T* base, int64_t b, int64_t h) {
  return {base + b * x.stride(0) + h * x.stride(2), x.stride(1)};
}

torch::Tensor unit_last_stride(const torch::Tensor& x) {
  return x.stride(3) == 1 ? x : x.contiguous();
}

void gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int status = fast_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  TORCH_CHECK(status == 0, fast_gemm_name(), " failed with status ", status);
}

// The forward of every (batch, head) item, a block of kBlock queries at a time against the keys its
// last row sees: y = softmax_causal(alpha q k^T) v. With `probs` ((B H, lay.item)), each block's
// weights stay there for the backward; without, each thread reuses one block's scratch, so
// inference at long context needs no (T x T) buffer per item.
// Inference runs its items under parallel_claim (core/threads.h), not an OpenMP region: oneDNN's
// sgemm inside libgomp's spinning region took 9x longer on 2 threads than on 1 when the cores were
// busy elsewhere (`recall bench eval`). Training keeps torch's parallel_for, whose threads are
// the ones its other ops just used.
void attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t n_mem,
            double alpha, const Layout& lay, float* probs, torch::Tensor& y) {
  const int64_t H = q.size(2), d = q.size(3);
  auto item = [&](int64_t i, float* scratch) {
    const auto qi = item_of(q, q.data_ptr<float>(), i / H, i % H);
    const auto ki = item_of(k, k.data_ptr<float>(), i / H, i % H);
    const auto vi = item_of(v, v.data_ptr<float>(), i / H, i % H);
    const auto yi = item_of(y, y.data_ptr<float>(), i / H, i % H);
    for (size_t b = 0; b < lay.offset.size(); ++b) {
      const int64_t t0 = static_cast<int64_t>(b) * kBlock, r = lay.rows(t0), w = lay.width(t0);
      float* P = probs ? probs + i * lay.item + lay.offset[b] : scratch;  // (r, w)
      gemm('N', 'T', r, w, d, static_cast<float>(alpha), qi.row(t0), qi.ld, ki.p, ki.ld, 0.0f, P,
           w);  // alpha q_blk k^T
      // In place; row t0 + j sees the memories and context keys up to its own position.
      row_math::causal_softmax_rows(P, r, w, n_mem + t0);
      gemm('N', 'N', r, d, w, 1.0f, P, w, vi.p, vi.ld, 0.0f, yi.row(t0), yi.ld);  // P v
    }
  };
  const int64_t n = q.size(0) * H;
  if (probs) {
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) item(i, nullptr);
    });
    return;
  }
  // one block's weights per worker
  std::vector<std::vector<float>> scratch(static_cast<size_t>(at::get_num_threads()));
  parallel_claim(n, [&](int64_t i, int worker) {
    auto& mine = scratch[static_cast<size_t>(worker)];
    if (mine.empty()) mine.resize(static_cast<size_t>(kBlock * lay.width(lay.T - 1)));
    item(i, mine.data());
  });
}

struct CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, int64_t n_mem,
                               double alpha) {
    auto q = unit_last_stride(q_in), k = unit_last_stride(k_in), v = unit_last_stride(v_in);
    const Layout lay(q.size(1), n_mem);
    auto probs = torch::empty({q.size(0) * q.size(2), lay.item}, q.options());  // packed weights
    auto y = torch::empty(q.sizes(), q.options());                              // (B, T, H, d)
    attend(q, k, v, n_mem, alpha, lay, probs.data_ptr<float>(), y);
    ctx->save_for_backward({q, k, v, probs});
    ctx->saved_data["n_mem"] = n_mem;
    ctx->saved_data["alpha"] = alpha;
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3];
    const int64_t n_mem = ctx->saved_data["n_mem"].toInt();
    const float alpha = static_cast<float>(ctx->saved_data["alpha"].toDouble());
    const auto gy = unit_last_stride(grads[0]);
    const int64_t B = q.size(0), T = q.size(1), H = q.size(2), d = q.size(3), S = k.size(1);
    const Layout lay(T, n_mem);
    auto gq = torch::empty({B, T, H, d}, q.options());
    auto gk = torch::zeros({B, S, H, d}, q.options()), gv = torch::zeros({B, S, H, d}, q.options());
    at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> dP(static_cast<size_t>(kBlock * S));
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b_ = i / H, h = i % H;
        const auto qi = item_of(q, q.data_ptr<float>(), b_, h);
        const auto ki = item_of(k, k.data_ptr<float>(), b_, h);
        const auto vi = item_of(v, v.data_ptr<float>(), b_, h);
        const auto gi = item_of(gy, gy.data_ptr<float>(), b_, h);
        const auto gqi = item_of(gq, gq.data_ptr<float>(), b_, h);
        const auto gki = item_of(gk, gk.data_ptr<float>(), b_, h);
        const auto gvi = item_of(gv, gv.data_ptr<float>(), b_, h);
        for (size_t b = 0; b < lay.offset.size(); ++b) {
          const int64_t t0 = static_cast<int64_t>(b) * kBlock, r = lay.rows(t0), w = lay.width(t0);
          const float* P = probs.data_ptr<float>() + i * lay.item + lay.offset[b];    // (r, w)
          float* G = dP.data();                                                       // (r, w)
          gemm('N', 'T', r, w, d, 1.0f, gi.row(t0), gi.ld, vi.p, vi.ld, 0.0f, G, w);  // gy v^T
          gemm('T', 'N', w, d, r, 1.0f, P, w, gi.row(t0), gi.ld, 1.0f, gvi.p,
               gvi.ld);                                 // gv += P^T gy
          row_math::softmax_backward_rows(P, G, r, w);  // dS = P * (dP - sum_j P dP), in place
          gemm('N', 'N', r, d, w, alpha, G, w, ki.p, ki.ld, 0.0f, gqi.row(t0), gqi.ld);  // dS k
          gemm('T', 'N', w, d, r, alpha, G, w, qi.row(t0), qi.ld, 1.0f, gki.p,
               gki.ld);  // += dS^T q
        }
      }
    });
    return {gq, gk, gv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

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
            "kernels; elsewhere the attention store runs AttentionImpl::attend_reference");
  count_fast_call(FastKernel::kAttention);
  const bool grad = torch::GradMode::is_enabled() &&
                    (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (grad) return CausalAttentionFunction::apply(q, k, v, n_mem, alpha);
  // inference: the same blocks without keeping their weights
  auto qc = unit_last_stride(q), kc = unit_last_stride(k), vc = unit_last_stride(v);
  auto y = torch::empty(q.sizes(), q.options());  // (B, T, H, d)
  attend(qc, kc, vc, n_mem, alpha, Layout(q.size(1), n_mem), nullptr, y);
  return y;
}

}  // namespace recall
