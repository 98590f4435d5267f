// Busy neighbours for benchmarks: processes that spin on the CPU, as a build or another job on a
// shared machine would, so that a benchmark can measure how it slows when cores are taken; and
// the rounds of `recall bench probe --busy`, which run the probe and training idle and beside them.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "recall/analysis/probe.h"

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

// Per round, back to back: the probe of `plan` idle (the first round's is `first_idle_seconds`,
// already measured) and beside `busy` spinning neighbours, then, with train_steps > 0, training
// (bench-gpt, train_steps timed steps after the two of warm-up) idle and beside the same. A
// machine whose speed drifts from minute to minute moves one pair's ratio less than runs far apart.
struct BusyRounds {
  std::vector<double> idle_seconds, busy_seconds, slowdowns;                  // the probe's
  std::vector<double> idle_tokens_per_s, busy_tokens_per_s, train_slowdowns;  // training's
};
BusyRounds run_busy_rounds(const ProbePlan& plan, double first_idle_seconds, int busy,
                           int64_t train_steps, int rounds);

}  // namespace recall
