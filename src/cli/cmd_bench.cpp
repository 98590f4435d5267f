// `recall bench`: the benchmarks, each one JSON line beside the GEMM rate measured in the same
// process. `bench probe` is here; `bench train` and `bench eval` have their own files.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/core/spawn.h"
#include "recall/experiments/bench_train.h"
#include "recall/experiments/busy.h"
#include "recall/ops/blas.h"
#include "recall/train/train_config.h"

namespace recall::cli {

namespace {

// The bench's JSON line: recall's probe beside the GEMM rate timed just before it.
nlohmann::json bench_probe_json(const ProbeConfig& config, const ProbeResult& r, double gemm) {
  return {{"bench", "probe"},
          {"device", config.device.str()},
          {"threads", torch::get_num_threads()},
          {"seconds", r.seconds},
          {"probe_gflops", r.flops / r.seconds / 1e9},
          // the GEMM rate is LibTorch's own product's, on its BLAS
          {"gemm", config.device.is_cpu() ? fmt::format("torch::mm ({})", torch_blas_name())
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
            {"waits", r.profile.waits},
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

// The slowdowns of the probe (and training) beside `busy` spinning neighbours (run_busy_rounds),
// the first round's idle probe being `r`: each round's and their medians join `j`.
void add_busy(nlohmann::json& j, const ProbePlan& plan, const ProbeResult& r, int busy,
              int64_t busy_train_steps, int rounds) {
  const BusyRounds b = run_busy_rounds(plan, r.seconds, busy, busy_train_steps, rounds);
  j["busy_neighbours"] = busy;
  j["busy_rounds"] = rounds;
  j["busy_seconds"] = summarize(b.busy_seconds).median;
  // the medians over the rounds, and each round's slowdowns beside them
  j["busy_slowdown"] = summarize(b.slowdowns).median;
  j["busy_slowdowns"] = b.slowdowns;
  if (busy_train_steps > 0) {
    j["train_tokens_per_s"] = summarize(b.idle_tokens_per_s).median;
    j["busy_train_tokens_per_s"] = summarize(b.busy_tokens_per_s).median;
    j["busy_train_slowdown"] = summarize(b.train_slowdowns).median;
    j["busy_train_slowdowns"] = b.train_slowdowns;
  }
}

}  // namespace

void add_bench(CLI::App& root, Action& action) {
  auto* bench =
      root.add_subcommand("bench", "benchmarks: throughput beside the measured GEMM rate");
  bench->require_subcommand(1);
  struct Opts {
    ProbeConfig config;
    std::vector<std::string> rules = rule_names(/*learned=*/false);
    bool no_rules = false;
    std::string device = "cpu";
    int busy = 0;
    int64_t busy_train_steps = 10;
    int busy_rounds = 3;
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
  probe
      ->add_option("--busy-rounds", o->busy_rounds,
                   "with --busy: rounds of idle then busy runs; the slowdowns are their medians")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  probe->callback([o, &action] {
    resolve_rules(o->config, o->rules, o->no_rules, o->device);
    if (!o->peer.empty() && !std::filesystem::is_regular_file(o->peer))
      throw UsageError(fmt::format("--peer {}: no such file (scripts/peer_probe.py)", o->peer));
    action = [o] {
      const double gemm = measure_gemm_gflops(10, 3, o->config.device);
      const ProbePlan plan = plan_probe(o->config);
      const ProbeResult r = run_probe(plan);
      nlohmann::json j = bench_probe_json(o->config, r, gemm);
      if (!o->peer.empty()) add_peer(j, o->peer, r);
      if (o->busy > 0) add_busy(j, plan, r, o->busy, o->busy_train_steps, o->busy_rounds);
      std::printf("%s\n", j.dump().c_str());
      return 0;
    };
  });
  add_bench_train(*bench, action);
  add_bench_eval(*bench, action);
}

}  // namespace recall::cli
