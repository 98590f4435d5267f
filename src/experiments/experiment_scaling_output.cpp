// `recall experiment` scaling's files: scaling.json, scaling.png and the section (the fitted
// slopes of ln C beside the essay's, and the per-M ISR beside the closed forms).
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "experiment_scaling.h"
#include "recall/core/error.h"
#include "recall/formats/plot.h"

namespace recall::experiment_detail {

using nlohmann::json;

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

namespace {

// The fitted slopes, as JSON and table rows.
struct Fits {
  json fits = json::array();
  std::vector<std::vector<std::string>> rows;
};

// One fit per (store family, variable): x and ln C from theory, and from the probe where run.
void fit_family(const std::vector<CapacityPoint>& pts, const std::string& family,
                const std::string& variable, bool log_x, double essay,
                const std::string& essay_text,
                const std::function<bool(const CapacityPoint&)>& pick, Fits& out) {
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
  out.fits.push_back({{"store", family},
                      {"variable", variable},
                      {"slope", slope},
                      {"essay", essay},
                      {"essay_form", essay_text},
                      {"measured", json_or_null(measured)},
                      {"fit", log_x ? "ln C against ln x" : "ln C against x"}});
  out.rows.push_back({"`" + family + "`", variable, essay_text, fmt::format("{:.3f}", essay),
                      fmt::format("{:.3f}", slope), opt_num(measured, "{:.3f}")});
}

// softmax: ln(C - 1) = a beta + b beta^2, the essay's a = 2, b = -2 / d.
void fit_softmax(const std::vector<CapacityPoint>& pts, Fits& out) {
  std::vector<double> xt, yt, xp, yp;
  for (const auto& p : pts)
    if (p.store == "softmax") {
      if (p.theory) xt.push_back(p.value), yt.push_back(std::log(*p.theory - 1));
      if (p.probe) xp.push_back(p.value), yp.push_back(std::log(*p.probe - 1));
    }
  const auto [a, b] = fit_linear_quadratic(xt, yt);
  std::optional<std::pair<double, double>> m;
  if (xp.size() >= 2) m = fit_linear_quadratic(xp, yp);
  out.fits.push_back({{"store", "softmax"},
                      {"variable", "beta"},
                      {"form", "ln(C - 1) = a beta + b beta^2"},
                      {"slope", {{"a", a}, {"b", b}}},
                      {"essay", {{"a", 2.0}, {"b", -2.0 / 64}}},
                      {"essay_form", "1 + exp(2 beta - 2 beta^2 / d), d = 64"},
                      {"measured", m ? json{{"a", m->first}, {"b", m->second}} : json(nullptr)}});
  out.rows.push_back(
      {"`softmax`", "beta", "1 + exp(2 beta - 2 beta^2 / d): a = 2, b = -2/d",
       fmt::format("a = 2, b = {:.4f}", -2.0 / 64), fmt::format("a = {:.3f}, b = {:.4f}", a, b),
       m ? fmt::format("a = {:.3f}, b = {:.4f} (beta <= {:.0f})", m->first, m->second, xp.back())
         : "—"});
}

Fits fit_capacities(const std::vector<CapacityPoint>& pts) {
  Fits out;
  fit_family(
      pts, "outer_product", "d_k", true, 1.0, "d + 1: slope 1",
      [](const CapacityPoint& p) { return p.store == "outer_product"; }, out);
  fit_family(
      pts, "relu", "d_k", true, 1.0, "2d + 1: slope 1",
      [](const CapacityPoint& p) { return p.store == "relu"; }, out);
  fit_family(
      pts, "relu2", "d_k", true, 2.0, "d^2 / 1.5: slope 2",
      [](const CapacityPoint& p) { return p.store == "relu2"; }, out);
  fit_family(
      pts, "relu^p", "p", false, std::log(32.0), "~ d^p: ln C rises ln d = 3.47 per power (d = 32)",
      [](const CapacityPoint&) { return true; }, out);
  fit_family(
      pts, "exp^n", "n", false, std::log(3100.0 / 40.0) / 2,
      "exp2 ~40, exp4 ~3,100 (d = 64, beta = 8): ln C rises 2.17 per term",
      [](const CapacityPoint&) { return true; }, out);
  fit_softmax(pts, out);
  return out;
}

// The per-M ISR of outer product and least squares against their closed forms, as JSON and
// table rows.
std::pair<json, std::vector<std::vector<std::string>>> isr_table(const ProbeConfig& probing,
                                                                 const ProbeResult& isr) {
  json table = json::array();
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < probing.m.size(); ++i) {
    const double M = static_cast<double>(probing.m[i]), d = static_cast<double>(probing.d_k);
    const double outer = std::sqrt((M - 1) / d), ls = M <= d ? 0.0 : std::sqrt(M / d - 1);
    const double outer_probe = isr.stores[0].curve[i].isr.rms,
                 ls_probe = isr.stores[1].curve[i].isr.rms;
    table.push_back({{"M", probing.m[i]},
                     {"outer_product_closed_form", outer},
                     {"outer_product_probe", outer_probe},
                     {"least_squares_closed_form", ls},
                     {"least_squares_probe", ls_probe}});
    rows.push_back({std::to_string(probing.m[i]), fmt::format("{:.4g}", outer),
                    fmt::format("{:.4g}", outer_probe), fmt::format("{:.4g}", ls),
                    fmt::format("{:.4g}", ls_probe)});
  }
  return {table, rows};
}

// gnuplot data blocks (x theory probe): 0-2 the d_k stores, 3 relu^p, 4 exp^n, 5 softmax.
std::string scaling_plot_data(const std::vector<CapacityPoint>& pts) {
  std::ostringstream data;
  const std::vector<std::pair<std::string, std::string>> blocks = {
      {"outer_product", "d_k"}, {"relu", "d_k"}, {"relu2", "d_k"}, {"", "p"}, {"", "n"},
      {"softmax", "beta"}};
  for (const auto& [store, variable] : blocks) {
    for (const auto& p : pts)
      if (p.variable == variable && (store.empty() || p.store == store))
        data << p.value << ' ' << p.theory.value_or(NAN) << ' ' << p.probe.value_or(NAN) << '\n';
    data << "\n\n";
  }
  return data.str();
}

std::string scaling_plot_script(const std::string& f) {
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
}

}  // namespace

ExperimentResult write_scaling(const Experiment& experiment, const ScalingFound& found) {
  const std::vector<CapacityPoint>& pts = found.points;
  const Fits fits = fit_capacities(pts);
  const auto [table, isr_rows] = isr_table(found.isr_probing, found.isr);
  json points = json::array();
  for (const auto& p : pts)
    points.push_back({{"store", p.store},
                      {"variable", p.variable},
                      {"value", p.value},
                      {"d_k", p.d},
                      {"beta", p.beta},
                      {"theory", json_or_null(p.theory)},
                      {"probe_rms", json_or_null(p.probe)}});
  render_plot(experiment.path("scaling.png"), scaling_plot_data(pts), scaling_plot_script, 1800,
              480);
  experiment.write_json("scaling.json", {{"trials", found.trials},
                                         {"queries", found.queries},
                                         {"fits", fits.fits},
                                         {"points", points},
                                         {"isr_table", table}});
  const std::string markdown = fmt::format(
      "`recall experiment scaling{}`: the capacity (where E[ISR^2] = 1) from theory (keys "
      "uniform on the sphere) and from the probe (RMS crossing, {} trial(s) of {} queries; "
      "probed where theory is at most {:.0f}) against d_k (16 to {}), the relu power p, the "
      "number of exp terms n and the softmax beta. Slopes are least-squares fits of ln C.\n\n{}\n"
      "Per-M RMS ISR of the outer-product and least-squares stores at d_k = 64: the closed forms "
      "sqrt((M - 1) / d) and sqrt(M / d - 1) (0 up to d) beside the probe.\n\n{}\n"
      "![scaling](scaling.png)\n",
      experiment.config().quick ? " --quick" : "", found.trials, found.queries, found.probe_limit,
      found.dims.back(),
      markdown_table(
          {"store", "variable", "essay's form", "essay slope", "theory slope", "probe slope"},
          fits.rows),
      markdown_table({"M", "outer product (closed form)", "outer product (probe)",
                      "least squares (closed form)", "least squares (probe)"},
                     isr_rows));
  return {"Capacity scaling laws", "scaling.json", "scaling.png", markdown};
}

}  // namespace recall::experiment_detail
