// A run's metrics log, DIR/metrics.jsonl: one JSON object per line, appended by the trainer.
// A training record, {"step": 100, "loss": 1.23, "lr": 1e-3, "grad_norm": 0.4, "tokens_per_s": ..,
// "mfu": ..}, every log_every steps; an evaluation record, {"step": 250, "eval": {"loss": 1.1,
// "accuracy": 0.6, "bits_per_char": ..}}, at each evaluation. Every value is a number. One reader
// for all that look back at a run (resume, plot, sweep, sample, the experiments), so the format
// lives here alone.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace recall {

struct MetricsRecord {
  int64_t step = 0;
  bool eval = false;                     // an evaluation record: values are its "eval" object's
  std::map<std::string, double> values;  // the numeric fields besides step

  // The value named `key`, if the record has it.
  std::optional<double> get(const std::string& key) const;
};

// DIR/metrics.jsonl.
std::string metrics_path(const std::string& run_dir);

// The record as one JSON line, without the newline (what the trainer appends).
std::string metrics_line(const MetricsRecord& record);

// Every record of DIR/metrics.jsonl, in file order. A missing file holds none; a line that is not a
// record (a kill mid-write tears the last one) is skipped.
std::vector<MetricsRecord> read_metrics(const std::string& run_dir);

// The last evaluation logged at `step` (a resumed run logs it again); nullopt if none.
std::optional<MetricsRecord> eval_at(const std::vector<MetricsRecord>& records, int64_t step);

}  // namespace recall
