// The probe's fused CPU path: one trial's memories streamed through every accumulator in tiles
// that stay in cache, on torch's threads, in one parallel region. Internal to the probe
// (probe.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "recall/analysis/memory_stream.h"
#include "recall/analysis/probe_accumulator.h"

namespace recall {

struct FusedTotals {
  double work = 0;          // memory-query pairs of the sums
  double similarities = 0;  // memory-query pairs of the similarities
};

// Streams memories [0, end) of `stream` through the accumulators (started, on the CPU), each up to
// its own end, and reads their ISRs at their snapshots; boundaries holds every grid point,
// ascending. Qt (d_k, ldq) is the queries transposed. The profile gets the kernels' and the
// waits' thread-seconds (the draws' are the stream's draw_seconds()); progress(work) gets the
// work done so far, on the calling thread.
FusedTotals stream_fused(const std::vector<ProbeAccumulator*>& accs, const MemoryStream& stream,
                         int64_t end, const float* Qt, int64_t ldq,
                         const std::vector<int64_t>& boundaries, ProbeProfile& profile,
                         const std::function<void(double)>& progress);

}  // namespace recall
