// The sweep: one training run per point of a grid of config values (and seeds), each a
// `recall train` of its own in OUT/<point>, up to `jobs` at a time. Running the same sweep again
// resumes: finished runs are kept, interrupted ones continue from their checkpoint (train
// --resume), the rest start. SIGINT/SIGTERM reach every running run, which checkpoints and stops
// (a second ends the runs at once; Ctrl-Z and fg reach them too). OUT/summary.csv and
// OUT/summary.json hold, per run, the point's keys, its status, final training loss, last
// evaluation and tokens/s; OUT/sweep.json the sweep's definition.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace recall {

struct SweepConfig {
  std::string config;             // a recipe of train/ or a TOML file
  std::vector<std::string> grid;  // key=value1,value2,... (the product of all)
  std::vector<std::string> sets;  // key=value overrides of every run
  int64_t seeds = 1;              // runs per point: seeds seed, seed+1, ...
  std::string out;                // one run folder per point, the summaries
  int64_t jobs = 1;               // runs at a time (the threads are shared among them)
  bool progress = true;           // a line per run started or ended on stderr
  std::string program;            // the recall binary each run starts (empty: this process's own)
};

struct SweepResult {
  std::string csv;                    // summary.csv as written
  size_t runs = 0, finished = 0;      // points, and those whose run has finished
  int stop_signal = 0;                // the signal that stopped the sweep, or 0
  std::vector<std::string> failures;  // "<run>: <last log line> (log: <path>)"
};

// Plans the runs (every point's config read and checked first: a bad one throws UsageError
// before any run starts), starts and collects them, and writes the summaries after each run.
SweepResult run_sweep(const SweepConfig& config);

}  // namespace recall
