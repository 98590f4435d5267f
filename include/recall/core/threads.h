#pragma once
#include <ATen/Parallel.h>

#include <string>

namespace recall {
// Sets torch's intra-op threads; n <= 0 means all cores. Torch here defaults to 1 thread.
// Returns the number set.
int set_threads(int n);
// Parses --device (cpu | cuda); throws UsageError when cuda is asked for and not available.
std::string check_device(const std::string& device);

// torch's intra-op thread count for a scope.
class TorchThreads {
 public:
  explicit TorchThreads(int n) : saved_(at::get_num_threads()) {
    if (n != saved_) at::set_num_threads(n);
  }
  ~TorchThreads() {
    if (at::get_num_threads() != saved_) at::set_num_threads(saved_);
  }
  TorchThreads(const TorchThreads&) = delete;
  TorchThreads& operator=(const TorchThreads&) = delete;

 private:
  int saved_;
};
}  // namespace recall
