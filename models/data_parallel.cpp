#include "data_parallel.h"

#include <ATen/Parallel.h>

#include <exception>
#include <thread>

namespace recall {

namespace {

// Sum (not mean) of the cross-entropy of one row slice, scaled by 1 / total positions.
torch::Tensor slice_loss(Transformer& model, const torch::Tensor& inputs,
                         const torch::Tensor& targets, double scale) {
  auto logits = model(inputs);  // (b, T, vocab)
  namespace F = torch::nn::functional;
  auto sum = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape(-1),
                              F::CrossEntropyFuncOptions().reduction(torch::kSum));
  return sum * scale;
}

}  // namespace

double data_parallel_backward(Transformer& model, const torch::Tensor& inputs,
                              const torch::Tensor& targets, int workers) {
  const int64_t B = inputs.size(0);
  const double scale = 1.0 / static_cast<double>(inputs.numel());
  const int64_t n = std::min<int64_t>(std::max(workers, 1), B);
  if (n == 1) {
    auto loss = slice_loss(model, inputs, targets, scale);
    loss.backward();
    return loss.item<double>();
  }
  const int caller_threads = at::get_num_threads();
  std::vector<double> losses(n, 0.0);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < n; ++w) {
    const int64_t begin = B * w / n, end = B * (w + 1) / n;
    threads.emplace_back([&, w, begin, end] {
      try {
        at::set_num_threads(1);  // this thread's torch ops and oneDNN run single-threaded
        auto loss =
            slice_loss(model, inputs.slice(0, begin, end), targets.slice(0, begin, end), scale);
        loss.backward();
        losses[w] = loss.item<double>();
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  at::set_num_threads(caller_threads);  // the workers lowered torch's default for new threads
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  double total = 0.0;
  for (double l : losses) total += l;
  return total;
}

}  // namespace recall
