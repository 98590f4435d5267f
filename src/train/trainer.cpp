// The training loop. Exact resume rests on three things: everything random is drawn from generators
// whose state the checkpoint holds (the task's, torch's), the learning rate is a function of the
// step alone, and the evaluation set comes from a generator of its own so evaluating never moves
// training.
#include "recall/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "recall/core/device.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/core/signals.h"
#include "recall/core/threads.h"
#include "recall/models/block.h"
#include "recall/ops/fused_adamw.h"
#include "recall/ops/gemm.h"
#include "recall/ops/kernels.h"
#include "recall/ops/peak_flops.h"
#include "recall/ops/precision.h"
#include "recall/train/checkpoint.h"
#include "recall/train/data_parallel.h"
#include "recall/train/estimates.h"
#include "recall/train/metrics.h"

namespace recall {
namespace fs = std::filesystem;
namespace {

// On resume, records past the checkpoint's step came from steps that will be taken again.
void trim_metrics(const std::string& run_dir, int64_t step) {
  std::string kept;
  for (const auto& r : read_metrics(run_dir))
    if (r.step <= step) kept += metrics_line(r) + "\n";
  write_file_atomic(metrics_path(run_dir), kept);
}

// The global gradient norm, clipped to max_norm when that is > 0, as torch's clip_grad_norm_
// clips (its ops, so its bits): the norm of the per-gradient norms, and every gradient times
// min(1, max_norm / (norm + 1e-6)) in float32. The multiplication is left to the optimizer, which
// makes it as it reads each gradient (FusedAdamW::scale_gradients) instead of in a pass of its
// own. torch's clip turns max_norm into a float tensor, so "no clip" cannot be a huge max_norm.
double grad_norm(const std::vector<torch::Tensor>& params, double max_norm, FusedAdamW& optimizer) {
  if (max_norm > 0) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> norms;
    for (const auto& p : params)
      if (p.grad().defined()) norms.push_back(p.grad().norm(2.0));
    if (norms.empty()) return 0.0;
    const auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2.0);
    const auto coef = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
    optimizer.scale_gradients(coef.item<float>());
    return total.item<double>();
  }
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += p.grad().to(torch::kDouble).square().sum().item<double>();
  return std::sqrt(sq);
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The lowest evaluation loss a run logged; infinity when there is none.
double best_eval_loss(const std::string& run_dir) {
  double best = kInfinity;
  for (const auto& r : read_metrics(run_dir))
    if (const auto loss = r.get("loss"); r.eval && loss) best = std::min(best, *loss);
  return best;
}

}  // namespace

Batch to_device(const Batch& b, const torch::Device& device) {
  return {b.x.to(device), b.y.to(device), b.mask.to(device)};
}

double mean_step_seconds(const std::vector<double>& step_seconds) {
  if (step_seconds.empty()) return 0.0;
  const size_t skip = step_seconds.size() > kWarmupSteps ? kWarmupSteps : 0;
  double sum = 0;
  for (size_t i = skip; i < step_seconds.size(); ++i) sum += step_seconds[i];
  return sum / static_cast<double>(step_seconds.size() - skip);
}

std::unique_ptr<Task> resolve_task(TrainConfig& config, const std::vector<int64_t>& vocabulary,
                                   int64_t max_ram) {
  auto task = make_task(config, vocabulary, max_ram);
  if (task_kind(config.task.kind).vocab_from_data) config.model.vocab_size = task->vocab_size();
  config.model.validate();
  return task;
}

std::map<std::string, double> evaluate(Transformer& model, const Task& task,
                                       const std::vector<Batch>& set) {
  torch::NoGradGuard no_grad;
  double ce_sum = 0;
  int64_t correct = 0, scored = 0;
  const auto device = model->parameters().front().device();
  for (const Batch& cpu_batch : set) {
    const Batch b = to_device(cpu_batch, device);
    const AutocastScope autocast(device);
    auto logits = model->forward_at(b.x, b.mask).to(torch::kFloat32);
    auto target = b.y.index({b.mask});
    ce_sum +=
        torch::nn::functional::cross_entropy(
            logits, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    correct += logits.argmax(-1).eq(target).sum().item<int64_t>();
    scored += target.numel();
  }
  const double n = static_cast<double>(std::max<int64_t>(1, scored));
  return task.summarise(ce_sum / n, static_cast<double>(correct) / n, scored,
                        model->num_parameters());
}

void check_checkpoint_config(const TrainConfig& config, const std::string& ckpt_toml,
                             const std::string& source) {
  TrainConfig stored;
  try {
    stored = train_config_from_toml(ckpt_toml, source + " (stored config)");
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        fmt::format("checkpoint {}: its config is not readable: {}", source, e.what()));
  }
  // Both parsed, so the values are compared, not the text: a key the stored config leaves out
  // (written before the key existed) holds its default.
  const auto want = config_items(config), have = config_items(stored);
  for (const auto& [key, value] : want) {
    const std::string& name = key;  // a structured binding cannot be captured before C++20
    const auto it =
        std::find_if(have.begin(), have.end(), [&](auto& kv) { return kv.first == name; });
    if (it != have.end() && it->second != value)
      throw UsageError(
          fmt::format("checkpoint {} was written with {} = {}, this run has {} = {}; "
                      "it is refused (resume with the same config)",
                      source, key, it->second, key, value));
  }
}

namespace {

// Where a call of train() starts: its input checked, the checkpoint read when it resumes.
struct RunStart {
  TrainConfig config;
  bool resume = false;
  Checkpoint ckpt;  // empty unless resume
  std::unique_ptr<Task> task;
  DistEnv env;
};

// Check: the run folder (a run there only with --resume or reuse), the RAM estimate, and on
// resume the checkpoint against this config and this process count.
RunStart check_start(const TrainConfig& config, const TrainOptions& options) {
  check_output_dir("--out", options.out_dir);
  const std::string ckpt_file = checkpoint_path(options.out_dir);
  const bool have_ckpt = fs::exists(ckpt_file);
  RunStart start;
  start.config = config;
  start.resume = options.resume || (options.reuse && have_ckpt);
  if (options.resume && !have_ckpt)
    throw UsageError(fmt::format("--resume: {} has no checkpoint.bin to resume", options.out_dir));
  if (!start.resume && have_ckpt)
    throw UsageError(
        fmt::format("--out {}: holds a run already; pass --resume to continue it or "
                    "choose another folder",
                    options.out_dir));
  std::string parts;
  const double bytes = estimate_train_ram(start.config, at::get_num_threads(), &parts);
  check_ram("training " + options.out_dir, bytes, parts, options.max_ram);
  check_precision(config.trainer.precision, options.device, "precision =");
  if (start.resume) start.ckpt = load_checkpoint(ckpt_file);
  if (start.resume && start.ckpt.optimizer.empty())
    throw UsageError(
        fmt::format("--resume: {} was imported (recall import) and holds no optimizer "
                    "state to continue; it is for eval, sample, inspect, extrapolate "
                    "and export",
                    ckpt_file));
  start.task = resolve_task(start.config, start.ckpt.vocabulary, options.max_ram);
  if (start.resume) check_checkpoint_config(start.config, start.ckpt.config_toml, ckpt_file);
  start.env = dist_env_from_environment();
  if (start.resume && start.ckpt.world_size != start.env.world_size)
    throw UsageError(fmt::format(
        "checkpoint {} was trained by {} processes, this run has {}; resume with the same number "
        "(--nproc {} or WORLD_SIZE={})",
        ckpt_file, start.ckpt.world_size, start.env.world_size, start.ckpt.world_size,
        start.ckpt.world_size));
  return start;
}

Transformer seeded_model(const TrainConfig& config, const torch::Device& device) {
  torch::manual_seed(static_cast<uint64_t>(config.trainer.seed));
  Transformer model(config.model);  // initialised on the CPU: the same weights on every device
  model->to(device);
  return model;
}

// Decay matrices only: decaying gains and biases pulls norms toward zero for no benefit.
std::vector<torch::optim::OptimizerParamGroup> param_groups(Transformer& model,
                                                            const TrainerConfig& tc) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto adamw = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(tc.lr).betas({tc.beta1, tc.beta2}).weight_decay(wd));
  };
  return {torch::optim::OptimizerParamGroup(decay, adamw(tc.weight_decay)),
          torch::optim::OptimizerParamGroup(no_decay, adamw(0.0))};
}

// What a checkpoint holds: the model, its optimizer and the task's generator after `step` steps.
struct TrainState {
  Transformer model;
  FusedAdamW optimizer;
  Rng rng;
  int64_t step = 0;
  // On resume, restored from `ckpt`.
  TrainState(const TrainConfig& config, const Checkpoint* ckpt, const torch::Device& device)
      : model(seeded_model(config, device)),
        optimizer(param_groups(model, config.trainer)),
        rng(static_cast<uint64_t>(config.trainer.seed)) {
    if (!ckpt) return;
    load_module_bytes(*model, ckpt->model);
    load_optimizer_bytes(optimizer, ckpt->optimizer);
    std::istringstream(ckpt->task_rng) >> rng;
    set_torch_rng_state(ckpt->torch_rng);
    step = ckpt->step;
  }
};

// One step's figures for the metrics.
struct StepStats {
  double loss = 0, lr = 0, grad_norm = 0;
};

// One call of train(): the state stepped until the run ends or is stopped, the run folder (rank
// 0's alone) kept as it goes.
class TrainingRun {
 public:
  TrainingRun(RunStart start, const TrainOptions& options)
      : options_(options),
        config_(std::move(start.config)),
        tc_(config_.trainer),
        precision_(tc_.precision),
        resume_(start.resume),
        task_(std::move(start.task)),
        state_(config_, start.resume ? &start.ckpt : nullptr, options.device),
        group_(start.env,
               std::chrono::milliseconds(static_cast<int64_t>(options.dist_timeout_s * 1000)),
               state_.model->parameters()[0].device()),
        writer_(group_.rank() == 0),
        progress_(options.progress && writer_),
        eval_set_(eval_set(*task_, config_)),
        ckpt_file_(checkpoint_path(options.out_dir)),
        best_file_(best_checkpoint_path(options.out_dir)) {}

  TrainResult run() {
    open_folder();
    // The lowest validation loss so far, kept in best.bin beside the last checkpoint; on resume,
    // from the records the run kept.
    best_loss_ = resume_ ? best_eval_loss(options_.out_dir) : kInfinity;
    const int workers = at::get_num_threads();  // data-parallel workers, one per torch thread
    TrainResult result;
    const PeakFlops peak = announce_peak();
    result.peak_flops = peak_flops_;
    result.peak_kind = peak.kind;
    // With data-parallel workers, this thread's share of a step (adding up the workers'
    // gradients, the clip, the optimizer) is a few ms of memory traffic: its torch ops run
    // single-threaded, because an intra-op (OpenMP) thread woken for them keeps spinning
    // afterwards on a core the workers need; the gradient sums and the optimizer's loop run on
    // threads that sleep between calls (parallel_claim), as many as the workers.
    std::optional<TorchThreads> one_thread;
    if (workers > 1 && fast_kernels(options_.device)) {
      one_thread.emplace(1);
      state_.optimizer.set_workers(workers);  // its loop on sleeping threads of its own
    }
    const auto t0 = std::chrono::steady_clock::now();
    first_ = state_.step;
    while (state_.step < tc_.steps) {
      const StepStats stats = take_step(workers, result);
      const int64_t step = state_.step;
      if (step % tc_.log_every == 0 || step == tc_.steps) log_step(stats, result, t0, peak.kind);
      if (tc_.eval_every > 0 && step % tc_.eval_every == 0 && step < tc_.steps) evaluate(workers);
      if (tc_.checkpoint_every > 0 && step % tc_.checkpoint_every == 0) save(ckpt_file_);
      if (options_.stop) {  // every rank's request, agreed in the step's all-reduce
        if (int s = group_.agreed_stop()) {
          save(ckpt_file_);
          result.stopped_by = s;
          result.step = step;
          return result;
        }
      }
    }
    result.eval = evaluate(workers);
    if (state_.step > first_ || !resume_)
      save(ckpt_file_);  // a finished run that was only evaluated is unchanged
    result.step = state_.step;
    return result;
  }

 private:
  // The evaluation set comes from a generator of its own, so evaluating never moves training.
  static std::vector<Batch> eval_set(const Task& task, const TrainConfig& config) {
    const auto& tc = config.trainer;
    Rng eval_rng(static_cast<uint64_t>(tc.seed) ^ 0x5bd1e9955bd1e995ULL);
    return task.eval_set(tc.eval_batches, tc.batch_size, config.model.seq_len, eval_rng);
  }

  // Rank 0: the folder with this config, its metrics up to the checkpoint; then the run's header
  // on stderr.
  void open_folder() {
    const std::string metrics_file = metrics_path(options_.out_dir);
    if (writer_) {
      fs::create_directories(options_.out_dir);
      // leftovers of a write that a kill interrupted
      for (const char* name : {"checkpoint.bin", "best.bin", "config.toml", "metrics.jsonl"})
        remove_atomic_leftovers((fs::path(options_.out_dir) / name).string());
      write_file_atomic((fs::path(options_.out_dir) / "config.toml").string(), config_.to_toml());
      if (resume_)
        trim_metrics(options_.out_dir, state_.step);
      else
        write_file_atomic(metrics_file, "");
      metrics_.open(metrics_file, std::ios::app);
    }
    if (progress_ && options_.print_config)
      fmt::print(stderr, "# resolved config\n{}", config_.to_toml());
    if (progress_ && !task_->description().empty())
      fmt::print(stderr, "# {}\n", task_->description());
  }

  // MFU is measured against this machine's peak fp32 rate (this process's, times the processes)
  // unless the config names a peak.
  PeakFlops announce_peak() {
    PeakFlops peak;
    if (tc_.peak_flops > 0) {
      peak.flops = tc_.peak_flops;
      peak.kind = "config";
    } else {
      peak = recall::peak_flops(options_.device);
    }
    const int world = group_.world_size();
    peak_flops_ = peak.flops * (tc_.peak_flops > 0 ? 1 : world);
    if (progress_)
      fmt::print(stderr, "# MFU against {}\n",
                 tc_.peak_flops > 0
                     ? fmt::format("peak {:.1f} GFLOP/s, set by peak_flops", peak_flops_ / 1e9)
                     : peak.describe() + (world > 1 ? fmt::format(", times {} processes", world)
                                                    : std::string()));
    if (progress_) {
      const std::string note = bf16_slower_note(options_.device);
      if (!note.empty()) fmt::print(stderr, "# {}\n", note);
    }
    return peak;
  }

  // One optimizer step on a fresh batch; its loss and time go to `result`.
  // Recorded steps (options.profile) charge each phase's seconds to its part; the phases' marks
  // split the step's wall time, so the parts add up to it.
  StepStats take_step(int workers, TrainResult& result) {
    const size_t index = result.step_seconds.size();
    const bool record =
        options_.profile && index >= kWarmupSteps && (index - kWarmupSteps) % 2 == 1;
    std::optional<OpRecorder> recorder;
    if (record) recorder.emplace();
    StepProfile parts;
    auto mark = std::chrono::steady_clock::now();
    auto phase = [&](StepPart part) {  // the seconds since the last mark go to `part`
      const auto now = std::chrono::steady_clock::now();
      parts[part] += std::chrono::duration<double>(now - mark).count();
      mark = now;
    };
    const auto step_start = mark;
    const int64_t step = state_.step;
    StepStats s;
    s.lr = lr_at(tc_, step);
    for (auto& g : state_.optimizer.param_groups()) g.options().set_lr(s.lr);
    const Batch b = to_device(task_->sample(tc_.batch_size, config_.model.seq_len, state_.rng),
                              options_.device);
    phase(StepPart::kData);
    state_.optimizer.zero_grad();
    phase(StepPart::kGradSum);
    StepProfile backward;
    s.loss = group_.backward(state_.model, b, workers, options_.stop ? options_.stop(step + 1) : 0,
                             record ? &backward : nullptr);
    phase(StepPart::kAllReduce);  // what the backward's own parts leave is the all-reduce
    parts[StepPart::kAllReduce] -= backward.total();
    parts += backward;
    const std::string keep =
        resume_ || step > first_ ? "the last checkpoint is kept" : "no checkpoint was written";
    if (!std::isfinite(s.loss))
      throw NonFiniteError(
          fmt::format("step {}: the loss is {}; training stopped ({})", step + 1, s.loss, keep));
    s.grad_norm = grad_norm(state_.model->parameters(), tc_.grad_clip, state_.optimizer);
    phase(StepPart::kClip);
    if (!std::isfinite(s.grad_norm))
      throw NonFiniteError(fmt::format("step {}: the gradient norm is {}; training stopped ({})",
                                       step + 1, s.grad_norm, keep));
    state_.optimizer.step();
    phase(StepPart::kOptimizer);
    synchronize(options_.device);  // the step's kernels are done before its time is read
    phase(StepPart::kWaits);
    ++state_.step;
    result.losses.push_back(s.loss);
    result.step_seconds.push_back(std::chrono::duration<double>(mark - step_start).count());
    result.profiled.push_back(record);
    if (record) result.profile += parts;
    return s;
  }

  // A metrics record and the progress line.
  void log_step(const StepStats& s, const TrainResult& result,
                std::chrono::steady_clock::time_point t0, const std::string& peak_kind) {
    const int64_t step = state_.step;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tokens = static_cast<double>(tokens_per_step(config_));
    const double tok_s = tokens / mean_step_seconds(result.step_seconds);
    const double mfu =
        flops_per_token(config_, state_.model->num_parameters()) * tok_s / peak_flops_;
    metrics_ << metrics_line({step,
                              false,
                              {{"loss", s.loss},
                               {"lr", s.lr},
                               {"grad_norm", s.grad_norm},
                               {"tokens_per_s", tok_s},
                               {"mfu", mfu}}})
             << "\n"
             << std::flush;
    if (progress_)
      fmt::print(stderr, "step {}/{}  loss {:.4f}  lr {:.2e}  {:.0f} tok/s  MFU {:.2f}%  ETA {}\n",
                 step, tc_.steps, s.loss, s.lr, tok_s, 100 * mfu,
                 format_duration(secs / (step - first_) * (tc_.steps - step)));
    if (progress_ && mfu > 1 && !std::exchange(mfu_explained_, true))
      fmt::print(
          stderr,
          "# MFU is over 100 %: the peak it divides by ({:.0f} GFLOP/s, {}) is below the rate "
          "this run reached; --set peak_flops=F gives the machine's peak (FLOP/s)\n",
          peak_flops_ / 1e9, peak_kind);
  }

  // Rank 0: the evaluation's record and line, and best.bin when it lowers the loss.
  std::map<std::string, double> evaluate(int workers) {
    if (!writer_) return {};
    TorchThreads all(workers);  // evaluation is one forward over each batch: intra-op threads
    auto m = recall::evaluate(state_.model, *task_, eval_set_);
    metrics_ << metrics_line({state_.step, true, m}) << "\n" << std::flush;
    if (progress_)
      fmt::print(stderr, "eval step {}: loss {:.4f} accuracy {:.4f}{}\n", state_.step, m["loss"],
                 m["accuracy"],
                 m.count("bits_per_char") ? fmt::format(" bits/char {:.4f}", m["bits_per_char"])
                                          : std::string());
    if (m["loss"] < best_loss_) {
      best_loss_ = m["loss"];
      save(best_file_);
    }
    return m;
  }

  // Every rank checks its parameters are finite; rank 0 writes the checkpoint.
  void save(const std::string& path) {
    for (const auto& p : state_.model->parameters())
      if (!torch::isfinite(p).all().item<bool>())
        throw NonFiniteError(
            fmt::format("step {}: the parameters are not finite; training stopped "
                        "(the last checkpoint is kept)",
                        state_.step));
    if (!writer_) return;
    std::ostringstream task_rng;
    task_rng << state_.rng;
    save_checkpoint(path, {config_.to_toml(), state_.step, task_rng.str(), torch_rng_state(),
                           task_->vocabulary(), module_bytes(*state_.model),
                           optimizer_bytes(state_.optimizer), group_.world_size()});
  }

  const TrainOptions& options_;
  const TrainConfig config_;
  const TrainerConfig& tc_;
  const ScopedPrecision precision_;  // the run's products, its evaluations' too
  const bool resume_;
  const std::unique_ptr<Task> task_;
  TrainState state_;
  DataParallelGroup group_;
  const bool writer_;    // rank 0 alone evaluates and writes the run folder
  const bool progress_;  // rank 0's progress lines
  const std::vector<Batch> eval_set_;
  const std::string ckpt_file_, best_file_;
  std::ofstream metrics_;
  double best_loss_ = kInfinity;
  double peak_flops_ = 0;  // what MFU divides by
  int64_t first_ = 0;      // the step this call started at
  bool mfu_explained_ = false;
};

}  // namespace

TrainResult train(const TrainConfig& config, const TrainOptions& options) {
  TrainingRun run(check_start(config, options), options);
  return run.run();
}

TrainResult train_run(const TrainConfig& config, const std::string& out_dir,
                      const RunContext& context) {
  TrainOptions o;
  o.out_dir = out_dir;
  o.reuse = true;
  o.progress = context.progress;
  o.print_config = false;
  o.device = context.device;
  o.stop = context.stop;
  const TrainResult r = train(config, o);
  if (r.stopped_by)
    throw StopRequested(r.stopped_by, "after step " + std::to_string(r.step) + " of " + out_dir);
  return r;
}

}  // namespace recall
