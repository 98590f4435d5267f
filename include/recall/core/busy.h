// Busy neighbours for benchmarks: processes that spin on the CPU, as a build or another job on a
// shared machine would, so that a benchmark can measure how it slows when cores are taken.
#pragma once
#include <sys/types.h>

#include <vector>

namespace recall {

// Forks n processes that spin until this object ends (then they are killed and reaped).
class BusyNeighbours {
 public:
  explicit BusyNeighbours(int n);
  ~BusyNeighbours();
  BusyNeighbours(const BusyNeighbours&) = delete;
  BusyNeighbours& operator=(const BusyNeighbours&) = delete;

 private:
  std::vector<pid_t> pids_;
};

}  // namespace recall
