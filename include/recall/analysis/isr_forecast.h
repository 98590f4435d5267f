// Foretelling where a trained model's recall fails at longer contexts, from its attention weights
// at the training length alone (docs/science.md §8): the essay's theory of a softmax store,
// applied to the heads that recall.
//
// A recalling head (inspect.h) answers the query at position t by reading key c. Its weights give
// the logit gaps of the t other keys it sees,
//   d_j = ln w_j - ln w_c = beta(t + 1) (s_j - s_c),   s = q^ . k (a cosine with unit q and k),
// where beta(t + 1) is the head's logit multiplier (attn_scale, a learned scale, the rule) times
// |q|. As a softmax store's ISR^2 is the sum of the squared weight ratios, ISR^2 = sum_j exp(2 d_j)
// at the training length. A prompt m times longer, the memories growing in proportion, puts the
// query at t_m = m (t + 1) - 1: it sees t_m - t keys more, drawn from its head's pool of scores
// (near collisions included, query_isr), and every layer runs at the rule's multiplier for t_m, so
// a head reads what the layers below would write at that length (forecast_layered). Nothing past
// the training length is read: the forecast is a prediction, to be set beside the measurement.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "recall/analysis/inspect_heads.h"
#include "recall/core/random.h"
#include "recall/stores/beta_rule.h"
#include "recall/train/trainer.h"

namespace recall {

// One recalling head's forecast: the median over its queries at each multiple.
struct HeadIsr {
  int64_t layer = 0, head = 0;
  std::vector<double> isr;
};

struct IsrForecast {
  BetaRule rule = BetaRule::kNone;  // the rule at the longer lengths
  std::vector<int64_t> multiples;
  std::vector<int64_t> pairs;  // the memories in context at each multiple (pairs growing)
  // the mean over the recalling heads of each head's median forecast ISR over the queries
  std::vector<double> isr;
  std::vector<HeadIsr> per_head;  // each recalling head's, in the order first read
  int64_t heads = 0;              // recalling heads read
  double beta = 0;  // their mean logit multiplier at the training length's last position
  // cos(q, k_c) - cos(q, k_j) with unit q and k: the margin of the read key over the others,
  // median and 10th percentile over every (query, other key) of the recalling heads
  double gap_median = 0, gap_p10 = 0;
  // The memories at which isr reaches 1, interpolated in log-log between multiples; none when it
  // stays below 1 (or starts above it).
  std::optional<double> overflow_pairs;
};

// One query of a recalling head at the training length, as the forecast reads it: the head's layer
// and index, the query's position t, and the logit gaps d_j = ln w_j - ln w_c of the other keys it
// sees (the read key c left out).
struct ForecastQuery {
  int64_t layer = 0, head = 0, t = 0;
  std::vector<double> d;
  // the read key's score q^ . k (its projection on the query's direction) and beta = the
  // multiplier at t times |q|: a key of score r weighs exp(beta (r - read)) against the read one
  double read = 0, beta = 0;
};

// Per recalling head (layer, head), the scores q^ . k of every context key it did not read, over
// all its queries, sorted: the keys a longer prompt adds are drawn from these, near collisions
// included. With unit q and k (qk_norm) a score is a cosine. At 64x a query meets about 2,000
// added keys, so the pool is read from kPoolSequences prompts (about 190,000 scores for
// mqar-store): from the 128 the queries are read on, the few near collisions that carry a sharp
// head's ISR at 64x came out 0.014 or 0.054 by the prompts drawn, against 0.025 measured.
using KeyPools = std::map<std::pair<int64_t, int64_t>, std::vector<double>>;
inline constexpr int64_t kPoolSequences = 1024;
using KeyPools = std::map<std::pair<int64_t, int64_t>, std::vector<double>>;

// The forecast under `rule` from queries read at the training length. At multiple m a query moves
// to t_m = m (t + 1) - 1 and sees t_m other keys: its own t, and t_m - t more drawn from its head's
// pool (query_isr), each gap sharpened by rho = at_rule(t_m) / at_train(t), where at_train and
// at_rule hold per layer the multipliers (H or 1, T) of AttentionImpl::logit_scale under the
// trained rule and under `rule`; per head the median over its queries, then the mean over the
// heads. pairs[i] is the memories in context at multiples[i]. Fills rule, multiples, pairs, isr,
// heads and overflow_pairs (the reader of the weights fills beta and the gaps).
IsrForecast forecast_from_queries(const std::vector<ForecastQuery>& queries,
                                  const std::vector<torch::Tensor>& at_train,
                                  const std::vector<torch::Tensor>& at_rule, BetaRule rule,
                                  const std::vector<int64_t>& multiples,
                                  const std::vector<int64_t>& pairs, const KeyPools& pools = {});

// What the forecast reads at the training length: the recalling heads' queries, each layer's
// multipliers under the trained rule, and the memories at each multiple (the mqar pairs growing).
struct ForecastReading {
  std::vector<ForecastQuery> queries;
  KeyPools pools;
  std::vector<torch::Tensor> at_train;  // per layer (H or 1, multiples.back() * seq_len)
  std::vector<int64_t> multiples, pairs;
  int64_t seq_len = 0;
  BetaRule trained = BetaRule::kNone;
  std::vector<Batch> prompts;          // the mqar prompts read, at the training length
  std::vector<Batch> pool_prompts;     // more of them, whose scores add to the pools alone
  std::vector<HeadReport> heads;       // inspect's reading of every head on them
  int64_t pairs_1x = 0;                // the mqar pairs in each
  double beta = 0;                     // the heads' mean multiplier at their queries
  double gap_median = 0, gap_p10 = 0;  // as in IsrForecast
};

// Reads `model` (trained as config says) on `batches` evaluation batches at the training length,
// for the forecast at `multiples` (starting at 1). Throws UsageError for a task other than mqar.
ForecastReading read_forecast(Transformer& model, const TrainConfig& config,
                              const std::vector<int64_t>& multiples, int64_t batches);

// Each layer's multipliers (H or 1, T) under `rule`, float64; the model keeps its own rule.
std::vector<torch::Tensor> rule_scales(Transformer& model, BetaRule rule, int64_t T);

// The i-th of the keys a longer prompt adds to one query: a uniform draw from the pool, with
// replacement, a function of (draws, i) alone. Query k of a reading draws with draws = k, under
// every rule and at every multiple, so a larger multiple adds keys to the same sample and a sharper
// rule meets the same keys. Random draws, not the pool's quantiles: the median query meets a random
// sample of the near collisions, and where a longer prompt adds only tens of keys the quantiles
// give every query the same few (at 2x they missed a sharpened head's measured ISR by 1.4x).
inline double pool_draw(const std::vector<double>& pool, uint64_t draws, int64_t i) {
  const uint64_t x = splitmix64(splitmix64(draws) ^ static_cast<uint64_t>(i));
  return pool[static_cast<size_t>(x % static_cast<uint64_t>(pool.size()))];
}

// Head h's multiplier at position t, from a layer's table of rule_scales (H or 1, T).
double head_scale(const torch::Tensor& s, int64_t h, int64_t t);

// The ISR of one query at m times the length, t_m = m (t + 1) - 1, its gaps sharpened by rho.
// The t_m other keys are the query's own t and n = t_m - t more, whose scores Q_i are drawn from
// the pool (pool_draw with `draws`; its near collisions met as often as n keys meet them):
//   ISR_m^2 = sum_own exp(2 rho d_j) + sum_i exp(2 rho beta (Q_i - read)).
// Without a pool: the own keys m-fold, ISR_m^2 = (t_m / t) sum_own exp(2 rho d_j). At m = 1 both
// are the measured ISR.
double query_isr(const ForecastQuery& q, int64_t m, double rho, const std::vector<double>* pool,
                 uint64_t draws);

// The layered forecast under `rule`: the layers below a recalling head read as they would at m
// times the length, not as they did at 1x. At each multiple m the prompts of `reading` run again at
// the training length with every layer's attention emulating the longer context
// (LengthEmulation, stores/attention.h): query t takes the rule's multiplier at t_m, and the keys
// it does not read count t_m / t times in its output, the m-fold copies of the same mix. The
// recalling heads' gaps d_j are read in that pass, at the rule's multiplier, with the added keys
// drawn from the pass's pools (query_isr). A first-layer head forecasts as forecast_under does;
// a head above reads what the emulated layers below wrote, so a rule that sharpens them (or
// interference that grows in them) moves its gaps. Leaves the model as it was.
IsrForecast forecast_layered(Transformer& model, const ForecastReading& reading, BetaRule rule);

// The forecast under `rule` of what `reading` read.
IsrForecast forecast_under(Transformer& model, const ForecastReading& reading, BetaRule rule);

// The forecasts of `model` (trained as config says) under each of `rules`, at `multiples` of the
// training length with the mqar pairs growing, from `batches` evaluation batches at the training
// length. Throws UsageError for a task other than mqar.
std::vector<IsrForecast> forecast_isr(Transformer& model, const TrainConfig& config,
                                      const std::vector<int64_t>& multiples,
                                      const std::vector<BetaRule>& rules, int64_t batches);

// The smallest growth of beta that holds the forecast ISR (the mean over the heads that hold at
// 1x, held_heads) at or below `level` at every multiple read: the c of log:c, beta(n) = beta_0 (1 +
// c ln(n / L)) past the training length L. A softmax store's ISR^2 = (M - 1) E[w^2] / w_read^2
// grows with M at fixed beta; a beta growing with ln M shrinks every weight ratio exp(d_j) by its
// own power, so some c holds it, unless a key outweighs the read one (d_j > 0), which sharpening
// only strengthens.
struct Prescription {
  double level = 0;
  // recalling heads left out: past overflow at the training length (ISR >= 1), they read their key
  // by chance, and sharpening strengthens the keys above it, so no c holds them
  int64_t left_out = 0;
  // the heads it holds, (layer, head): those with ISR < 1 at the training length
  std::set<std::pair<int64_t, int64_t>> held;
  std::optional<double> c;  // none where no c up to 1,000 holds (why_none says why)
  std::string why_none;
  IsrForecast forecast;  // under log:c where c was found, over the heads it holds (held_heads)
};

// The model's own accuracy at each of reading.multiples under `rule`, from the prompts read at the
// training length run again with every layer emulating the longer context in quadrature
// (LengthEmulation, stores/attention.h): each layer takes the rule's multiplier at t_m, and the
// other keys' values add count_t times about their mean and sqrt(count_t) times in their spread, as
// the other memories of a longer prompt do. The layer above the recalling heads reads what they
// wrote, so this forecasts what the ISR of one head cannot: how the model combines its heads.
// Leaves the model as it was.
std::vector<double> forecast_accuracy(Transformer& model, const ForecastReading& reading,
                                      BetaRule rule);
// Whether forecast_accuracy under `rule` stays at or above `level` at every multiple: the same
// numbers, read from the last multiple down (where a rule too weak fails first), and stopped at the
// first below.
bool forecast_accuracy_holds(Transformer& model, const ForecastReading& reading, BetaRule rule,
                             double level);

// The smallest c in [0, 1000] of three significant digits (a rule a user can type) for which
// holds(c): 0 where it holds there, else a geometric scan from 1e-3 by 1.25 for the first c that
// holds (holds need not be monotone in c), then bisection over the three-digit values between it
// and the scan's step before (the scan's own c where its three-digit rounding fails). None where no
// c scanned holds.
std::optional<double> smallest_c(const std::function<bool(double)>& holds);

// The prescription on the forecast accuracy: the smallest c of log:c whose forecast_accuracy stays
// at or above `level` at every multiple read.
struct AccuracyPrescription {
  double level = 0;
  std::optional<double> c;  // none where no c up to 1,000 holds (why_none says why)
  std::string why_none;
  std::vector<double> accuracy;  // forecast_accuracy under log:c where c was found
};
AccuracyPrescription prescribe_accuracy(Transformer& model, const ForecastReading& reading,
                                        double level);

// `f` over the recalling heads that hold their memories at the training length, ISR < 1 there:
// the heads the prescription holds.
IsrForecast held_heads(const IsrForecast& f);

// Whether the mean forecast ISR of the `held` heads (forecast_layered, then held_heads) stays at or
// below `level` at every multiple under `rule`: the same numbers, read from the last multiple down
// and stopped at the first above.
bool forecast_layered_holds(Transformer& model, const ForecastReading& reading, BetaRule rule,
                            const std::set<std::pair<int64_t, int64_t>>& held, double level);
using HeldBelow =
    std::function<bool(BetaRule, const std::set<std::pair<int64_t, int64_t>>& held, double level)>;

// `forecast(rule)` forecasts the ISR under a rule (forecast_layered for a model). c is found to
// three significant digits (smallest_c). `below`, where given, answers each step of the search as
// the held heads of `forecast` would, more cheaply (forecast_layered_holds).
Prescription prescribe(const std::function<IsrForecast(BetaRule)>& forecast, double level,
                       const HeldBelow& below = {});

}  // namespace recall
