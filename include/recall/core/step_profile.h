// Where a step's time goes, measured. A StepProfile holds seconds per part of a training or
// evaluation step. The parts inside forward and backward come from torch's op recording
// (ATen/record_function.h): while an OpRecorder is alive, every op torch records on any thread
// (aten ops, autograd's backward nodes, and recall's kernels, which open scopes named recall::...)
// charges its exclusive time (its own, less the recorded ops inside it) to the part its name
// belongs to (part_of_op). Time on a thread outside every recorded op (autograd's bookkeeping,
// allocation) is what the caller, who knows the thread's busy time, charges to kUnrecorded. The
// parts outside forward and backward (the batch, the gradient sum, the clip, the optimizer, the
// waits) are timed by the trainer around its own phases, so the parts add up to the step.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace recall {

enum class StepPart {
  kGemm,         // matrix products (recall::gemm; aten mm, addmm, bmm and their backward nodes)
  kAttention,    // the fused causal attention, or torch's softmax attention
  kNorms,        // LayerNorm and RMSNorm, forward and backward
  kActivations,  // GELU (with its bias pass), ReLU, SiLU, sigmoid, and their backward
  kLoss,         // log-softmax and cross-entropy over the scored positions
  kElementwise,  // every other recorded op: residual adds, embeddings, RoPE, copies, bf16 rounding
  kUnrecorded,   // inside forward/backward, outside every recorded op: autograd's own work
  kData,         // drawing the batch
  kGradSum,      // zeroing .grad and adding the data-parallel workers' gradients
  kClip,         // the global gradient norm and the clip
  kOptimizer,    // AdamW's update
  kAllReduce,    // summing gradients across processes (and a barrier's wait)
  kWaits,        // workers idle while the slowest finishes, and the step's synchronisation
  kCount
};
constexpr size_t kStepParts = static_cast<size_t>(StepPart::kCount);

// "gemm", "attention", "norms", "activations", "loss", "elementwise", "unrecorded", "data",
// "grad_sum", "clip", "optimizer", "all_reduce", "waits".
std::string to_string(StepPart part);

// The part an op of this recorded name belongs to; kElementwise for any name not listed.
StepPart part_of_op(const char* name);

struct StepProfile {
  std::array<double, kStepParts> seconds{};
  double& operator[](StepPart p) { return seconds[static_cast<size_t>(p)]; }
  double operator[](StepPart p) const { return seconds[static_cast<size_t>(p)]; }
  double total() const;
  StepProfile& operator+=(const StepProfile& other);
  StepProfile& operator-=(const StepProfile& other);
  StepProfile& operator*=(double factor);
};

// Installs torch's op recording callback for its lifetime (one at a time per process; a nested
// recorder is a no-op). Recording costs about a microsecond an op; the trainer records every
// other step, so the unrecorded ones give the throughput and the pair gives the cost.
class OpRecorder {
 public:
  OpRecorder();
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

 private:
  bool installed_ = false;
  uint64_t handle_ = 0;
};

// Whether an OpRecorder is alive.
bool ops_recorded();

// The exclusive seconds of the recorded ops this thread has finished since it started, per part
// (only kGemm..kElementwise are filled). A caller takes it before and after a span of work.
StepProfile thread_op_seconds();

// This thread's parts of a span of work that took `busy` seconds and began when
// thread_op_seconds() stood at `ops_before`: its recorded ops' seconds since, and the rest of
// `busy` as kUnrecorded.
StepProfile thread_parts_since(const StepProfile& ops_before, double busy);

// Runs fn on this thread with its ops recorded and returns its parts, adding up to its wall time.
StepProfile record_parts(const std::function<void()>& fn);

// The recorded ops' exclusive seconds by name, summed over every thread since the process began
// (a thread's second counts once, so with workers side by side they add up to more than the wall
// time), largest first: which ops make up a part.
std::vector<std::pair<std::string, double>> recorded_op_seconds();

}  // namespace recall
