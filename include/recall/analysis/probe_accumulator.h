// One running sum of the probe during a trial (a ProbeSum's state): A_j = sum_{i != j} (sigma(s_ij)
// / sigma(1)) v_i for its first q stored keys, each query's own weight (the signal), and the ISRs
// read off at its grid points. Internal to the probe (probe.cpp, probe_fused.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "recall/analysis/probe.h"
#include "recall/core/torch.h"

namespace recall {

struct ProbeAccumulator {
  explicit ProbeAccumulator(const ProbeSum& s)
      : weight(s.weight),
        q(s.queries),
        end(s.end),
        snapshots(s.snapshots.begin(), s.snapshots.end()) {}
  WeightFunction weight;
  int64_t q = 0, end = 0;
  std::set<int64_t> snapshots;
  std::map<int64_t, std::vector<double>> isr;  // M -> ISR of the first min(q, M) queries
  torch::Tensor sums, signal;  // (q, d_v) the A_j, (q,) sigma(1) / sigma(1) as computed

  // Zero sums, and every snapshot's vector made now: the fused path's threads fill their rows.
  void start(int64_t d_v, const torch::Device& device);
  // ISR_j = |A_j| / |sigma(1) / sigma(1) as computed| of the first min(q, M) queries, with torch
  // ops on the sums' device (the torch-ops path).
  void snapshot(int64_t M);
  // The same for queries [r0, r1) alone, in double, from sums on the CPU (the fused path: the
  // item that owns these rows reads them as soon as its sums reach M).
  void snapshot_rows(int64_t M, int64_t r0, int64_t r1);
};

}  // namespace recall
