// `recall experiment extrapolation`, the store's prescription set against its measurement: each
// rule-less mqar-store run is read at the training length alone (recall forecast), which
// prescribes the smallest c of log:c that holds its forecast accuracy to the last multiple; then
// the run is read there under log:c and under log:(c/2). A tight prescription holds at c and fails
// at half of it. The prescription on the recalling heads' ISR, which recall forecast prints beside
// it, is left out: it found no c for 3 of the 5 default runs, and took 3 times as long to search.
#include "experiment_extrapolation.h"
#include "recall/analysis/extrapolate.h"
#include "recall/analysis/forecast_report.h"
#include "recall/analysis/isr_forecast.h"

namespace recall::experiment_detail {

namespace {

// The run's accuracy at `multiple` under log:c and log:(c/2), where a c was prescribed.
PrescriptionMeasured measure(const std::string& checkpoint, std::optional<double> c,
                             int64_t multiple, int64_t batches, const torch::Device& device) {
  PrescriptionMeasured m;
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

}  // namespace

StorePrescriptionFound store_prescription(const std::vector<ExtrapolatePoint>& points,
                                          int64_t target, int64_t batches,
                                          const torch::Device& device) {
  // the forecast holds to recall forecast's defaults (--accuracy 0.96, 2 batches)
  const ForecastConfig forecasting;
  StorePrescriptionFound out;
  out.target = target;
  out.accuracy = forecasting.accuracy;
  for (const auto& p : points) {
    if (p.trained != BetaRule::kNone || p.rule != BetaRule::kNone || p.multiple != 1) continue;
    Restored r = restore(p.checkpoint);
    // written down before anything past the training length is read
    const ForecastReading reading =
        read_forecast(r.model, r.config, forecast_multiples(target), forecasting.batches);
    const AccuracyPrescription prescribed =
        prescribe_accuracy(r.model, reading, forecasting.accuracy);
    out.runs.push_back(
        {p.checkpoint, p.accuracy, measure(p.checkpoint, prescribed.c, target, batches, device)});
  }
  return out;
}

}  // namespace recall::experiment_detail
