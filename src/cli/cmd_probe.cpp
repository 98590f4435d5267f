// `recall probe`: the capacity probe of every store, with its flags (shared with bench probe).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/formats/plot.h"

namespace recall::cli {

namespace {

// Progress on stderr, at most once a second, and only once the work has run for a second.
class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), tty_(::isatty(2)) {}
  void operator()(double done, double total) {
    const double t = seconds();
    if (t < 1.0 || t - last_ < (tty_ ? 1.0 : 10.0)) return;
    last_ = t;
    const double f = total > 0 ? done / total : 1.0;
    const double eta = f > 0 ? t * (1 - f) / f : 0;
    std::fprintf(stderr, "%s%s: %3.0f%%  %5.1f s  ETA %4.0f s%s", tty_ ? "\r" : "", label_.c_str(),
                 100 * f, t, eta, tty_ ? "" : "\n");
    shown_ = true;
  }
  ~Progress() {
    if (shown_ && tty_) std::fputc('\n', stderr);
  }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::string label_;
  bool tty_, shown_ = false;
  double last_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void add_probe_flags(CLI::App* cmd, ProbeConfig& c, std::vector<std::string>& rules, bool& no_rules,
                     std::string& device) {
  cmd->add_option(
         "--stores", c.stores,
         "stores to probe, comma-separated (default: outer_product,least_squares,relu,relu2,"
         "relu3,swiglu,exp2,exp3,exp4,softmax; also linear, relu<p>, exp<n>, delta)")
      ->delimiter(',');
  cmd->add_option("--dk", c.d_k, "key dimension")->capture_default_str();
  cmd->add_option("--dv", c.d_v, "value dimension")->capture_default_str();
  cmd->add_option("--queries", c.queries, "stored keys queried per trial")->capture_default_str();
  cmd->add_option("--trials", c.trials, "independent trials")->capture_default_str();
  cmd->add_option("--seed", c.seed, "random seed")
      ->capture_default_str()
      ->check(non_negative());  // an unsigned option takes -1 as 2^64 - 1
  cmd->add_option("--beta", c.beta, "sharpness of exp<n> and softmax; beta_0 of the rules")
      ->capture_default_str();
  cmd->add_option("--m", c.m, "explicit M grid, comma-separated (default: powers of 2 from 16)")
      ->delimiter(',');
  cmd->add_option("--m-max", c.m_max, "largest M of the automatic grid")->capture_default_str();
  cmd->add_option("--margin", c.margin, "automatic grid: stop once the theory ISR reaches this")
      ->capture_default_str();
  cmd->add_option("--rules", rules,
                  "sharpness rules for the long-context curves: " + beta_rule_names())
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--no-rules", no_rules, "skip the long-context curves");
  cmd->add_option("--ref-len", c.ref_len, "reference length L of the rules")->capture_default_str();
  cmd->add_option("--rule-m-max", c.rule_m_max, "rules: largest M (M = L, 2L, ...)")
      ->capture_default_str();
  cmd->add_option("--rule-queries", c.rule_queries, "rules: stored keys queried per trial")
      ->capture_default_str();
  cmd->add_option(
         "--chunk", c.chunk,
         "memories per streamed chunk on CUDA or with RECALL_KERNELS=reference (memory/speed only)")
      ->capture_default_str();
  add_device_option(cmd, device);
}

void resolve_rules(ProbeConfig& c, const std::vector<std::string>& rules, bool no_rules,
                   const std::string& device) {
  c.device = parse_device(device);
  c.rules.clear();
  if (!no_rules) c.rules = parse_rules("--rules", rules);
  c.validate();
}

void add_probe(CLI::App& root, Action& action) {
  struct Opts {
    ProbeConfig config;
    std::vector<std::string> rules = rule_names(/*learned=*/false);
    bool no_rules = false;
    std::string json, csv, plot, device = "cpu";
    int64_t max_ram = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      root.add_subcommand("probe", "measure every store's ISR against M beside exact theory");
  add_probe_flags(cmd, o->config, o->rules, o->no_rules, o->device);
  cmd->add_option("--json", o->json, "write every number as JSON to this file (- : stdout)");
  cmd->add_option("--csv", o->csv, "write every curve point as CSV to this file (- : stdout)");
  cmd->add_option("--plot", o->plot, "write a log-log plot to this file (.png or .svg)");
  add_max_ram(cmd, o->max_ram);
  cmd->callback([o, &action] {
    resolve_rules(o->config, o->rules, o->no_rules, o->device);
    check_output("--json", o->json);
    check_output("--csv", o->csv);
    if (!o->plot.empty()) check_plot_path("--plot", o->plot);
    action = [o] {
      std::string parts;
      const ProbePlan plan = plan_probe(o->config);
      const double bytes = estimate_probe_ram(plan, &parts);
      check_ram("probe", bytes, parts, o->max_ram);
      Progress progress("probe");
      ProgressFn fn;
      if (!quiet()) fn = [&progress](double d, double t) { progress(d, t); };
      const ProbeResult r = run_probe(plan, fn);
      // the table, unless the data itself goes to stdout
      if (!is_stdout(o->json) && !is_stdout(o->csv)) std::fputs(probe_table(r).c_str(), stdout);
      write_output(o->json, probe_json(r));
      write_output(o->csv, probe_csv(r));
      if (!o->plot.empty()) write_probe_plot(r, o->plot);
      return 0;
    };
  });
}

}  // namespace recall::cli
