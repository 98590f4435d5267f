#include "recall/train/data_parallel.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "recall/core/threads.h"
#include "recall/ops/cross_entropy.h"
#include "recall/ops/kernels.h"
#include "recall/ops/precision.h"

namespace recall {

namespace {

// Sum (not mean) of the cross-entropy over the scored positions of x (b, T), times `scale`.
torch::Tensor scored_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y,
                          const torch::Tensor& mask, double scale) {
  const AutocastScope autocast(x.device());  // bf16 products where the fast paths do not run
  auto logits = model->forward_at(x, mask).to(torch::kFloat32);  // (scored, vocab)
  return cross_entropy_sum(logits, y.index({mask})) * scale;
}

// n threads that live for the whole process, each running torch single-threaded; run(task) calls
// task(w) on worker w = 0..n-1 and waits for all. Fresh threads every step cost more than their
// start: torch initialises each new thread's thread count with at::set_num_threads, which also
// rebuilds its process-wide pthreadpool (leaving a thread spinning), and so did lowering it to 1.
// Here that happens once per worker. The pools are never destroyed (their threads only wait).
class WorkerPool {
 public:
  explicit WorkerPool(int n) {
    const int caller_threads = at::get_num_threads();
    for (int w = 0; w < n; ++w) threads_.emplace_back([this, w] { loop(w); });
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return ready_ == static_cast<int>(threads_.size()); });
    lock.unlock();
    at::set_num_threads(caller_threads);  // the workers lowered torch's default for new threads
  }

  void run(const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> serial(run_mutex_);  // one step at a time on these workers
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    start_cv_.notify_all();
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    task_ = nullptr;
  }

 private:
  void loop(int w) {
    at::internal::lazy_init_num_threads();  // before lowering: it would reset the count later
    at::set_num_threads(1);  // this thread's torch ops and oneDNN run single-threaded
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    ++ready_;
    done_cv_.notify_all();
    for (;;) {
      start_cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      const auto* task = task_;
      lock.unlock();
      (*task)(w);  // the task catches its own exceptions
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mutex_, mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0, ready_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

WorkerPool& worker_pool(int n) {
  static std::mutex mutex;
  static auto* pools = new std::map<int, std::unique_ptr<WorkerPool>>();  // never freed: see above
  std::lock_guard<std::mutex> lock(mutex);
  auto& pool = (*pools)[n];
  if (!pool) pool = std::make_unique<WorkerPool>(n);
  return *pool;
}

}  // namespace

double data_parallel_backward(Transformer& model, const Batch& batch, int workers,
                              int64_t scored_total, const GradReady& ready, StepProfile* profile) {
  const auto start = std::chrono::steady_clock::now();
  const StepProfile ops_before = profile ? thread_op_seconds() : StepProfile{};
  const int64_t B = batch.x.size(0);
  const int64_t scored = scored_total > 0 ? scored_total : batch.mask.sum().item<int64_t>();
  const double scale = 1.0 / static_cast<double>(std::max<int64_t>(scored, 1));
  const int64_t n = fast_kernels(batch.x.device()) ? std::min<int64_t>(std::max(workers, 1), B) : 1;
  const auto params = model->parameters();
  if (n == 1) {
    // A leaf's hook sees its whole gradient of this backward (autograd has summed every use)
    // just before it is accumulated into .grad.
    std::vector<unsigned> hooks;
    if (ready)
      for (size_t i = 0; i < params.size(); ++i)
        hooks.push_back(params[i].register_hook([&ready, i](torch::Tensor g) { ready(i, g); }));
    auto unhook = [&] {
      for (size_t i = 0; i < hooks.size(); ++i) params[i].remove_hook(hooks[i]);
    };
    double total = 0;
    {  // the graph is freed at the end of this scope, inside the profiled span
      auto loss = scored_loss(model, batch.x, batch.y, batch.mask, scale);
      try {
        loss.backward();
      } catch (...) {
        unhook();
        throw;
      }
      unhook();
      total = loss.item<double>();
    }
    if (profile) *profile += thread_parts_since(ops_before, seconds_since(start));
    return total;
  }
  count_fast_call(FastKernel::kDataParallel);
  std::vector<double> losses(n, 0.0);
  std::vector<std::vector<torch::Tensor>> grads(n);  // grads[w][i]: worker w's for parameter i
  std::vector<std::exception_ptr> errors(n);
  std::vector<StepProfile> parts(profile ? n : 0);
  const auto region = std::chrono::steady_clock::now();
  worker_pool(static_cast<int>(n)).run([&](int w) {
    const auto begun = std::chrono::steady_clock::now();
    const StepProfile worker_before = profile ? thread_op_seconds() : StepProfile{};
    try {
      const int64_t begin = B * w / n, end = B * (w + 1) / n;
      auto rows = [&](const torch::Tensor& t) { return t.slice(0, begin, end); };
      auto loss = scored_loss(model, rows(batch.x), rows(batch.y), rows(batch.mask), scale);
      losses[w] = loss.item<double>();
      grads[w] = torch::autograd::grad({loss}, params, /*grad_outputs=*/{},
                                       /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    } catch (...) {
      errors[w] = std::current_exception();
    }
    if (profile) parts[w] = thread_parts_since(worker_before, seconds_since(begun));
  });
  const auto summed = std::chrono::steady_clock::now();
  if (profile) {  // the workers' mean parts; the rest of the region is waiting for the slowest
    StepProfile mean;
    for (const auto& p : parts) mean += p;
    mean *= 1.0 / static_cast<double>(n);
    mean[StepPart::kWaits] += std::chrono::duration<double>(summed - region).count() - mean.total();
    *profile += mean;
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // .grad += g_0 + g_1 + ... + g_{n-1}, added in this order whatever order the workers finished in.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> sums(params.size());
  // The first gradient of each parameter is ours to add into, unless autograd handed back a view
  // (an expand); the float32 ones are summed below on the workers, the rest here.
  std::vector<size_t> on_workers;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& sum = sums[i];
    for (int64_t w = 0; w < n && !sum.defined(); ++w) {
      const auto& g = grads[w][i];
      if (g.defined())
        sum = g.is_contiguous() && !g.is_view() ? g : g.clone(at::MemoryFormat::Contiguous);
    }
    if (!sum.defined() || ready || sum.scalar_type() != torch::kFloat32) continue;
    on_workers.push_back(i);
    for (int64_t w = 0; w < n; ++w) {  // the loops below read the others' floats in order
      auto& g = grads[w][i];
      if (g.defined() && !g.is_contiguous()) g = g.contiguous();
    }
  }
  // Without an all-reduce to feed in order, the sums of float32 gradients run on as many threads
  // as the backward's workers (sleeping ones, core/threads.h), a parameter at a time, each
  // element's terms added in worker order as add_ adds them.
  parallel_claim(static_cast<int64_t>(on_workers.size()), static_cast<int>(n),
                 [&](int64_t item, int) {
                   const size_t i = on_workers[static_cast<size_t>(item)];
                   float* s = sums[i].data_ptr<float>();
                   const int64_t size = sums[i].numel();
                   bool first = true;
                   for (int64_t w = 0; w < n; ++w) {
                     const auto& g = grads[w][i];
                     if (!g.defined()) continue;
                     if (first) {  // the sum itself
                       first = false;
                       continue;
                     }
                     const float* p = g.data_ptr<float>();
                     for (int64_t j = 0; j < size; ++j) s[j] += p[j];
                   }
                 });
  // Last parameters first, as backward produces them: the all-reduce buckets fill from the end, so
  // the first starts while the rest are summed.
  for (size_t i = params.size(); i-- > 0;) {
    auto& sum = sums[i];
    if (!sum.defined()) continue;
    if (ready || sum.scalar_type() != torch::kFloat32) {
      bool first = true;
      for (int64_t w = 0; w < n; ++w) {
        const auto& g = grads[w][i];
        if (!g.defined()) continue;
        if (!first) sum.add_(g);
        first = false;
      }
    }
    if (ready) ready(i, sum);
    auto& grad = const_cast<torch::Tensor&>(params[i]).mutable_grad();
    if (grad.defined())
      grad.add_(sum);
    else
      grad = sum;
  }
  double total = 0.0;
  for (double l : losses) total += l;
  if (profile) {
    (*profile)[StepPart::kGradSum] += seconds_since(summed);
    // the batch's count and the slices, before the workers start
    (*profile)[StepPart::kUnrecorded] += std::chrono::duration<double>(region - start).count();
  }
  return total;
}

}  // namespace recall
