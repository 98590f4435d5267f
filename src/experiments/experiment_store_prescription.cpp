// `recall experiment extrapolation`, the store's prescription set against its measurement: each
// rule-less mqar-store run is forecast from the training length alone (recall forecast), which
// prescribes the smallest c of log:c that holds its forecast accuracy (and, beside it, the
// recalling heads' forecast ISR) to the last multiple; then the run is read there under log:c and
// under log:(c/2). A tight prescription holds at c and fails at half of it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/forecast_report.h"

namespace recall::experiment_detail {

using nlohmann::json;

namespace {

// One prescription of one run and what the run measured at the target under log:c and log:(c/2).
struct Measured {
  std::optional<double> c, at_c, at_half;
};

// The run's accuracy at `multiple` under log:c and log:(c/2), where a c was prescribed.
Measured measure(const std::string& checkpoint, std::optional<double> c, int64_t multiple,
                 int64_t batches, const torch::Device& device) {
  Measured m;
  m.c = c;
  if (!c) return m;
  ExtrapolateConfig read;
  read.checkpoints = {checkpoint};
  read.rules = {BetaRule::log(*c), BetaRule::log(*c / 2)};
  read.lengths = {multiple};
  read.pairs = PairsAtLength::kGrow;
  read.batches = batches;
  read.device = device;
  const auto points = extrapolate(read);
  m.at_c = points.at(0).accuracy;
  m.at_half = points.at(1).accuracy;
  return m;
}

std::string cell(const Measured& m) {
  if (!m.c) return "none found";
  return fmt::format("{:.4g}: {:.3f} / {:.3f}", *m.c, *m.at_c, *m.at_half);
}

json to_json(const Measured& m) {
  return {{"c", json_or_null(m.c)},
          {"accuracy_at_c", json_or_null(m.at_c)},
          {"accuracy_at_half_c", json_or_null(m.at_half)}};
}

// "held at c in k of n runs, failed at c/2 in j of n"
std::string tally(const std::vector<Measured>& ms, double level) {
  int64_t found = 0, holds = 0, half_fails = 0;
  for (const auto& m : ms) {
    if (!m.c) continue;
    ++found;
    holds += *m.at_c >= level;
    half_fails += *m.at_half < level;
  }
  return fmt::format(
      "c found for {} of {} runs; accuracy >= {} at c in {} of them, below at c/2 in "
      "{}",
      found, ms.size(), level, holds, half_fails);
}

}  // namespace

StorePrescription store_prescription(const std::vector<ExtrapolatePoint>& points,
                                     const std::string& out_dir, int64_t target, int64_t batches,
                                     const torch::Device& device) {
  ForecastConfig forecasting;
  forecasting.target = target;
  forecasting.rules = {BetaRule::kNone};
  // the level the measurement is judged at: 0.95, as the essay's test of the rules
  constexpr double kHolds = 0.95;
  std::vector<std::vector<std::string>> rows;
  std::vector<Measured> by_accuracy, by_isr;
  StorePrescription out;
  out.json = json::array();
  for (const auto& p : points) {
    if (p.trained != BetaRule::kNone || p.rule != BetaRule::kNone || p.multiple != 1) continue;
    Restored r = restore(p.checkpoint);
    // written down before anything past the training length is read
    const ForecastReport f = forecast_checkpoint(r, forecasting, p.checkpoint);
    by_accuracy.push_back(measure(p.checkpoint, f.by_accuracy.c, target, batches, device));
    by_isr.push_back(measure(p.checkpoint, f.prescription.c, target, batches, device));
    const std::string run = fs::relative(p.checkpoint, out_dir).string();
    rows.push_back({"`" + run + "`", fmt::format("{:.3f}", p.accuracy), cell(by_accuracy.back()),
                    cell(by_isr.back())});
    out.json.push_back({{"checkpoint", run},
                        {"accuracy_at_1x", p.accuracy},
                        {"by_accuracy", to_json(by_accuracy.back())},
                        {"by_isr", to_json(by_isr.back())}});
  }
  if (rows.empty()) return out;
  out.markdown = fmt::format(
      "The prescription, written before it is measured: `recall forecast --checkpoint RUN "
      "--target {0}` on each rule-less run reads it at the training length alone and prescribes "
      "the smallest c of log:c, beta(n) = beta_0 (1 + c ln(n / L)), whose forecast accuracy stays "
      ">= {1} to {0}x (and, beside it, the c that holds the recalling heads' forecast ISR <= "
      "{2}); then `recall extrapolate --rules log:c,log:c/2 --lengths {0}` measures the run "
      "there. Each cell: c: accuracy at {0}x under log:c / under log:(c/2).\n\n{3}\n"
      "On the forecast accuracy: {4}. On the ISR: {5}.\n",
      target, forecasting.accuracy, forecasting.level,
      markdown_table({"run", "accuracy at 1x", "c on the forecast accuracy", "c on the ISR"}, rows),
      tally(by_accuracy, kHolds), tally(by_isr, kHolds));
  return out;
}

}  // namespace recall::experiment_detail
