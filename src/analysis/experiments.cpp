#include "recall/analysis/experiments.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "recall/analysis/extrapolate.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe.h"
#include "recall/analysis/report.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/plot.h"
#include "recall/stores/theory.h"
#include "recall/train/trainer.h"

namespace recall {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string>& experiment_names() {
  static const std::vector<std::string> names = {"sharpness", "scaling", "facts", "lm",
                                                 "extrapolation"};
  return names;
}

void ExperimentConfig::validate() const {
  const auto& names = experiment_names();
  check_arg(std::find(names.begin(), names.end(), name) != names.end(),
            fmt::format("experiment '{}' is unknown: use one of {}", name, fmt::join(names, ", ")));
  check_arg(!out_dir.empty(), "--out is empty: give a folder for the experiment's files");
  check_arg(steps >= 0 && steps <= 10000000,
            fmt::format("--steps {}: must be in [0, 10000000] (0: the experiment's own)", steps));
}

double fitted_slope(const std::vector<double>& x, const std::vector<double>& y) {
  check_arg(x.size() == y.size() && x.size() >= 2, "fitted_slope: needs two or more points");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  check_arg(sxx > 0, "fitted_slope: needs two distinct x");
  return sxy / sxx;
}

torch::Tensor softmax_logit_grad(const torch::Tensor& w, const torch::Tensor& g) {
  return w * (g - (w * g).sum(-1, true));
}

AttentionStats attention_stats(Transformer& model, const Batch& batch) {
  ActivationCache cache;
  auto logits = model->forward(batch.x, &cache);  // (B, T, V)
  auto loss =
      torch::nn::functional::cross_entropy(logits.index({batch.mask}), batch.y.index({batch.mask}));
  std::vector<torch::Tensor> weights;
  for (size_t i = 0; i < model->blocks.size(); ++i)
    weights.push_back(cache.at(fmt::format("blocks.{}.attn.weights", i)));  // (B, H, T, N + T)
  const auto grads = torch::autograd::grad({loss}, weights);
  AttentionStats s;
  double g2 = 0, rows = 0;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto& w = weights[i];
    auto dz = softmax_logit_grad(w, grads[i]);  // (B, H, T, N + T)
    g2 += dz.square().sum().item<double>();
    s.entropy += -torch::special::xlogy(w, w).sum().item<double>();
    const int64_t T = w.size(2), N = w.size(3) - T;
    auto seen = torch::arange(N + 1, N + T + 1, torch::kFloat64);  // keys seen by each query (T,)
    s.uniform_entropy += torch::log(seen).sum().item<double>() * static_cast<double>(w.size(0)) *
                         static_cast<double>(w.size(1));
    rows += static_cast<double>(w.size(0) * w.size(1) * T);
  }
  s.grad_norm = std::sqrt(g2);
  s.entropy /= rows;
  s.uniform_entropy /= rows;
  return s;
}

std::optional<int64_t> steps_to_accuracy(const std::string& metrics_file, double target) {
  std::ifstream in(metrics_file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("eval")) continue;
    if (j["eval"].value("accuracy", 0.0) >= target) return j["step"].get<int64_t>();
  }
  return std::nullopt;
}

namespace {

// A Markdown table (as report.cpp's): a header row, then rows of the same width.
std::string md_table(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows) {
  std::string out = "| " + fmt::format("{}", fmt::join(header, " | ")) + " |\n|";
  for (size_t i = 0; i < header.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& r : rows) out += "| " + fmt::format("{}", fmt::join(r, " | ")) + " |\n";
  return out;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

class Experiment {
 public:
  explicit Experiment(const ExperimentConfig& c) : c_(c) {}
  // The experiment's own step count, or the config's override.
  int64_t steps(int64_t own) const { return c_.steps > 0 ? c_.steps : own; }
  std::string path(const std::string& name) const { return (fs::path(c_.out_dir) / name).string(); }
  std::string run_dir(const std::string& name) const {
    return (fs::path(c_.out_dir) / "runs" / name).string();
  }

  // Trains `preset` with `sets` into runs/<name> (reusing a finished run there).
  TrainResult train_run(const std::string& preset, const std::vector<std::string>& sets,
                        const std::string& name) const {
    const TrainConfig tc = train_config_from_file(preset, sets);
    TrainOptions o;
    o.out_dir = run_dir(name);
    o.reuse = true;
    o.progress = c_.progress;
    o.print_config = false;
    if (c_.progress) fmt::print(stderr, "experiment {}: {}\n", c_.name, o.out_dir);
    return train(tc, o);
  }

  ExperimentResult sharpness();
  ExperimentResult scaling();
  ExperimentResult facts();
  ExperimentResult lm();
  ExperimentResult extrapolation();

 private:
  const ExperimentConfig& c_;
};

std::string opt_num(const std::optional<double>& x, const char* f = "{:.4g}") {
  return x ? fmt::format(fmt::runtime(f), *x) : "—";
}

// ---------------------------------------------------------------------------------------------
// 1. Sharpness

ExperimentResult Experiment::sharpness() {
  // the default also goes past 8, where the logits of a trained head saturate
  std::vector<double> scales = {0.25, 0.5, 1, 2, 4, 8};
  if (!c_.quick) scales.push_back(32);
  const int64_t seeds = c_.quick ? 1 : 3;
  const int64_t steps = this->steps(c_.quick ? 800 : 2500);
  json points = json::array();
  std::ostringstream data;  // index 0: one row per run; index 1: the means per scale
  std::vector<std::vector<std::string>> rows;
  std::ostringstream means;
  for (double scale : scales) {
    std::vector<double> acc, gi, ei, gf, ef;
    std::vector<std::string> s99;
    double uniform = 0;
    for (int64_t seed = 0; seed < seeds; ++seed) {
      const std::vector<std::string> sets = {fmt::format("steps={}", steps),
                                             "eval_every=100",
                                             "eval_batches=4",
                                             fmt::format("checkpoint_every={}", steps),
                                             fmt::format("attn_scale={}", scale),
                                             fmt::format("seed={}", seed)};
      const TrainConfig tc = train_config_from_file("mqar-tiny", sets);
      // the model the run starts from (the trainer seeds torch with the run's seed, then builds)
      torch::manual_seed(static_cast<uint64_t>(seed));
      Transformer init(tc.model);
      auto task = make_task(tc);
      Rng rng(0x5eed0000ULL + static_cast<uint64_t>(seed));
      const Batch batch = task->sample(tc.trainer.batch_size, tc.model.seq_len, rng);
      const AttentionStats at_init = attention_stats(init, batch);
      const std::string name = fmt::format("sharpness-{}/scale{}-seed{}", steps, scale, seed);
      const TrainResult tr = train_run("mqar-tiny", sets, name);
      Restored r = restore(run_dir(name));
      const AttentionStats trained = attention_stats(r.model, batch);
      const auto to99 = steps_to_accuracy(run_dir(name) + "/metrics.jsonl", 0.99);
      const double a = tr.eval.at("accuracy");
      points.push_back({{"attn_scale", scale},
                        {"seed", seed},
                        {"accuracy", a},
                        {"steps_to_99", to99 ? json(*to99) : json(nullptr)},
                        {"grad_norm_init", at_init.grad_norm},
                        {"entropy_init", at_init.entropy},
                        {"grad_norm_final", trained.grad_norm},
                        {"entropy_final", trained.entropy},
                        {"entropy_uniform", at_init.uniform_entropy},
                        {"steps", steps}});
      data << scale << ' ' << seed << ' ' << a << ' '
           << (to99 ? std::to_string(*to99) : std::string("NaN")) << ' ' << at_init.grad_norm << ' '
           << at_init.entropy << ' ' << trained.grad_norm << ' ' << trained.entropy << '\n';
      acc.push_back(a);
      gi.push_back(at_init.grad_norm);
      ei.push_back(at_init.entropy);
      gf.push_back(trained.grad_norm);
      ef.push_back(trained.entropy);
      s99.push_back(to99 ? std::to_string(*to99) : "never");
      uniform = at_init.uniform_entropy;
    }
    means << scale << ' ' << mean(acc) << ' ' << mean(gi) << ' ' << mean(ei) << ' ' << mean(gf)
          << ' ' << mean(ef) << ' ' << uniform << '\n';
    rows.push_back({fmt::format("{}", scale),
                    seeds > 1 ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", mean(acc),
                                            *std::min_element(acc.begin(), acc.end()),
                                            *std::max_element(acc.begin(), acc.end()))
                              : fmt::format("{:.3f}", acc[0]),
                    fmt::format("{}", fmt::join(s99, ", ")), fmt::format("{:.3g}", mean(gi)),
                    fmt::format("{:.3f} ({:.3f})", mean(ei), uniform),
                    fmt::format("{:.3g}", mean(gf)), fmt::format("{:.3f}", mean(ef))});
  }
  write_file_atomic(
      path("beta_sweep.json"),
      json{{"config", "mqar-tiny"}, {"steps", steps}, {"seeds", seeds}, {"points", points}}.dump(
          2) +
          "\n");
  data << "\n\n" << means.str();
  render_plot(
      path("beta_sweep.png"), data.str(),
      [&](const std::string& f) {
        return fmt::format(
            "set multiplot layout 1,3\nset logscale x 2\nset grid\nset xlabel 'attn scale'\n"
            "set key bottom left\n"
            "set title 'final accuracy (points: seeds)'\nset yrange [0:1.02]\n"
            "plot '{0}' index 0 using 1:3 with points pt 7 lc {1} notitle, "
            "'{0}' index 1 using 1:2 with lines lc {1} title 'mean'\n"
            "set title 'steps to 99 % (missing: never)'\nset autoscale y\n"
            "plot '{0}' index 0 using 1:4 with points pt 7 lc {2} notitle\n"
            "set title 'attention logits: init and trained'\nset logscale y\nset ylabel 'gradient "
            "norm'\n"
            "set y2label 'entropy (nats)'\nset y2tics\nset key bottom left\n"
            "plot '{0}' index 1 using 1:3 with linespoints pt 7 lc {3} title 'grad norm (init)', "
            "'{0}' index 1 using 1:5 with linespoints pt 6 dt 2 lc {3} title 'grad norm "
            "(trained)', '{0}' index 1 using 1:4 axes x1y2 with linespoints pt 7 lc {4} title "
            "'entropy (init)', '{0}' index 1 using 1:7 axes x1y2 with lines dt 3 lc {4} title "
            "'uniform'\nunset multiplot\n",
            f, plot_colour(0), plot_colour(1), plot_colour(2), plot_colour(3));
      },
      1600, 520);
  ExperimentResult out;
  out.title = "Sharpness in trained attention";
  out.json = "beta_sweep.json";
  out.plot = "beta_sweep.png";
  out.markdown = fmt::format(
      "`recall experiment sharpness{}`: mqar-tiny ({} steps, {} seed(s) per point) with its "
      "attention logits multiplied by `attn_scale` (1 = the standard 1 / sqrt(d_head)). The "
      "gradient norm is || dL/dz || over every attention logit z of a training batch, the "
      "entropy the mean softmax entropy per query (uniform attention in brackets), at "
      "initialisation and after training.\n\n{}\n![sharpness](beta_sweep.png)\n",
      c_.quick ? " --quick" : "", steps, seeds,
      md_table({"attn_scale", "accuracy", "steps to 99 %", "grad norm init", "entropy init",
                "grad norm trained", "entropy trained"},
               rows));
  return out;
}

// ---------------------------------------------------------------------------------------------
// 2. Scaling laws

// Least squares of y = a x + b x^2 (no intercept): (a, b).
std::pair<double, double> fit_linear_quadratic(const std::vector<double>& x,
                                               const std::vector<double>& y) {
  double s11 = 0, s12 = 0, s22 = 0, t1 = 0, t2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i], v = x[i] * x[i];
    s11 += u * u;
    s12 += u * v;
    s22 += v * v;
    t1 += u * y[i];
    t2 += v * y[i];
  }
  const double det = s11 * s22 - s12 * s12;
  check_arg(x.size() >= 2 && det > 0, "fit_linear_quadratic: needs two distinct x");
  return {(t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det};
}

ExperimentResult Experiment::scaling() {
  const int64_t trials = c_.quick ? 1 : 4, queries = c_.quick ? 128 : 256;
  const double probe_limit = c_.quick ? 20000 : 200000;  // largest theory capacity probed
  struct Point {
    std::string store, variable;
    double value;
    int64_t d;
    double beta;
    std::optional<double> theory, probe;
  };
  std::vector<Point> pts;
  auto add = [&](const std::string& store, const std::string& variable, double value, int64_t d,
                 double beta) {
    Point p{store, variable, value, d, beta, theory_capacity(StoreSpec::parse(store, beta), d), {}};
    if (p.theory && *p.theory <= probe_limit) {
      ProbeConfig pc;
      pc.stores = {store};
      pc.d_k = pc.d_v = d;
      pc.beta = beta;
      pc.trials = trials;
      pc.queries = queries;
      pc.rules = {};
      pc.seed = static_cast<uint64_t>(pts.size());
      const auto r = run_probe(pc);
      p.probe = r.stores.front().capacity.rms;
    }
    pts.push_back(p);
  };
  const std::vector<int64_t> dims =
      c_.quick ? std::vector<int64_t>{16, 32, 64, 128} : std::vector<int64_t>{16, 32, 64, 128, 256};
  for (const char* store : {"outer_product", "relu", "relu2"})
    for (int64_t d : dims) add(store, "d_k", static_cast<double>(d), d, 8.0);
  for (int p = 1; p <= 4; ++p) add(fmt::format("relu{}", p), "p", p, 32, 8.0);
  for (int n = 2; n <= 5; ++n) add(fmt::format("exp{}", n), "n", n, 64, 8.0);
  for (double beta : {2.0, 4.0, 6.0, 8.0, 12.0, 16.0}) add("softmax", "beta", beta, 64, beta);

  // one fit per (store family, variable): x and ln C from theory, and from the probe where run
  json fits = json::array();
  std::vector<std::vector<std::string>> rows;
  auto fit = [&](const std::string& family, const std::string& variable, bool log_x, double essay,
                 const std::string& essay_text, const std::function<bool(const Point&)>& pick) {
    std::vector<double> xt, yt, xp, yp;
    for (const auto& p : pts)
      if (p.variable == variable && pick(p)) {
        const double x = log_x ? std::log(p.value) : p.value;
        if (p.theory) xt.push_back(x), yt.push_back(std::log(*p.theory));
        if (p.probe) xp.push_back(x), yp.push_back(std::log(*p.probe));
      }
    const double slope = fitted_slope(xt, yt);
    std::optional<double> measured;
    if (xp.size() >= 2) measured = fitted_slope(xp, yp);
    fits.push_back({{"store", family},
                    {"variable", variable},
                    {"slope", slope},
                    {"essay", essay},
                    {"essay_form", essay_text},
                    {"measured", measured ? json(*measured) : json(nullptr)},
                    {"fit", log_x ? "ln C against ln x" : "ln C against x"}});
    rows.push_back({"`" + family + "`", variable, essay_text, fmt::format("{:.3f}", essay),
                    fmt::format("{:.3f}", slope), opt_num(measured, "{:.3f}")});
  };
  fit("outer_product", "d_k", true, 1.0, "d + 1: slope 1",
      [](const Point& p) { return p.store == "outer_product"; });
  fit("relu", "d_k", true, 1.0, "2d + 1: slope 1",
      [](const Point& p) { return p.store == "relu"; });
  fit("relu2", "d_k", true, 2.0, "d^2 / 1.5: slope 2",
      [](const Point& p) { return p.store == "relu2"; });
  fit("relu^p", "p", false, std::log(32.0), "~ d^p: ln C rises ln d = 3.47 per power (d = 32)",
      [](const Point&) { return true; });
  fit("exp^n", "n", false, std::log(3100.0 / 40.0) / 2,
      "exp2 ~40, exp4 ~3,100 (d = 64, beta = 8): ln C rises 2.17 per term",
      [](const Point&) { return true; });
  // softmax: ln(C - 1) = a beta + b beta^2, the essay's a = 2, b = -2 / d
  {
    std::vector<double> xt, yt, xp, yp;
    for (const auto& p : pts)
      if (p.store == "softmax") {
        if (p.theory) xt.push_back(p.value), yt.push_back(std::log(*p.theory - 1));
        if (p.probe) xp.push_back(p.value), yp.push_back(std::log(*p.probe - 1));
      }
    const auto [a, b] = fit_linear_quadratic(xt, yt);
    std::optional<std::pair<double, double>> m;
    if (xp.size() >= 2) m = fit_linear_quadratic(xp, yp);
    fits.push_back({{"store", "softmax"},
                    {"variable", "beta"},
                    {"form", "ln(C - 1) = a beta + b beta^2"},
                    {"slope", {{"a", a}, {"b", b}}},
                    {"essay", {{"a", 2.0}, {"b", -2.0 / 64}}},
                    {"essay_form", "1 + exp(2 beta - 2 beta^2 / d), d = 64"},
                    {"measured", m ? json{{"a", m->first}, {"b", m->second}} : json(nullptr)}});
    rows.push_back(
        {"`softmax`", "beta", "1 + exp(2 beta - 2 beta^2 / d): a = 2, b = -2/d",
         fmt::format("a = 2, b = {:.4f}", -2.0 / 64), fmt::format("a = {:.3f}, b = {:.4f}", a, b),
         m ? fmt::format("a = {:.3f}, b = {:.4f} (beta <= {:.0f})", m->first, m->second, xp.back())
           : "—"});
  }
  // the per-M ISR of outer product and least squares against their closed forms
  ProbeConfig pc;
  pc.stores = {"outer_product", "least_squares"};
  pc.m = {16, 64, 256, 1024, 4096, 16384};
  pc.trials = trials;
  pc.queries = queries;
  pc.rules = {};
  const auto isr = run_probe(pc);
  json table = json::array();
  std::vector<std::vector<std::string>> isr_rows;
  for (size_t i = 0; i < pc.m.size(); ++i) {
    const double M = static_cast<double>(pc.m[i]), d = static_cast<double>(pc.d_k);
    const double outer = std::sqrt((M - 1) / d), ls = M <= d ? 0.0 : std::sqrt(M / d - 1);
    const double outer_probe = isr.stores[0].curve[i].isr.rms,
                 ls_probe = isr.stores[1].curve[i].isr.rms;
    table.push_back({{"M", pc.m[i]},
                     {"outer_product_closed_form", outer},
                     {"outer_product_probe", outer_probe},
                     {"least_squares_closed_form", ls},
                     {"least_squares_probe", ls_probe}});
    isr_rows.push_back({std::to_string(pc.m[i]), fmt::format("{:.4g}", outer),
                        fmt::format("{:.4g}", outer_probe), fmt::format("{:.4g}", ls),
                        fmt::format("{:.4g}", ls_probe)});
  }
  json points = json::array();
  std::ostringstream data;  // one block per variable: x theory probe
  std::vector<std::vector<std::string>> point_rows;
  for (const auto& p : pts) {
    points.push_back({{"store", p.store},
                      {"variable", p.variable},
                      {"value", p.value},
                      {"d_k", p.d},
                      {"beta", p.beta},
                      {"theory", p.theory ? json(*p.theory) : json(nullptr)},
                      {"probe_rms", p.probe ? json(*p.probe) : json(nullptr)}});
  }
  // gnuplot blocks: 0-2 the d_k stores, 3 relu^p, 4 exp^n, 5 softmax
  const std::vector<std::pair<std::string, std::string>> blocks = {
      {"outer_product", "d_k"}, {"relu", "d_k"}, {"relu2", "d_k"}, {"", "p"}, {"", "n"},
      {"softmax", "beta"}};
  for (const auto& [store, variable] : blocks) {
    for (const auto& p : pts)
      if (p.variable == variable && (store.empty() || p.store == store))
        data << p.value << ' ' << p.theory.value_or(NAN) << ' ' << p.probe.value_or(NAN) << '\n';
    data << "\n\n";
  }
  render_plot(
      path("scaling.png"), data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,4\nset grid\nset logscale y\nset ylabel 'capacity M'\n"
            "set key top left\n";
        gp += "set logscale x 2\nset xlabel 'd_k'\nset title 'capacity against d_k'\nplot ";
        const char* names[] = {"outer product", "relu", "relu^2"};
        for (int i = 0; i < 3; ++i)
          gp += fmt::format(
              "'{0}' index {1} using 1:2 with lines lc {2} title '{3}', '{0}' index {1} using 1:3 "
              "with points pt 7 lc {2} notitle{4}",
              f, i, plot_colour(i), names[i], i < 2 ? ", " : "\n");
        gp += "unset logscale x\nset xlabel 'relu power p (d_k = 32)'\nset title 'relu^p'\n";
        gp += fmt::format(
            "plot '{0}' index 3 using 1:2 with lines lc {1} title 'theory', '{0}' index 3 using "
            "1:3 with points pt 7 lc {1} title 'probe'\n",
            f, plot_colour(3));
        gp += "set xlabel 'exp terms n (d_k = 64, beta = 8)'\nset title 'exp series'\n";
        gp += fmt::format(
            "plot '{0}' index 4 using 1:2 with lines lc {1} title 'theory', '{0}' index 4 using "
            "1:3 with points pt 7 lc {1} title 'probe'\n",
            f, plot_colour(4));
        gp += "set xlabel 'beta (d_k = 64)'\nset title 'softmax'\n";
        gp += fmt::format(
            "plot '{0}' index 5 using 1:2 with lines lc {1} title 'theory', '{0}' index 5 using "
            "1:3 with points pt 7 lc {1} title 'probe', 1 + exp(2*x - 2*x*x/64) dt 2 lc {2} "
            "title 'essay'\nunset multiplot\n",
            f, plot_colour(5), plot_colour(7));
        return gp;
      },
      1800, 480);
  write_file_atomic(path("scaling.json"), json{{"trials", trials},
                                               {"queries", queries},
                                               {"fits", fits},
                                               {"points", points},
                                               {"isr_table", table}}
                                                  .dump(2) +
                                              "\n");
  ExperimentResult out;
  out.title = "Capacity scaling laws";
  out.json = "scaling.json";
  out.plot = "scaling.png";
  out.markdown = fmt::format(
      "`recall experiment scaling{}`: the capacity (where E[ISR^2] = 1) from theory (keys "
      "uniform on the sphere) and from the probe (RMS crossing, {} trial(s) of {} queries; "
      "probed where theory is at most {:.0f}) against d_k (16 to {}), the relu power p, the "
      "number of exp terms n and the softmax beta. Slopes are least-squares fits of ln C.\n\n{}\n"
      "Per-M RMS ISR of the outer-product and least-squares stores at d_k = 64: the closed forms "
      "sqrt((M - 1) / d) and sqrt(M / d - 1) (0 up to d) beside the probe.\n\n{}\n"
      "![scaling](scaling.png)\n",
      c_.quick ? " --quick" : "", trials, queries, probe_limit, dims.back(),
      md_table({"store", "variable", "essay's form", "essay slope", "theory slope", "probe slope"},
               rows),
      md_table({"M", "outer product (closed form)", "outer product (probe)",
                "least squares (closed form)", "least squares (probe)"},
               isr_rows));
  return out;
}

// ---------------------------------------------------------------------------------------------
// 3. Facts to saturation

struct FfnVariant {
  std::string name;  // feed_forward_name spelling
  std::vector<std::string> sets;
};

ExperimentResult Experiment::facts() {
  // 128 x 128 (subject, relation) cells with 256 objects: 8 bits a fact, 131072 bits at most, in
  // a one-layer d = 32 model of about 33k parameters, so that the table is not what limits bits
  // per parameter. Every feed-forward store has 12 d^2 parameters.
  const int64_t subjects = 128, relations = 128, objects = 256;
  const std::vector<FfnVariant> variants = {
      {"mlp-relu", {"ffn=mlp", "activation=relu", "ffn_mult=6"}},
      {"mlp-relu2", {"ffn=mlp", "activation=relu2", "ffn_mult=6"}},
      {"mlp-gelu", {"ffn=mlp", "activation=gelu", "ffn_mult=6"}},
      {"glu-silu", {"ffn=glu", "activation=silu", "ffn_mult=4"}},
      {"glu-relu2", {"ffn=glu", "activation=relu2", "ffn_mult=4"}},
      {"linear", {"ffn=linear", "ffn_mult=6"}},
      {"learned_kv", {"ffn=learned_kv", "ffn_slots=160"}}};
  const std::vector<int64_t> grid =
      c_.quick ? std::vector<int64_t>{2048, 8192} : std::vector<int64_t>{2048, 4096, 8192, 16384};
  const int64_t steps = this->steps(c_.quick ? 800 : 3000), batch = 512;
  auto sets_for = [&](const FfnVariant& v, int64_t n, int64_t s) {
    std::vector<std::string> sets = {fmt::format("facts_n={}", n),
                                     fmt::format("facts_subjects={}", subjects),
                                     fmt::format("facts_relations={}", relations),
                                     fmt::format("facts_objects={}", objects),
                                     fmt::format("steps={}", s),
                                     fmt::format("batch_size={}", batch),
                                     "lr=3e-3",
                                     "min_lr=3e-5",
                                     fmt::format("eval_every={}", s),
                                     fmt::format("checkpoint_every={}", s),
                                     "log_every=500"};
    sets.insert(sets.end(), v.sets.begin(), v.sets.end());
    return sets;
  };
  json points = json::array();
  std::ostringstream data;  // one block per kind: facts bits_stored bits_per_param
  struct Best {
    std::string kind;
    int64_t params = 0, facts = 0;
    double bits_per_param = -1e9, accuracy = 0;
  };
  std::vector<Best> best;
  for (const auto& v : variants) {
    Best b{v.name};
    for (int64_t n : grid) {
      const auto tr = train_run("facts-tiny", sets_for(v, n, steps),
                                fmt::format("facts-{}/{}-{}", steps, v.name, n));
      const auto& e = tr.eval;
      const auto params = static_cast<int64_t>(e.at("params"));
      const auto [ffn, activation] = feed_forward_from_name(v.name);
      points.push_back(
          {{"ffn", to_string(ffn)},
           {"activation", ffn == FfnKind::kMlp || ffn == FfnKind::kGlu ? json(to_string(activation))
                                                                       : json(nullptr)},
           {"kind", v.name},
           {"params", params},
           {"facts", n},
           {"steps", steps},
           {"exposures_per_fact", static_cast<double>(steps * batch) / n},
           {"accuracy", e.at("accuracy")},
           {"bits_stored", e.at("bits")},
           {"bits_per_param", e.at("bits_per_param")}});
      data << n << ' ' << e.at("bits") << ' ' << e.at("bits_per_param") << '\n';
      b.params = params;
      if (e.at("bits_per_param") > b.bits_per_param) {
        b.bits_per_param = e.at("bits_per_param");
        b.facts = n;
        b.accuracy = e.at("accuracy");
      }
    }
    data << "\n\n";
    best.push_back(b);
  }
  // more training at the best kind's plateau: twice the steps
  const auto top = std::max_element(best.begin(), best.end(), [](const Best& a, const Best& b) {
    return a.bits_per_param < b.bits_per_param;
  });
  const auto& top_variant = *std::find_if(variants.begin(), variants.end(),
                                          [&](const FfnVariant& v) { return v.name == top->kind; });
  const auto doubled = train_run("facts-tiny", sets_for(top_variant, top->facts, 2 * steps),
                                 fmt::format("facts-{}/{}-{}", 2 * steps, top->kind, top->facts));
  const double doubled_bpp = doubled.eval.at("bits_per_param");
  std::vector<std::vector<std::string>> rows;
  auto ranked = best;
  std::sort(ranked.begin(), ranked.end(),
            [](const Best& a, const Best& b) { return a.bits_per_param > b.bits_per_param; });
  for (const auto& b : ranked)
    rows.push_back({"`" + b.kind + "`", std::to_string(b.params), std::to_string(b.facts),
                    fmt::format("{:.3f}", b.accuracy), fmt::format("{:.3f}", b.bits_per_param),
                    fmt::format("{:.0f} %", 100 * b.bits_per_param / 2.0),
                    fmt::format("{:.0f} %", 100 * b.bits_per_param / 3.6)});
  json plateau = json::array();
  for (const auto& b : ranked)
    plateau.push_back({{"kind", b.kind},
                       {"params", b.params},
                       {"facts", b.facts},
                       {"bits_per_param", b.bits_per_param}});
  write_file_atomic(path("facts_sweep.json"),
                    json{{"subjects", subjects},
                         {"relations", relations},
                         {"objects", objects},
                         {"steps", steps},
                         {"batch_size", batch},
                         {"points", points},
                         {"plateau", plateau},
                         {"doubled",
                          {{"kind", top->kind},
                           {"facts", top->facts},
                           {"steps", 2 * steps},
                           {"bits_per_param", doubled_bpp},
                           {"bits_per_param_before", top->bits_per_param}}},
                         {"literature", {{"allen_zhu_li", 2.0}, {"morris_et_al", 3.6}}}}
                            .dump(2) +
                        "\n");
  render_plot(
      path("facts_sweep.png"), data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,2\nset grid\nset logscale x 2\nset xlabel 'facts'\n"
            "set key top left\nset title 'bits stored'\nset ylabel 'bits'\nplot ";
        for (size_t i = 0; i < variants.size(); ++i)
          gp +=
              fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f, i,
                          plot_colour(i), variants[i].name, i + 1 < variants.size() ? ", " : "\n");
        gp +=
            "set title 'bits per parameter (dashed: 2 and 3.6 of the literature)'\n"
            "set ylabel 'bits / parameter'\nset key off\nplot ";
        for (size_t i = 0; i < variants.size(); ++i)
          gp += fmt::format("'{}' index {} using 1:3 with linespoints pt 7 lc {} notitle, ", f, i,
                            plot_colour(i));
        gp += "2 dt 2 lc rgb 'black' notitle, 3.6 dt 3 lc rgb 'black' notitle\nunset multiplot\n";
        return gp;
      },
      1600, 560);
  ExperimentResult out;
  out.title = "Facts to saturation, per feed-forward kind";
  out.json = "facts_sweep.json";
  out.plot = "facts_sweep.png";
  out.markdown = fmt::format(
      "`recall experiment facts{}`: random (subject, relation) -> object facts over {} x {} "
      "cells and {} objects (log2 {} = {:.0f} bits a fact), in facts-tiny's one-layer d = 32 "
      "model with each feed-forward store at 12 d^2 parameters (mlp and linear width 6 d, glu 4 "
      "d, learned_kv 160 slots), {} steps of batch {} (lr 3e-3) per point, over {} facts. Bits "
      "stored = facts x (log2 objects - cross-entropy in bits), per parameter of the whole "
      "model. At each kind's best point (the plateau, ranked):\n\n{}\n"
      "More training at the best point: `{}` at {} facts with {} steps stores {:.3f} bits per "
      "parameter, against {:.3f} with {}.\n\n![facts](facts_sweep.png)\n",
      c_.quick ? " --quick" : "", subjects, relations, objects, objects, std::log2(objects), steps,
      batch, fmt::join(grid, ", "),
      md_table({"ffn", "parameters", "facts", "accuracy", "bits / param", "of 2 (Allen-Zhu & Li)",
                "of 3.6 (Morris et al.)"},
               rows),
      top->kind, top->facts, 2 * steps, doubled_bpp, top->bits_per_param, steps);
  return out;
}

// ---------------------------------------------------------------------------------------------
// 4. Learned key-values on language

// The last tokens_per_s logged by a run (the trainer logs the mean over the call's steps).
double logged_tokens_per_s(const std::string& metrics_file) {
  std::ifstream in(metrics_file);
  std::string line;
  double last = 0;
  while (std::getline(in, line)) {
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("tokens_per_s")) last = j["tokens_per_s"].get<double>();
  }
  return last;
}

ExperimentResult Experiment::lm() {
  // d = 64, 2 layers: each block's store has 12 d^2 parameters (mlp width 6 d, swiglu 4 d,
  // learned_kv 5 d slots, attention memory slots 6 d key-value pairs)
  const std::vector<FfnVariant> variants = {{"mlp", {"ffn=mlp", "activation=gelu", "ffn_mult=6"}},
                                            {"swiglu", {"ffn=swiglu", "ffn_mult=4"}},
                                            {"learned_kv", {"ffn=learned_kv", "ffn_slots=320"}},
                                            {"attn_mem_kv", {"ffn=none", "attn_mem_kv=384"}}};
  const int64_t seeds = c_.quick ? 1 : 3, steps = this->steps(c_.quick ? 150 : 600);
  json runs = json::array();
  std::vector<std::vector<std::string>> rows;
  std::ostringstream data;  // one row per kind: index bpc_mean bpc_min bpc_max tokens_per_s
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    std::vector<double> bpc, tps;
    int64_t params = 0;
    for (int64_t seed = 0; seed < seeds; ++seed) {
      std::vector<std::string> sets = {"d_model=64",
                                       "n_layers=2",
                                       "n_heads=2",
                                       "seq_len=64",
                                       "batch_size=32",
                                       fmt::format("steps={}", steps),
                                       "warmup_steps=50",
                                       fmt::format("eval_every={}", steps),
                                       fmt::format("checkpoint_every={}", steps),
                                       "log_every=50",
                                       "eval_batches=16",
                                       fmt::format("seed={}", seed)};
      sets.insert(sets.end(), v.sets.begin(), v.sets.end());
      const std::string name = fmt::format("lm-{}/{}-seed{}", steps, v.name, seed);
      const auto tr = train_run("text-tiny", sets, name);
      params = restore(run_dir(name)).model->num_parameters();
      const double b = tr.eval.at("bits_per_char"),
                   t = logged_tokens_per_s(run_dir(name) + "/metrics.jsonl");
      runs.push_back({{"ffn", v.name},
                      {"params", params},
                      {"seed", seed},
                      {"steps", steps},
                      {"val_bits_per_char", b},
                      {"tokens_per_s", t}});
      bpc.push_back(b);
      tps.push_back(t);
    }
    rows.push_back({"`" + v.name + "`", std::to_string(params),
                    seeds > 1 ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", mean(bpc),
                                            *std::min_element(bpc.begin(), bpc.end()),
                                            *std::max_element(bpc.begin(), bpc.end()))
                              : fmt::format("{:.3f}", bpc[0]),
                    fmt::format("{:.0f}", mean(tps))});
    data << i << ' ' << mean(bpc) << ' ' << *std::min_element(bpc.begin(), bpc.end()) << ' '
         << *std::max_element(bpc.begin(), bpc.end()) << ' ' << mean(tps) << " \"" << v.name
         << "\"\n";
  }
  write_file_atomic(path("lm.json"),
                    json{{"config", "text-tiny"}, {"steps", steps}, {"runs", runs}}.dump(2) + "\n");
  render_plot(
      path("lm.png"), data.str(),
      [&](const std::string& f) {
        return fmt::format(
            "set multiplot layout 1,2\nset grid\nset style fill solid 0.5\nset boxwidth 0.6\n"
            "set xrange [-0.6:{3}]\nset key off\n"
            "set title 'validation bits per character (bars: min to max over seeds)'\n"
            "set yrange [0:*]\nplot '{0}' using 1:2:xtic(6) with boxes lc {1}, '{0}' using "
            "1:2:3:4 with yerrorbars pt 0 lc rgb 'black'\n"
            "set title 'training tokens / s'\nplot '{0}' using 1:5:xtic(6) with boxes lc {2}\n"
            "unset multiplot\n",
            f, plot_colour(0), plot_colour(1), variants.size() - 0.4);
      },
      1400, 520);
  ExperimentResult out;
  out.title = "Learned key-values instead of the feed-forward layer, on language";
  out.json = "lm.json";
  out.plot = "lm.png";
  out.markdown = fmt::format(
      "`recall experiment lm{}`: text-tiny's corpus, byte level, a 2-layer d = 64 model "
      "(sequences of 64, batch 32, {} steps, {} seed(s)), each block's store at 12 d^2 "
      "parameters: an MLP (gelu, width 6 d), SwiGLU (width 4 d), learned_kv (320 slots), or no "
      "feed-forward layer and 384 learned key-value pairs in attention (`attn_mem_kv`). "
      "Validation bits per character (mean [min, max] over seeds) and training tokens per "
      "second on this machine.\n\n{}\n![lm](lm.png)\n",
      c_.quick ? " --quick" : "", steps, seeds,
      md_table({"ffn", "parameters", "val bits / char", "tokens / s"}, rows));
  return out;
}

// ---------------------------------------------------------------------------------------------
// 5. Length extrapolation

ExperimentResult Experiment::extrapolation() {
  ReportConfig rc = ReportConfig::make(c_.out_dir, c_.quick);
  rc.mqar_steps = steps(rc.mqar_steps);
  const std::vector<int64_t> lengths = rc.inspect_lengths;
  struct Curve {
    std::string pos;
    BetaRule trained, rule;
    std::vector<double> M, isr, accuracy;
    int64_t runs = 0;
  };
  std::vector<Curve> curves;
  json out_points = json::array();
  for (const std::string pos : {"rope", "none"}) {
    // the rope runs are the report's section 3 runs, reused when the report made them
    ExtrapolateConfig ec;
    ec.train_config = "mqar-tiny";
    ec.sets = {fmt::format("steps={}", rc.mqar_steps)};
    if (pos == "none") ec.sets.push_back("pos=none");
    ec.out_dir = run_dir(pos == "rope" ? fmt::format("mqar-{}", rc.mqar_steps)
                                       : fmt::format("mqar-nopos-{}", rc.mqar_steps));
    ec.seeds = pos == "rope" ? rc.mqar_seeds : std::max<int64_t>(1, rc.mqar_seeds / 2);
    ec.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kSsmax};
    ec.lengths = {1};
    ec.batches = rc.extrapolate_batches;
    ec.progress = c_.progress;
    const auto trained = extrapolate(ec);
    for (const auto& t : trained) {
      if (t.accuracy < 0.9) continue;  // never formed its recall circuit: says nothing of length
      Restored r = restore(t.checkpoint);
      InspectConfig ic;
      ic.lengths = lengths;
      ic.rules = {t.trained};
      if (t.trained == BetaRule::kNone)
        ic.rules = {BetaRule::kNone, BetaRule::kQwen, BetaRule::kYarn};
      ic.batches = rc.extrapolate_batches;
      const InspectResult ir = inspect(r, ic, t.checkpoint);
      for (const auto& a : ir.attention) {
        std::vector<double> isr;
        for (const auto& h : a.heads)
          if (h.recalls()) isr.push_back(h.isr.median);
        out_points.push_back({{"pos", pos},
                              {"checkpoint", fs::relative(t.checkpoint, c_.out_dir).string()},
                              {"trained_rule", to_string(t.trained)},
                              {"rule", to_string(a.rule)},
                              {"M", a.seq_len},
                              {"accuracy", a.accuracy},
                              {"recalling_heads", isr.size()},
                              {"isr_median", isr.empty() ? json(nullptr) : json(mean(isr))}});
        auto c = std::find_if(curves.begin(), curves.end(), [&](const Curve& c) {
          return c.pos == pos && c.trained == t.trained && c.rule == a.rule;
        });
        if (c == curves.end()) {
          curves.push_back({pos, t.trained, a.rule, {}, {}, {}, 0});
          c = curves.end() - 1;
        }
        if (a.seq_len == lengths.front() * r.config.model.seq_len) ++c->runs;
        if (isr.empty()) continue;
        c->M.push_back(static_cast<double>(a.seq_len));
        c->isr.push_back(mean(isr));
        c->accuracy.push_back(a.accuracy);
      }
    }
  }
  // the probe's softmax ISR under each rule at the heads' dimension, L = mqar-tiny's length
  const TrainConfig base = train_config_from_file("mqar-tiny", {});
  ProbeConfig pc;
  pc.stores = {"softmax"};
  pc.d_k = pc.d_v = base.model.head_dim();
  pc.beta = std::sqrt(static_cast<double>(pc.d_k));  // the standard scale on unit keys
  pc.ref_len = static_cast<double>(base.model.seq_len);
  pc.rule_m_max = base.model.seq_len * lengths.back();
  pc.m = {base.model.seq_len};
  pc.trials = c_.quick ? 1 : 4;
  pc.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  const auto probe = run_probe(pc);
  std::map<BetaRule, double> probe_slope;
  json probe_curves = json::array();
  for (const auto& rr : probe.rules) {
    std::vector<double> x, y;
    json pts = json::array();
    for (const auto& p : rr.curve) {
      x.push_back(std::log(static_cast<double>(p.M) - 1));
      y.push_back(std::log(std::max(p.isr.median, 1e-300)));
      pts.push_back({{"M", p.M}, {"beta", p.beta}, {"isr_median", p.isr.median}});
    }
    if (x.size() >= 2) probe_slope[rr.rule] = fitted_slope(x, y);
    probe_curves.push_back({{"rule", to_string(rr.rule)}, {"curve", pts}});
  }
  // fit ISR = c (M - 1)^b per curve (the essay: ISR^2 = (M - 1) E[w^2] / w(1)^2, so b = 1/2 at a
  // fixed beta, less when beta grows with M)
  json fits = json::array();
  std::vector<std::vector<std::string>> rows;
  std::ostringstream data;
  for (const auto& c : curves) {
    std::optional<double> b, lnc;
    if (c.M.size() >= 2) {
      std::vector<double> x, y;
      for (size_t i = 0; i < c.M.size(); ++i)
        x.push_back(std::log(c.M[i] - 1)), y.push_back(std::log(c.isr[i]));
      b = fitted_slope(x, y);
      lnc = mean(y) - *b * mean(x);
    }
    json probe_b = nullptr;
    std::string probe_b_text = "—";
    if (const auto it = probe_slope.find(c.rule); it != probe_slope.end()) {
      probe_b = it->second;
      probe_b_text = fmt::format("{:.3f}", it->second);
    }
    fits.push_back({{"pos", c.pos},
                    {"trained_rule", to_string(c.trained)},
                    {"rule", to_string(c.rule)},
                    {"runs", c.runs},
                    {"form", "ISR = c (M - 1)^b"},
                    {"b", b ? json(*b) : json(nullptr)},
                    {"c", lnc ? json(std::exp(*lnc)) : json(nullptr)},
                    {"probe_b", probe_b}});
    std::string isr_cells;
    for (size_t i = 0; i < c.M.size(); ++i)
      isr_cells += fmt::format("{}{:.0f}: {:.3g}", i ? ", " : "", c.M[i], c.isr[i]);
    rows.push_back({c.pos, "`" + to_string(c.trained) + "`", "`" + to_string(c.rule) + "`",
                    std::to_string(c.runs), isr_cells.empty() ? "—" : isr_cells,
                    opt_num(b, "{:.3f}"), probe_b_text});
    for (size_t i = 0; i < c.M.size(); ++i) data << c.M[i] << ' ' << c.isr[i] << '\n';
    data << "\n\n";
  }
  const size_t n_curves = curves.size();
  for (const auto& rr : probe.rules) {
    for (const auto& p : rr.curve) data << p.M << ' ' << p.isr.median << '\n';
    data << "\n\n";
  }
  write_file_atomic(
      path("extrapolation.json"),
      json{{"points", out_points},
           {"fits", fits},
           {"probe",
            {{"d_k", pc.d_k}, {"beta", pc.beta}, {"ref_len", pc.ref_len}, {"rules", probe_curves}}}}
              .dump(2) +
          "\n");
  render_plot(
      path("extrapolation.png"), data.str(),
      [&](const std::string& f) {
        std::string gp =
            "set multiplot layout 1,2\nset grid\nset logscale xy 2\nset xlabel 'context length "
            "M'\nset ylabel 'median ISR of the recalling heads'\nset key outside bottom\n"
            "set title 'trained heads (solid: rope, dashed: pos none)'\nplot ";
        bool any = false;
        for (size_t i = 0; i < n_curves; ++i) {
          if (curves[i].M.empty()) continue;
          gp += fmt::format(
              "{}'{}' index {} using 1:2 with linespoints pt 7 {} lc {} title '{} {}{}'",
              any ? ", " : "", f, i, curves[i].pos == "rope" ? "dt 1" : "dt 2",
              plot_colour(static_cast<size_t>(curves[i].rule)), curves[i].pos,
              to_string(curves[i].rule),
              curves[i].rule != curves[i].trained ? " (trained none)" : "");
          any = true;
        }
        gp += any ? "\n" : "1 notitle\n";
        gp += "set title 'the probe: softmax store, same d_k, beta = sqrt(d_k)'\nplot ";
        for (size_t i = 0; i < probe.rules.size(); ++i)
          gp +=
              fmt::format("'{}' index {} using 1:2 with linespoints pt 7 lc {} title '{}'{}", f,
                          n_curves + i, plot_colour(static_cast<size_t>(probe.rules[i].rule)),
                          to_string(probe.rules[i].rule), i + 1 < probe.rules.size() ? ", " : "\n");
        return gp + "unset multiplot\n";
      },
      1600, 600);
  ExperimentResult out;
  out.title = "Length extrapolation with beta separated from positions";
  out.json = "extrapolation.json";
  out.plot = "extrapolation.png";
  out.markdown = fmt::format(
      "`recall experiment extrapolation{}`: mqar-tiny ({} steps) trained with `pos = rope` "
      "({} seed(s)) and `pos = none` ({} seed(s)) under rules none, su and ssmax (the none runs "
      "also evaluated under qwen and yarn); runs that reach 0.9 at their training length are "
      "inspected at {} x the length. ISR: the mean over the recalling heads of their median "
      "ISR at M tokens of context; b is the fitted exponent of ISR = c (M - 1)^b (the essay: "
      "1/2 at a fixed beta, lower when beta grows with ln M), beside the probe's softmax store "
      "at d_k = {} and beta = sqrt(d_k) under the same rule.\n\n{}\n"
      "![extrapolation](extrapolation.png)\n",
      c_.quick ? " --quick" : "", rc.mqar_steps, rc.mqar_seeds,
      std::max<int64_t>(1, rc.mqar_seeds / 2), fmt::join(lengths, ", "), pc.d_k,
      md_table({"pos", "trained", "evaluated", "runs", "ISR by M", "fitted b", "probe b"}, rows));
  return out;
}

}  // namespace

ExperimentResult run_experiment(const ExperimentConfig& config) {
  config.validate();
  make_output_dir("--out", config.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  Experiment e(config);
  ExperimentResult r;
  if (config.name == "sharpness")
    r = e.sharpness();
  else if (config.name == "scaling")
    r = e.scaling();
  else if (config.name == "facts")
    r = e.facts();
  else if (config.name == "lm")
    r = e.lm();
  else
    r = e.extrapolation();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace recall
