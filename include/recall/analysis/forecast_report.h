// `recall forecast`: a checkpoint's recalling heads read at the training length alone, their ISR
// forecast under each rule to a target multiple of that length, and the prescription, the
// smallest growth c of beta(n) = beta_0 (1 + c ln(n / L)) that holds the forecast ISR at or below
// a stated level there, and the smallest c that holds the forecast accuracy at or above a stated
// level (isr_forecast.h). Every number is a prediction: nothing past the training
// length is read, so it can be written down before `recall extrapolate` measures.
#pragma once
#include <string>
#include <vector>

#include "recall/analysis/critical_scaling.h"
#include "recall/analysis/isr_forecast.h"

namespace recall {

struct ForecastConfig {
  int64_t target = 64;          // the multiple of the training length to forecast to (>= 2)
  std::vector<BetaRule> rules;  // the rules forecast (the trained rule is added where missing)
  // the ISR the prescription holds to: on mqar-store runs accuracy stayed >= 0.95 below about
  // 0.3, while where it halves varied from 0.47 to 1.22 (docs/science.md §8)
  double level = 0.25;
  // the forecast accuracy the accuracy prescription holds to: 0.95, and about twice the sampling
  // error of the 2 batches read (on the 5 mqar-store runs the forecast was within 0.02 of the
  // measured accuracy near 0.95, docs/science.md §8)
  double accuracy = 0.96;
  int64_t batches = 2;  // evaluation batches read at the training length
  void validate() const;
};

struct ForecastReport {
  std::string checkpoint;
  int64_t seq_len = 0, target = 0;
  BetaRule trained = BetaRule::kNone;
  std::vector<IsrForecast> forecasts;  // one per rule, layered (forecast_layered)
  // the same with the layers below each head as they read at 1x (forecast_under)
  std::vector<IsrForecast> alone;
  std::vector<std::vector<double>> accuracy;  // forecast_accuracy per rule, at each multiple
  Prescription prescription;
  AccuracyPrescription by_accuracy;  // the same growth asked of the forecast accuracy
  // the published criteria's c on the same heads (those that hold at 1x), beside the prescription
  CriticalScaling critical;
};

// The multiples read: powers of 2 from 1, and the target.
std::vector<int64_t> forecast_multiples(int64_t target);

ForecastReport forecast_checkpoint(Restored& restored, const ForecastConfig& config,
                                   const std::string& checkpoint);
std::string forecast_table(const ForecastReport& report);
std::string forecast_json(const ForecastReport& report);

}  // namespace recall
