#include "recall/analysis/probe_fused.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "recall/analysis/probe_weights.h"
#include "recall/core/threads.h"
#include "recall/ops/kernels.h"
#include "recall/ops/tile_gemm.h"

namespace recall {

namespace {

// A sums item is (a tile of up to kRowTile queries, up to kAccsPerItem accumulators) over one
// block of the stream: it walks the block kColTile memories at a time (tiles end at grid points
// too): the similarity tile (one product), then per accumulator its weights (one vectorised pass)
// and its sums (one product), all in L2. The tiles are memories x queries, S^T = K Q^T, so the keys
// are read as the stream draws them (row-major) against the transposed queries; the sums then read
// the weights transposed. An item owns its rows of its accumulators' sums, and reads their ISRs
// off them at each grid point. Every element of a product sums over its inner dimension in order,
// one FMA a term, however many rows and columns its tile has, so the sums have the same bits at
// any thread count and any row tile. Row tiles of 64 queries read each key once per 64 queries
// (the similarity product ran 25 % faster than with 32), halved to 32 where that leaves fewer than
// 2 items per thread (late in the stream only the rules' 64 queries remain).
constexpr int64_t kRowTile = 64;
constexpr int64_t kColTile = 512;
constexpr int64_t kAccsPerItem = 8;
// Blocks held at once: the oldest one an item still reads, and up to two after it being drawn or
// read meanwhile.
constexpr int64_t kSlots = 3;

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Queries [r0, r0 + rows) of `accs`' sums, over memories [c0, end).
struct SumsItem {
  int64_t r0 = 0, rows = 0, c0 = 0, end = 0;
  std::vector<ProbeAccumulator*> accs;
  double cost = 0;  // multiply-adds over d: the similarities and each accumulator's sums
};

// The sums items of block [c0, c1) for the accumulators still running there, longest first, so
// that threads claiming them in turn finish together; adds the similarity pairs.
std::vector<SumsItem> block_items(std::vector<ProbeAccumulator*> active, int64_t c0, int64_t c1,
                                  size_t workers, double& similarities) {
  // Accumulators with more queries first: a row tile's accumulators are then a prefix.
  std::stable_sort(
      active.begin(), active.end(),
      [](const ProbeAccumulator* x, const ProbeAccumulator* y) { return x->q > y->q; });
  const int64_t q_max = active.empty() ? 0 : active.front()->q;
  auto span = [&](const ProbeAccumulator* a) { return std::min(a->end, c1) - c0; };
  double pairs = 0;
  auto make = [&](int64_t tile) {
    std::vector<SumsItem> items;
    pairs = 0;
    for (int64_t r0 = 0; r0 < q_max; r0 += tile) {
      size_t n = 0;
      int64_t longest = 0;  // each query's similarities, against the memories still needed
      for (; n < active.size() && active[n]->q > r0; ++n)
        longest = std::max(longest, span(active[n]));
      pairs += static_cast<double>(std::min(tile, q_max - r0) * longest);
      for (size_t a0 = 0; a0 < n; a0 += kAccsPerItem) {
        SumsItem it;
        it.r0 = r0;
        it.rows = std::min(tile, q_max - r0);
        it.c0 = it.end = c0;
        double sums = 0;
        for (size_t i = a0; i < std::min(n, a0 + kAccsPerItem); ++i) {
          it.accs.push_back(active[i]);
          it.end = std::max(it.end, c0 + span(active[i]));
          sums += static_cast<double>(span(active[i]));
        }
        it.cost = static_cast<double>(it.rows) * (sums + static_cast<double>(it.end - c0));
        items.push_back(std::move(it));
      }
    }
    return items;
  };
  auto items = make(kRowTile);
  if (items.size() < 2 * workers) items = make(kRowTile / 2);
  std::stable_sort(items.begin(), items.end(),
                   [](const SumsItem& x, const SumsItem& y) { return x.cost > y.cost; });
  similarities += pairs;
  return items;
}

// Two items of consecutive blocks that share rows of an accumulator: the later one waits.
bool overlap(const SumsItem& a, const SumsItem& b) {
  if (a.r0 + a.rows <= b.r0 || b.r0 + b.rows <= a.r0) return false;
  for (const auto* x : a.accs)
    if (std::find(b.accs.begin(), b.accs.end(), x) != b.accs.end()) return true;
  return false;
}

struct Operands {
  const float* Qt;  // (d_k, ldq) the queries transposed
  int64_t ldq, d_k, d_v;
  const std::vector<int64_t>* boundaries;  // every grid point, ascending
};

// One item, on the block whose keys K (kBlock, d_k) and values V (kBlock, d_v) start at memory
// block_start; buffer is this thread's, sec its seconds in similarity, weights, accumulate and
// snapshots.
void run_item(const SumsItem& it, const Operands& op, const float* K, const float* V,
              int64_t block_start, std::vector<float>& buffer, std::array<double, 4>& sec) {
  buffer.resize(2 * kColTile * kRowTile);
  const int64_t ld = it.rows;            // the tiles' row stride
  float* St = buffer.data();             // (kColTile, it.rows)
  float* Wt = St + kColTile * kRowTile;  // (kColTile, it.rows)
  const auto& bounds = *op.boundaries;
  for (int64_t b0 = it.c0; b0 < it.end;) {
    // this tile: up to kColTile memories, ending at the next grid point
    const int64_t b1 =
        std::min({b0 + kColTile, it.end, *std::upper_bound(bounds.begin(), bounds.end(), b0)});
    const int64_t nb = b1 - b0;
    auto t = Clock::now();
    // (nb, d_k) (d_k, rows): the memories' keys against this tile's queries
    tile_gemm(K + (b0 - block_start) * op.d_k, op.d_k, 1, op.Qt + it.r0, op.ldq, St, ld, nb,
              it.rows, op.d_k, false);
    sec[0] += since(t);
    for (ProbeAccumulator* a : it.accs) {
      if (b0 >= a->end) continue;
      const int64_t rows = std::min(it.rows, a->q - it.r0);
      t = Clock::now();
      if (rows == it.rows)  // the whole tile is one run of nb * rows similarities
        relative_weights_rows(a->weight, St, 0, Wt, 0, 1, nb * rows);
      else
        relative_weights_rows(a->weight, St, ld, Wt, ld, nb, rows);
      float* signal = a->signal.data_ptr<float>();
      for (int64_t j = std::max(it.r0, b0); j < std::min(it.r0 + rows, b1); ++j) {
        float& diagonal = Wt[(j - b0) * ld + (j - it.r0)];  // query j meets itself
        signal[j] = diagonal;
        diagonal = 0.0f;
      }
      const auto t1 = Clock::now();
      sec[1] += std::chrono::duration<double>(t1 - t).count();
      // (rows, nb) (nb, d_v), the weights read transposed
      tile_gemm(Wt, 1, ld, V + (b0 - block_start) * op.d_v, op.d_v,
                a->sums.data_ptr<float>() + it.r0 * op.d_v, op.d_v, rows, op.d_v, nb, true);
      sec[2] += since(t1);
      if (a->snapshots.count(b1)) {
        t = Clock::now();
        a->snapshot_rows(b1, it.r0, it.r0 + rows);
        sec[3] += since(t);
      }
    }
    b0 = b1;
  }
}

// A task of the trial's one parallel region: one piece of a block's draw, or one sums item.
struct ProbeTask {
  int64_t block = 0;
  int64_t piece = -1;        // the piece drawn, or -1 for a sums item
  size_t item = 0;           // a sums item's index in its block's items
  std::vector<size_t> deps;  // tasks that must be done first
  enum class State { kPending, kRunning, kDone } state = State::kPending;
};

// A trial's tasks, blocks first to last; within a block its draw, then its items longest first.
struct TrialTasks {
  std::vector<std::vector<SumsItem>> items;  // per block
  std::vector<double> block_work;            // per block: its memory-query pairs of the sums
  std::vector<ProbeTask> tasks;
  FusedTotals totals;
};

// Each block needs its draw and, per item, the items of the block before that share its rows.
TrialTasks plan_tasks(const std::vector<ProbeAccumulator*>& accs, int64_t end, size_t workers) {
  constexpr int64_t kBlock = MemoryStream::kBlock;
  const int64_t n_blocks = (end + kBlock - 1) / kBlock;
  TrialTasks plan;
  plan.items.resize(static_cast<size_t>(n_blocks));
  plan.block_work.resize(static_cast<size_t>(n_blocks));
  auto& tasks = plan.tasks;
  size_t prev_first = 0;  // the first sums task of the block before
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t c0 = b * kBlock, c1 = std::min(c0 + kBlock, end);
    std::vector<ProbeAccumulator*> active;
    for (auto* a : accs)
      if (a->end > c0) {
        active.push_back(a);
        plan.block_work[b] += static_cast<double>(a->q * (std::min(a->end, c1) - c0));
      }
    plan.totals.work += plan.block_work[b];
    auto& mine = plan.items[static_cast<size_t>(b)];
    mine = block_items(active, c0, c1, workers, plan.totals.similarities);
    const size_t draws = tasks.size();
    for (int64_t piece = 0; piece < MemoryStream::kPieces; ++piece) {
      ProbeTask t;
      t.block = b;
      t.piece = piece;
      tasks.push_back(t);
    }
    const size_t first = tasks.size();
    for (size_t k = 0; k < mine.size(); ++k) {
      ProbeTask t;
      t.block = b;
      t.item = k;
      for (size_t d = draws; d < first; ++d) t.deps.push_back(d);
      for (size_t p = prev_first; b > 0 && p < draws; ++p)
        if (overlap(plan.items[static_cast<size_t>(b - 1)][tasks[p].item], mine[k]))
          t.deps.push_back(p);
      tasks.push_back(std::move(t));
    }
    prev_first = first;
  }
  return plan;
}

// Hands the threads the first pending task (in the plan's order) whose needs are met and that
// lies within kSlots blocks of the oldest block with items not done (so a block's ring slot is
// free when it is drawn); threads with nothing ready sleep until a task ends.
class TaskQueue {
 public:
  explicit TaskQueue(TrialTasks& plan) : plan_(plan) {
    for (const auto& items : plan.items) left_.push_back(static_cast<int64_t>(items.size()));
    advance_oldest();
  }
  // The next task for this thread, or -1 once every task is done or one failed.
  int64_t take(std::unique_lock<std::mutex>& lock) {
    for (;;) {
      if (failed_ || done_ == plan_.tasks.size()) return -1;
      const int64_t k = ready();
      if (k >= 0) {
        plan_.tasks[static_cast<size_t>(k)].state = ProbeTask::State::kRunning;
        return k;
      }
      changed_.wait(lock);
    }
  }
  // Task k is done; returns the work of the blocks completed so far.
  double finish(int64_t k) {
    ProbeTask& task = plan_.tasks[static_cast<size_t>(k)];
    task.state = ProbeTask::State::kDone;
    ++done_;
    if (task.piece < 0 && --left_[static_cast<size_t>(task.block)] == 0) advance_oldest();
    changed_.notify_all();
    return work_done_;
  }
  void fail() {
    failed_ = true;
    changed_.notify_all();
  }
  std::mutex mutex;

 private:
  int64_t ready() {
    auto& tasks = plan_.tasks;
    while (first_pending_ < tasks.size() &&
           tasks[first_pending_].state != ProbeTask::State::kPending)
      ++first_pending_;
    for (size_t t = first_pending_; t < tasks.size() && tasks[t].block < oldest_ + kSlots; ++t) {
      if (tasks[t].state != ProbeTask::State::kPending) continue;
      bool met = true;
      for (size_t d : tasks[t].deps) met = met && tasks[d].state == ProbeTask::State::kDone;
      if (met) return static_cast<int64_t>(t);
    }
    return -1;
  }
  void advance_oldest() {
    while (oldest_ < static_cast<int64_t>(left_.size()) && left_[static_cast<size_t>(oldest_)] == 0)
      work_done_ += plan_.block_work[static_cast<size_t>(oldest_++)];
  }
  TrialTasks& plan_;
  std::condition_variable changed_;
  std::vector<int64_t> left_;  // sums items not done, per block
  size_t first_pending_ = 0, done_ = 0;
  int64_t oldest_ = 0;  // the first block with items not done
  double work_done_ = 0;
  bool failed_ = false;
};

}  // namespace

// One region for the whole trial, not one per block: a thread the OS delays (a busy neighbour on
// its core) then holds back only the items that need its item's rows, while the other threads go
// on with the rest of the block, the next blocks' draws and their items. At most kSlots blocks
// are held, in a ring.
FusedTotals stream_fused(const std::vector<ProbeAccumulator*>& accs, const MemoryStream& stream,
                         int64_t end, const float* Qt, int64_t ldq,
                         const std::vector<int64_t>& boundaries, ProbeProfile& profile,
                         const std::function<void(double)>& progress) {
  count_fast_call(FastKernel::kProbeTile);
  constexpr int64_t kBlock = MemoryStream::kBlock, kRows = MemoryStream::kPieceRows;
  const Operands op{Qt, ldq, stream.d_k(), stream.d_v(), &boundaries};
  const auto workers = static_cast<size_t>(std::max(1, at::get_num_threads()));
  TrialTasks plan = plan_tasks(accs, end, workers);
  TaskQueue queue(plan);
  // the ring of blocks: block b's keys and values in slot b % kSlots
  const int64_t d_k = op.d_k, d_v = op.d_v;
  std::unique_ptr<float[]> keys(new float[static_cast<size_t>(kSlots * kBlock * d_k)]);
  std::unique_ptr<float[]> values(new float[static_cast<size_t>(kSlots * kBlock * d_v)]);
  auto slot_keys = [&](int64_t b) { return keys.get() + (b % kSlots) * kBlock * d_k; };
  auto slot_values = [&](int64_t b) { return values.get() + (b % kSlots) * kBlock * d_v; };
  auto run = [&](const ProbeTask& task, std::vector<float>& buffer, std::array<double, 4>& sec) {
    const int64_t b = task.block;
    if (task.piece >= 0)
      stream.draw(b, task.piece, slot_keys(b) + task.piece * kRows * d_k,
                  slot_values(b) + task.piece * kRows * d_v);
    else
      run_item(plan.items[static_cast<size_t>(b)][task.item], op, slot_keys(b), slot_values(b),
               b * kBlock, buffer, sec);
  };

  std::vector<std::array<double, 4>> seconds(workers);
  std::vector<std::vector<float>> buffers(workers);
  const double drawn0 = stream.draw_seconds();
  const auto region = Clock::now();
  parallel_claim(static_cast<int64_t>(workers), [&](int64_t, int worker) {
    double reported = 0;
    std::unique_lock<std::mutex> lock(queue.mutex);
    for (int64_t k = queue.take(lock); k >= 0; k = queue.take(lock)) {
      lock.unlock();
      try {
        run(plan.tasks[static_cast<size_t>(k)], buffers[static_cast<size_t>(worker)],
            seconds[static_cast<size_t>(worker)]);
      } catch (...) {
        lock.lock();
        queue.fail();
        throw;
      }
      lock.lock();
      const double work = queue.finish(k);
      if (worker == 0 && progress && work > reported) {  // the progress line on the caller
        reported = work;
        lock.unlock();
        progress(reported);
        lock.lock();
      }
    }
  });
  double busy = stream.draw_seconds() - drawn0;
  for (const auto& s : seconds) {
    profile.similarity += s[0];
    profile.weights += s[1];
    profile.accumulate += s[2];
    profile.snapshots += s[3];
    busy += s[0] + s[1] + s[2] + s[3];
  }
  // the threads' time in the region that no task took: waiting for the tasks they need
  profile.waits += std::max(0.0, static_cast<double>(workers) * since(region) - busy);
  return plan.totals;
}

}  // namespace recall
