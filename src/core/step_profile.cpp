#include "recall/core/step_profile.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "recall/core/enum_names.h"

namespace recall {

namespace {

constexpr std::array<const char*, kStepParts> kPartNames = {
    "gemm", "attention", "norms", "activations", "loss",       "elementwise", "unrecorded",
    "data", "grad_sum",  "clip",  "optimizer",   "all_reduce", "waits"};

bool starts(const char* name, const char* prefix) {
  return std::strncmp(name, prefix, std::strlen(prefix)) == 0;
}

bool one_of(const char* name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One thread's open recorded ops, innermost last, and its finished ops' exclusive seconds.
struct ThreadOps {
  struct Frame {
    double start, inside;  // inside: the seconds of the recorded ops finished within this one
    StepPart part;
  };
  std::vector<Frame> open;
  StepProfile done;
};

ThreadOps& thread_ops() {
  thread_local ThreadOps ops;
  return ops;
}

std::mutex by_name_mutex;
std::map<std::string, double>& by_name() {
  static auto* seconds = new std::map<std::string, double>();  // never freed: threads outlive main
  return *seconds;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  thread_ops().open.push_back({now_seconds(), 0.0, part_of_op(fn.name())});
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  ThreadOps& ops = thread_ops();
  if (ops.open.empty()) return;  // began before this thread's first recorded start
  const ThreadOps::Frame f = ops.open.back();
  ops.open.pop_back();
  const double span = now_seconds() - f.start;
  ops.done[f.part] += span - f.inside;
  if (!ops.open.empty()) ops.open.back().inside += span;
  std::lock_guard<std::mutex> lock(by_name_mutex);
  by_name()[fn.name()] += span - f.inside;
}

std::mutex recorder_mutex;
std::atomic<bool> recording{false};

}  // namespace

std::string to_string(StepPart part) {
  return enum_name(kPartNames, part);
}

StepPart part_of_op(const char* name) {
  // Log-softmax before softmax: "LogSoftmaxBackward0" is the loss's, "SoftmaxBackward0"
  // attention's.
  if (one_of(name, {"aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax",
                    "aten::_log_softmax_backward_data"}) ||
      starts(name, "aten::nll_loss") || starts(name, "LogSoftmaxBackward") ||
      starts(name, "recall::cross_entropy") || starts(name, "NllLoss"))
    return StepPart::kLoss;
  if (starts(name, "recall::gemm") ||
      one_of(name, {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                    "aten::linear", "aten::mv", "aten::dot"}) ||
      starts(name, "MmBackward") || starts(name, "AddmmBackward") || starts(name, "BmmBackward") ||
      starts(name, "BaddbmmBackward") || starts(name, "MvBackward"))
    return StepPart::kGemm;
  if (starts(name, "recall::attention") || starts(name, "aten::scaled_dot_product") ||
      starts(name, "aten::_scaled_dot_product") || starts(name, "ScaledDotProduct") ||
      one_of(name, {"aten::softmax", "aten::_softmax", "aten::_softmax_backward_data"}) ||
      starts(name, "SoftmaxBackward"))
    return StepPart::kAttention;
  if (std::strstr(name, "layer_norm") || std::strstr(name, "LayerNorm") ||
      std::strstr(name, "rms_norm") || std::strstr(name, "RmsNorm"))
    return StepPart::kNorms;
  if (starts(name, "recall::gelu") || starts(name, "recall::bias_gelu") ||
      one_of(name, {"aten::gelu", "aten::gelu_backward", "aten::relu", "aten::relu_",
                    "aten::threshold_backward", "aten::silu", "aten::silu_backward",
                    "aten::sigmoid", "aten::sigmoid_backward"}) ||
      starts(name, "GeluBackward") || starts(name, "ReluBackward") ||
      starts(name, "SiluBackward") || starts(name, "SigmoidBackward"))
    return StepPart::kActivations;
  return StepPart::kElementwise;
}

double StepProfile::total() const {
  double s = 0.0;
  for (double x : seconds) s += x;
  return s;
}

StepProfile& StepProfile::operator+=(const StepProfile& other) {
  for (size_t i = 0; i < kStepParts; ++i) seconds[i] += other.seconds[i];
  return *this;
}

StepProfile& StepProfile::operator-=(const StepProfile& other) {
  for (size_t i = 0; i < kStepParts; ++i) seconds[i] -= other.seconds[i];
  return *this;
}

StepProfile& StepProfile::operator*=(double factor) {
  for (double& x : seconds) x *= factor;
  return *this;
}

OpRecorder::OpRecorder() {
  std::lock_guard<std::mutex> lock(recorder_mutex);
  if (recording.load()) return;
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end));
  installed_ = true;
  recording.store(true);
}

OpRecorder::~OpRecorder() {
  if (!installed_) return;
  std::lock_guard<std::mutex> lock(recorder_mutex);
  at::removeCallback(handle_);
  recording.store(false);
}

bool ops_recorded() {
  return recording.load();
}

StepProfile thread_op_seconds() {
  return thread_ops().done;
}

StepProfile thread_parts_since(const StepProfile& ops_before, double busy) {
  StepProfile parts = thread_op_seconds();
  parts -= ops_before;
  parts[StepPart::kUnrecorded] += busy - parts.total();
  return parts;
}

std::vector<std::pair<std::string, double>> recorded_op_seconds() {
  std::vector<std::pair<std::string, double>> out;
  {
    std::lock_guard<std::mutex> lock(by_name_mutex);
    out.assign(by_name().begin(), by_name().end());
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

StepProfile record_parts(const std::function<void()>& fn) {
  const OpRecorder recorder;
  const StepProfile before = thread_op_seconds();
  const double start = now_seconds();
  fn();
  return thread_parts_since(before, now_seconds() - start);
}

}  // namespace recall
