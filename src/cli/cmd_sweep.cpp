// recall sweep: one training run per point of a grid of config values (and seeds), each a
// `recall train` of its own in OUT/<point>, up to --jobs at a time. Rerunning the same command
// resumes: finished runs are kept, interrupted ones continue from their checkpoint (train
// --resume), the rest start. SIGINT/SIGTERM reach every running run, which checkpoints and stops
// (a second ends the runs at once; Ctrl-Z and fg reach them too); the sweep then exits with 128 +
// the signal. OUT/summary.csv and OUT/summary.json hold, per run, the point's keys, its status,
// final training loss, last evaluation and tokens/s.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "commands.h"
#include "output.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/signals.h"
#include "recall/train/checkpoint.h"
#include "recall/train/metrics.h"
#include "recall/train/train_config.h"

extern char** environ;

namespace recall::cli {
namespace fs = std::filesystem;

namespace {

using Axis = std::pair<std::string, std::vector<std::string>>;  // key, values

Axis parse_grid(const std::string& arg) {
  const auto eq = arg.find('=');
  Axis axis;
  if (eq != std::string::npos && eq > 0) {
    axis.first = arg.substr(0, eq);
    std::string rest = arg.substr(eq + 1) + ",";
    for (size_t from = 0, comma; (comma = rest.find(',', from)) != std::string::npos;
         from = comma + 1)
      axis.second.push_back(rest.substr(from, comma - from));
  }
  bool ok = !axis.first.empty() && !axis.second.empty();
  for (const auto& v : axis.second) ok = ok && !v.empty();
  if (!ok) throw UsageError(fmt::format("--grid {}: expected key=value1,value2,...", arg));
  return axis;
}

struct Point {
  std::string name;                                       // the run folder's name
  std::vector<std::pair<std::string, std::string>> keys;  // key, value (as --set takes it)
  int64_t steps = 0;
};

// The folder name of a point: key=value joined by '+', other characters than [A-Za-z0-9._=-]
// replaced by '_'.
std::string point_name(const std::vector<std::pair<std::string, std::string>>& keys) {
  std::string name;
  for (const auto& [k, v] : keys) {
    if (!name.empty()) name += '+';
    for (char c : k + "=" + v)
      name +=
          std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '=' || c == '-' ? c : '_';
  }
  return name.empty() ? "run" : name;
}

// Every combination of the axes' values, the first axis outermost.
std::vector<Point> expand(const std::vector<Axis>& axes) {
  std::vector<Point> points(1);
  for (const auto& [key, values] : axes) {
    std::vector<Point> next;
    for (const auto& p : points)
      for (const auto& v : values) {
        Point q = p;
        q.keys.emplace_back(key, v);
        next.push_back(q);
      }
    points = next;
  }
  std::map<std::string, const Point*> seen;
  for (auto& p : points) {
    p.name = point_name(p.keys);
    // two points in one folder would resume each other's run
    if (!seen.emplace(p.name, &p).second)
      throw UsageError(
          fmt::format("--grid: the point {} is given twice (a repeated value?)", p.name));
  }
  return points;
}

// What a run folder's metrics log says: the last training record and the last evaluation.
struct RunState {
  std::string status = "pending";      // pending, interrupted, finished, failed
  std::optional<MetricsRecord> train;  // loss, lr, tokens_per_s, ...
  std::optional<MetricsRecord> eval;   // the evaluation's loss, accuracy, ...
};

RunState read_state(const fs::path& dir, int64_t steps) {
  RunState s;
  for (auto& r : read_metrics(dir.string())) (r.eval ? s.eval : s.train) = std::move(r);
  const bool ckpt = fs::exists(checkpoint_path(dir.string()));
  if (ckpt && s.eval && s.eval->step == steps)
    s.status = "finished";
  else if (ckpt)
    s.status = "interrupted";
  return s;
}

// A metric as JSON: null when the record or the value is missing.
nlohmann::json metric(const std::optional<MetricsRecord>& r, const std::string& key) {
  const auto v = r ? r->get(key) : std::nullopt;
  return v ? nlohmann::json(*v) : nlohmann::json();
}

// A grid value as JSON: a number or a boolean where the TOML literal is one, else the string.
nlohmann::json value_json(const std::string& v) {
  auto j = nlohmann::json::parse(v, nullptr, false);
  return !j.is_discarded() && (j.is_number() || j.is_boolean()) ? j : nlohmann::json(v);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(const nlohmann::json& j) {
  return j.is_number() ? fmt::format("{:.6g}", j.get<double>()) : "";
}

// summary.json and summary.csv of every point's current state; returns the CSV.
std::string write_summary(const fs::path& out, const std::vector<Axis>& axes,
                          const std::vector<Point>& points, const std::vector<RunState>& states) {
  std::set<std::string> eval_keys;
  for (const auto& s : states)
    if (s.eval)
      for (const auto& [k, v] : s.eval->values) eval_keys.insert(k);
  nlohmann::json runs = nlohmann::json::array();
  std::string csv = "run";
  for (const auto& [key, values] : axes) csv += "," + csv_field(key);
  csv += ",status,step,loss,tokens_per_s";
  for (const auto& k : eval_keys) csv += "," + csv_field("eval_" + k);
  csv += "\n";
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const auto& s = states[i];
    nlohmann::json j{{"run", p.name}, {"status", s.status}};
    csv += csv_field(p.name);
    for (const auto& [k, v] : p.keys) {
      j["point"][k] = value_json(v);
      csv += "," + csv_field(v);
    }
    j["step"] = s.train ? s.train->step : 0;
    j["loss"] = metric(s.train, "loss");
    j["tokens_per_s"] = metric(s.train, "tokens_per_s");
    j["eval"] = nlohmann::json::object();
    if (s.eval) {
      for (const auto& [k, v] : s.eval->values) j["eval"][k] = v;
      j["eval_step"] = s.eval->step;
    }
    csv += fmt::format(",{},{},{},{}", s.status, j["step"].get<int64_t>(), number(j["loss"]),
                       number(j["tokens_per_s"]));
    for (const auto& k : eval_keys) csv += "," + number(j["eval"].value(k, nlohmann::json()));
    csv += "\n";
    runs.push_back(j);
  }
  nlohmann::json summary{{"runs", runs}};
  for (const auto& [key, values] : axes)
    for (const auto& v : values) summary["grid"][key].push_back(value_json(v));
  write_file_atomic((out / "summary.json").string(), summary.dump(2) + "\n");
  write_file_atomic((out / "summary.csv").string(), csv);
  return csv;
}

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Starts `recall train` for one point; its stdout (the summary) goes to train.json, its stderr
// (progress, errors) is appended to train.log.
pid_t spawn_run(const std::vector<std::string>& argv, const fs::path& dir) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, (dir / "train.json").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, (dir / "train.log").c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  reset_signals_on_spawn(attr, /*own_group=*/true);  // signals reach it through the sweep
  pid_t pid = 0;
  const int err = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(err)));
  return pid;
}

struct Args {
  std::string config, out;
  std::vector<std::string> grid, sets;
  int64_t seeds = 1, jobs = 1;
};

int run_sweep(const Args& args) {
  std::vector<Axis> axes;
  for (const auto& g : args.grid) {
    axes.push_back(parse_grid(g));
    for (size_t i = 0; i + 1 < axes.size(); ++i)
      if (axes[i].first == axes.back().first)
        throw UsageError(fmt::format("--grid {}: key {} is given twice", g, axes.back().first));
  }
  if (args.seeds > 1) {
    for (const auto& a : axes)
      if (a.first == "seed")
        throw UsageError("--seeds with --grid seed=...: give the seeds one way");
    const int64_t base = train_config_from_file(args.config, args.sets).trainer.seed;
    Axis seeds{"seed", {}};
    for (int64_t i = 0; i < args.seeds; ++i) seeds.second.push_back(std::to_string(base + i));
    axes.push_back(seeds);
  }
  std::vector<Point> points = expand(axes);
  // Every point's config is read and checked before any run starts.
  for (auto& p : points) {
    std::vector<std::string> overrides = args.sets;
    for (const auto& [k, v] : p.keys) overrides.push_back(k + "=" + v);
    try {
      p.steps = train_config_from_file(args.config, overrides).trainer.steps;
    } catch (const UsageError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--grid point {}: {}", p.name, e.what()));
    }
  }
  const fs::path out(args.out);
  make_output_dir("--out", args.out);
  // The sweep's definition: rerunning into the folder continues only the same sweep.
  nlohmann::json definition{
      {"config", args.config}, {"sets", args.sets}, {"grid", args.grid}, {"seeds", args.seeds}};
  const fs::path def_file = out / "sweep.json";
  if (fs::exists(def_file)) {
    auto stored = nlohmann::json::parse(read_file("--out", def_file.string()), nullptr, false);
    if (stored != definition)
      throw UsageError(fmt::format(
          "--out {}: holds another sweep ({}); rerun that command to continue it, or choose "
          "another folder",
          args.out, stored.is_discarded() ? "unreadable sweep.json" : stored.dump()));
  } else {
    write_file_atomic(def_file.string(), definition.dump(2) + "\n");
  }

  std::vector<RunState> states;
  for (const auto& p : points) states.push_back(read_state(out / p.name, p.steps));
  write_summary(out, axes, points, states);

  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const int64_t jobs = std::max<int64_t>(1, std::min<int64_t>(args.jobs, points.size()));
  const int threads = std::max(1, torch::get_num_threads() / static_cast<int>(jobs));
  std::vector<size_t> todo;
  for (size_t i = 0; i < points.size(); ++i)
    if (states[i].status != "finished") todo.push_back(i);
  if (!quiet())
    fmt::print(stderr,
               "sweep: {} runs in {}, {} finished already; {} at a time, {} thread{} each\n",
               points.size(), args.out, points.size() - todo.size(), jobs, threads,
               threads == 1 ? "" : "s");

  SignalRelay signals;  // the runs lead their own process groups: signals reach them from here
  std::map<pid_t, size_t> running;
  std::map<size_t, std::chrono::steady_clock::time_point> started;
  size_t next = 0;
  int stopping = 0;
  std::vector<std::string> failures;
  while ((!stopping && next < todo.size()) || !running.empty()) {
    while (!stopping && static_cast<int64_t>(running.size()) < jobs && next < todo.size()) {
      const size_t i = todo[next++];
      const Point& p = points[i];
      const fs::path dir = out / p.name;
      fs::create_directories(dir);
      const bool resume = fs::exists(checkpoint_path(dir.string()));
      std::vector<std::string> argv = {exe,     "--threads", std::to_string(threads),
                                       "train", "--config",  args.config};
      for (const auto& s : args.sets) argv.insert(argv.end(), {"--set", s});
      for (const auto& [k, v] : p.keys) argv.insert(argv.end(), {"--set", k + "=" + v});
      argv.insert(argv.end(), {"--out", dir.string()});
      if (resume) argv.push_back("--resume");
      running[spawn_run(argv, dir)] = i;
      started[i] = std::chrono::steady_clock::now();
      if (!quiet())
        fmt::print(stderr, "sweep: {} {}\n", p.name,
                   resume ? fmt::format("resumes from step {}",
                                        states[i].train ? states[i].train->step : 0)
                          : std::string("starts"));
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const size_t i = running[pid];
      running.erase(pid);
      const fs::path dir = out / points[i].name;
      states[i] = read_state(dir, points[i].steps);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && code < 128) {
        states[i].status = "failed";
        failures.push_back(fmt::format("{}: {} (log: {})", points[i].name,
                                       last_line(dir / "train.log"), (dir / "train.log").string()));
      }
      write_summary(out, axes, points, states);
      if (!quiet()) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started[i]).count();
        const auto& s = states[i];
        std::string what = s.status;
        if (s.train) what += fmt::format(" at step {}", s.train->step);
        if (s.status == "finished" && s.train && s.eval)
          what +=
              fmt::format(", loss {:.4f}, eval accuracy {:.4f}", s.train->get("loss").value_or(NAN),
                          s.eval->get("accuracy").value_or(NAN));
        fmt::print(stderr, "sweep: {} {} ({:.1f} s)\n", points[i].name, what, secs);
      }
      continue;
    }
    std::vector<pid_t> children;
    for (const auto& [child, i] : running) children.push_back(child);
    if (const int sig = signals.relay(children); sig && !stopping) {
      stopping = sig;
      if (!quiet())
        fmt::print(stderr, "sweep: signal {}: stopping {} run{} after a checkpoint\n", stopping,
                   running.size(), running.size() == 1 ? "" : "s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string csv = write_summary(out, axes, points, states);
  if (stopping) {
    size_t finished = 0;
    for (const auto& s : states) finished += s.status == "finished";
    fmt::print(stderr,
               "sweep stopped by signal {}: {} of {} runs finished; run the same command again to "
               "continue\n",
               stopping, finished, points.size());
    return 128 + stopping;
  }
  if (!failures.empty()) {
    for (const auto& f : failures) fmt::print(stderr, "error: sweep run {}\n", f);
    return 1;
  }
  std::fputs(csv.c_str(), stdout);
  return 0;
}

}  // namespace

void add_sweep(CLI::App& root, Action& action) {
  auto args = std::make_shared<Args>();
  auto* cmd = root.add_subcommand(
      "sweep", "train one run per point of a grid of config values; rerun to resume");
  cmd->add_option("--config", args->config, "a recipe of train/ or a TOML file, e.g. mqar-tiny")
      ->required();
  cmd->add_option("--grid", args->grid, "key=value1,value2,... (repeatable: the product)")
      ->required();
  cmd->add_option("--set", args->sets, "override a config key in every run: --set key=value");
  cmd->add_option("--seeds", args->seeds, "runs per point, seeds seed, seed+1, ...")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--out", args->out, "folder: one run folder per point, summary.csv/json")
      ->required();
  cmd->add_option("--jobs", args->jobs, "runs at a time (the threads are shared among them)")
      ->check(CLI::Range(1, 256));
  cmd->callback([args, &action] {
    check_output_dir("--out", args->out);
    action = [args] { return run_sweep(*args); };
  });
}

}  // namespace recall::cli
