#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "output.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/blas.h"
#include "recall/core/busy.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/core/plot.h"
#include "recall/core/spawn.h"
#include "recall/train/bench_train.h"
#include "recall/train/train_config.h"

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

// Adds the probe's flags to `cmd`, bound to `c`.
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
  cmd->add_option("--seed", c.seed, "random seed")->capture_default_str();
  cmd->add_option("--beta", c.beta, "sharpness of exp<n> and softmax; beta_0 of the rules")
      ->capture_default_str();
  cmd->add_option("--m", c.m, "explicit M grid, comma-separated (default: powers of 2 from 16)")
      ->delimiter(',');
  cmd->add_option("--m-max", c.m_max, "largest M of the automatic grid")->capture_default_str();
  cmd->add_option("--margin", c.margin, "automatic grid: stop once the theory ISR reaches this")
      ->capture_default_str();
  cmd->add_option("--rules", rules,
                  "sharpness rules for the long-context curves (none,su,qwen,yarn,ssmax)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--no-rules", no_rules, "skip the long-context curves");
  cmd->add_option("--ref-len", c.ref_len, "reference length L of the rules")->capture_default_str();
  cmd->add_option("--rule-m-max", c.rule_m_max, "rules: largest M (M = L, 2L, ...)")
      ->capture_default_str();
  cmd->add_option("--rule-queries", c.rule_queries, "rules: stored keys queried per trial")
      ->capture_default_str();
  cmd->add_option("--chunk", c.chunk, "memories per streamed chunk (memory/speed only)")
      ->capture_default_str();
  add_device_option(cmd, device);
}

void resolve_rules(ProbeConfig& c, const std::vector<std::string>& rules, bool no_rules,
                   const std::string& device) {
  c.device = parse_device(device);
  c.rules.clear();
  if (!no_rules)
    for (const auto& r : rules) c.rules.push_back(beta_rule_from_string(r));
  c.validate();
}

// The bench's JSON line: recall's probe beside the GEMM rate timed just before it.
nlohmann::json bench_probe_json(const ProbeConfig& config, const ProbeResult& r, double gemm) {
  return {{"bench", "probe"},
          {"device", config.device.str()},
          {"threads", torch::get_num_threads()},
          {"seconds", r.seconds},
          {"probe_gflops", r.flops / r.seconds / 1e9},
          // the probe's products and the GEMM timed beside them are torch::mm
          {"gemm", config.device.is_cpu() ? fmt::format("torch::mm (OpenBLAS {})", blas_core_name())
                                          : "torch::mm (" + config.device.str() + ")"},
          {"gemm_gflops", gemm},
          {"peak_rss_mib", peak_rss_mib()},
          // thread-seconds, summed over threads
          {"profile_s",
           {{"generate", r.profile.generate},
            {"similarity", r.profile.similarity},
            {"weights", r.profile.weights},
            {"accumulate", r.profile.accumulate},
            {"snapshots", r.profile.snapshots},
            {"direct", r.profile.direct}}}};
}

// The PyTorch peer on the same plan: it reads recall's JSON for its plan, measures it again and
// prints one JSON line, whose seconds join `j`.
void add_peer(nlohmann::json& j, const std::string& peer_script, const ProbeResult& r) {
  const auto plan = std::filesystem::temp_directory_path() /
                    fmt::format("recall_bench_probe_{}.json", ::getpid());
  std::ofstream(plan) << probe_json(r);
  const char* env = std::getenv("RECALL_PYTHON");
  const std::vector<std::string> argv = {
      env ? env : "/usr/bin/python3",           peer_script, "--threads",
      std::to_string(torch::get_num_threads()), "--plan",    plan.string()};
  std::string out;
  try {
    if (run_capture(argv, out) != 0) out.clear();
  } catch (const std::runtime_error&) {
    out.clear();
  }
  std::filesystem::remove(plan);
  const auto peer = nlohmann::json::parse(out, nullptr, false);
  if (peer.is_discarded() || !peer.contains("seconds")) {
    fmt::print(stderr, "note: the peer did not run ({})\n", fmt::join(argv, " "));
  } else {
    j["peer_seconds"] = peer["seconds"];
    j["peer_torch"] = peer["torch"];
  }
}

// The same probe beside `busy` spinning neighbours, and training (bench-gpt) idle and beside the
// same, back to back; the slowdowns join `j`.
void add_busy(nlohmann::json& j, const ProbeConfig& config, const ProbeResult& r, int busy,
              int64_t busy_train_steps) {
  const int64_t steps = busy_train_steps > 0 ? busy_train_steps + 2 : 0;
  TrainConfig train = train_config_from_file("bench-gpt");
  double idle_tps = 0;
  if (steps > 0) idle_tps = bench_train(train, steps, config.device).tokens_per_s;
  BusyNeighbours neighbours(busy);
  const double busy_s = run_probe(config).seconds;
  j["busy_neighbours"] = busy;
  j["busy_seconds"] = busy_s;
  j["busy_slowdown"] = busy_s / r.seconds;
  if (steps > 0) {
    const double busy_tps = bench_train(train, steps, config.device).tokens_per_s;
    j["train_tokens_per_s"] = idle_tps;
    j["busy_train_tokens_per_s"] = busy_tps;
    j["busy_train_slowdown"] = idle_tps / busy_tps;
  }
}

}  // namespace

void add_probe(CLI::App& root, Action& action) {
  struct Opts {
    ProbeConfig config;
    std::vector<std::string> rules = {"none", "su", "qwen", "yarn"};
    bool no_rules = false;
    std::string json, csv, plot, device = "cpu";
    int64_t max_memory = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      root.add_subcommand("probe", "measure every store's ISR against M beside exact theory");
  add_probe_flags(cmd, o->config, o->rules, o->no_rules, o->device);
  cmd->add_option("--json", o->json, "write every number as JSON to this file (- : stdout)");
  cmd->add_option("--csv", o->csv, "write every curve point as CSV to this file (- : stdout)");
  cmd->add_option("--plot", o->plot, "write a log-log plot to this file (.png or .svg)");
  add_max_memory(cmd, o->max_memory);
  cmd->callback([o, &action] {
    resolve_rules(o->config, o->rules, o->no_rules, o->device);
    check_output("--json", o->json);
    check_output("--csv", o->csv);
    if (!o->plot.empty()) check_plot_path("--plot", o->plot);
    action = [o] {
      std::string parts;
      const double bytes = estimate_probe_memory(o->config, &parts);
      check_memory("probe", bytes, parts, o->max_memory);
      Progress progress("probe");
      ProgressFn fn;
      if (!quiet()) fn = [&progress](double d, double t) { progress(d, t); };
      const ProbeResult r = run_probe(o->config, fn);
      // the table, unless the data itself goes to stdout
      if (!is_stdout(o->json) && !is_stdout(o->csv)) std::fputs(probe_table(r).c_str(), stdout);
      write_output(o->json, probe_json(r));
      write_output(o->csv, probe_csv(r));
      if (!o->plot.empty()) write_probe_plot(r, o->plot);
      return 0;
    };
  });
}

void add_bench(CLI::App& root, Action& action) {
  auto* bench =
      root.add_subcommand("bench", "benchmarks: throughput beside the measured GEMM rate");
  bench->require_subcommand(1);
  struct Opts {
    ProbeConfig config;
    std::vector<std::string> rules = {"none", "su", "qwen", "yarn"};
    bool no_rules = false;
    std::string device = "cpu";
    int busy = 0;
    int64_t busy_train_steps = 10;
    std::string peer;
  };
  auto o = std::make_shared<Opts>();
  auto* probe =
      bench->add_subcommand("probe", "time the default probe: GFLOP/s beside GEMM GFLOP/s");
  add_probe_flags(probe, o->config, o->rules, o->no_rules, o->device);
  probe->add_option("--peer", o->peer,
                    "also run this PyTorch peer (scripts/peer_probe.py) on the same plan with "
                    "$RECALL_PYTHON or /usr/bin/python3, and print its seconds beside recall's");
  probe
      ->add_option("--busy", o->busy,
                   "then run it again beside N processes that spin on the CPU, and training "
                   "(bench-gpt) both ways; print the slowdowns")
      ->check(CLI::Range(0, 1024));
  probe
      ->add_option("--busy-train-steps", o->busy_train_steps,
                   "with --busy: timed training steps each way (0: skip training)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  probe->callback([o, &action] {
    resolve_rules(o->config, o->rules, o->no_rules, o->device);
    if (!o->peer.empty() && !std::filesystem::is_regular_file(o->peer))
      throw UsageError(fmt::format("--peer {}: no such file (scripts/peer_probe.py)", o->peer));
    action = [o] {
      const double gemm = measure_gemm_gflops(10, 3, o->config.device);
      const ProbeResult r = run_probe(o->config);
      nlohmann::json j = bench_probe_json(o->config, r, gemm);
      if (!o->peer.empty()) add_peer(j, o->peer, r);
      if (o->busy > 0) add_busy(j, o->config, r, o->busy, o->busy_train_steps);
      std::printf("%s\n", j.dump().c_str());
      return 0;
    };
  });
  add_bench_train(*bench, action);
  add_bench_eval(*bench, action);
}

}  // namespace recall::cli
