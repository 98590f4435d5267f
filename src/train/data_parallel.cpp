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

// One backward over the whole batch on this thread; with `ready`, each leaf's hook sees its whole
// gradient of this backward (autograd has summed every use) just before it is accumulated into
// .grad. Returns the loss.
double whole_batch_backward(Transformer& model, const Batch& batch, double scale,
                            const std::vector<torch::Tensor>& params, const GradReady& ready) {
  std::vector<unsigned> hooks;
  if (ready)
    for (size_t i = 0; i < params.size(); ++i)
      hooks.push_back(params[i].register_hook([&ready, i](torch::Tensor g) { ready(i, g); }));
  auto unhook = [&] {
    for (size_t i = 0; i < hooks.size(); ++i) params[i].remove_hook(hooks[i]);
  };
  // the graph is freed on return, inside the caller's profiled span
  auto loss = scored_loss(model, batch.x, batch.y, batch.mask, scale);
  try {
    loss.backward();
  } catch (...) {
    unhook();
    throw;
  }
  unhook();
  return loss.item<double>();
}

// What the workers of one step hand back: worker w's loss, its gradients grads[w][i] (undefined
// for a parameter its slice did not use) and, when profiled, its step parts.
struct WorkerResults {
  std::vector<double> losses;
  std::vector<std::vector<torch::Tensor>> grads;
  std::vector<StepProfile> parts;
};

// Worker w of n: the backward of rows [B w / n, B (w + 1) / n) of the batch. The first exception
// a worker threw is rethrown here, after all have finished.
WorkerResults run_workers(Transformer& model, const Batch& batch, double scale, int64_t n,
                          const std::vector<torch::Tensor>& params, bool profile) {
  const int64_t B = batch.x.size(0);
  WorkerResults r{std::vector<double>(n, 0.0), std::vector<std::vector<torch::Tensor>>(n),
                  std::vector<StepProfile>(profile ? n : 0)};
  std::vector<std::exception_ptr> errors(n);
  worker_pool(static_cast<int>(n)).run([&](int w) {
    const auto begun = std::chrono::steady_clock::now();
    const StepProfile worker_before = profile ? thread_op_seconds() : StepProfile{};
    try {
      const int64_t begin = B * w / n, end = B * (w + 1) / n;
      auto rows = [&](const torch::Tensor& t) { return t.slice(0, begin, end); };
      auto loss = scored_loss(model, rows(batch.x), rows(batch.y), rows(batch.mask), scale);
      r.losses[w] = loss.item<double>();
      r.grads[w] = torch::autograd::grad({loss}, params, /*grad_outputs=*/{},
                                         /*retain_graph=*/false, /*create_graph=*/false,
                                         /*allow_unused=*/true);
    } catch (...) {
      errors[w] = std::current_exception();
    }
    if (profile) r.parts[w] = thread_parts_since(worker_before, seconds_since(begun));
  });
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return r;
}

// .grad += g_0 + g_1 + ... + g_{n-1} for each parameter, added in worker order whatever order the
// workers finished in; with `ready`, each sum is handed to it first, last parameters first (as
// backward produces them: the all-reduce buckets fill from the end, so the first starts while the
// rest are summed). Without it, the float32 sums run beforehand on as many threads as there are
// workers (sleeping ones, core/threads.h), a parameter at a time. Either way each element's terms
// are added as add_ adds them, so the bits do not depend on where a sum ran.
void sum_gradients(const std::vector<torch::Tensor>& params,
                   std::vector<std::vector<torch::Tensor>>& grads, const GradReady& ready) {
  torch::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(grads.size());
  // Each parameter's first gradient is ours to add into, unless autograd handed back a view (an
  // expand); the later ones are made contiguous here, so that the sums read plain floats.
  std::vector<torch::Tensor> sums(params.size());
  std::vector<int64_t> first(params.size(), n);
  for (size_t i = 0; i < params.size(); ++i)
    for (int64_t w = 0; w < n; ++w) {
      auto& g = grads[w][i];
      if (!g.defined()) continue;
      if (first[i] == n) {
        first[i] = w;
        sums[i] = g.is_contiguous() && !g.is_view() ? g : g.clone(at::MemoryFormat::Contiguous);
      } else if (!g.is_contiguous()) {
        g = g.contiguous();
      }
    }
  auto add_rest = [&](size_t i) {  // sums[i] += the later workers' gradients, in order
    for (int64_t w = first[i] + 1; w < n; ++w) {
      const auto& g = grads[w][i];
      if (!g.defined()) continue;
      if (sums[i].scalar_type() != torch::kFloat32) {
        sums[i].add_(g);
        continue;
      }
      float* s = sums[i].data_ptr<float>();
      const float* p = g.data_ptr<float>();
      for (int64_t j = 0, size = sums[i].numel(); j < size; ++j) s[j] += p[j];
    }
  };
  const bool ahead = !ready;  // the sums before the loop below, in parallel
  if (ahead) {
    std::vector<size_t> floats;  // add_ on a claim thread would start torch's thread set-up
    for (size_t i = 0; i < params.size(); ++i)
      if (sums[i].defined() && sums[i].scalar_type() == torch::kFloat32) floats.push_back(i);
    parallel_claim(static_cast<int64_t>(floats.size()), static_cast<int>(n),
                   [&](int64_t k, int) { add_rest(floats[static_cast<size_t>(k)]); });
  }
  for (size_t i = params.size(); i-- > 0;) {
    auto& sum = sums[i];
    if (!sum.defined()) continue;
    if (!ahead || sum.scalar_type() != torch::kFloat32) add_rest(i);
    if (ready) ready(i, sum);
    auto& grad = const_cast<torch::Tensor&>(params[i]).mutable_grad();
    if (grad.defined())
      grad.add_(sum);
    else
      grad = sum;
  }
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
    const double total = whole_batch_backward(model, batch, scale, params, ready);
    if (profile) *profile += thread_parts_since(ops_before, seconds_since(start));
    return total;
  }
  count_fast_call(FastKernel::kDataParallel);
  const auto region = std::chrono::steady_clock::now();
  WorkerResults r = run_workers(model, batch, scale, n, params, profile != nullptr);
  const auto summed = std::chrono::steady_clock::now();
  if (profile) {  // the workers' mean parts; the rest of the region is waiting for the slowest
    StepProfile mean;
    for (const auto& p : r.parts) mean += p;
    mean *= 1.0 / static_cast<double>(n);
    mean[StepPart::kWaits] += std::chrono::duration<double>(summed - region).count() - mean.total();
    *profile += mean;
  }
  sum_gradients(params, r.grads, ready);
  double total = 0.0;
  for (double l : r.losses) total += l;
  if (profile) {
    (*profile)[StepPart::kGradSum] += seconds_since(summed);
    // the batch's count and the slices, before the workers start
    (*profile)[StepPart::kUnrecorded] += std::chrono::duration<double>(region - start).count();
  }
  return total;
}

}  // namespace recall
