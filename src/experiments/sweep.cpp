#include "recall/experiments/sweep.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/signals.h"
#include "recall/core/spawn.h"
#include "recall/core/torch.h"
#include "recall/train/checkpoint.h"
#include "recall/train/metrics.h"
#include "recall/train/train_config.h"

namespace recall {
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

// The grid's axes, and the seeds' as the last one.
std::vector<Axis> plan_axes(const SweepConfig& c) {
  std::vector<Axis> axes;
  for (const auto& g : c.grid) {
    axes.push_back(parse_grid(g));
    for (size_t i = 0; i + 1 < axes.size(); ++i)
      if (axes[i].first == axes.back().first)
        throw UsageError(fmt::format("--grid {}: key {} is given twice", g, axes.back().first));
  }
  if (c.seeds > 1) {
    for (const auto& a : axes)
      if (a.first == "seed")
        throw UsageError("--seeds with --grid seed=...: give the seeds one way");
    const int64_t base = train_config_from_file(c.config, c.sets).trainer.seed;
    Axis seeds{"seed", {}};
    for (int64_t i = 0; i < c.seeds; ++i) seeds.second.push_back(std::to_string(base + i));
    axes.push_back(seeds);
  }
  return axes;
}

// Every point, its config read and checked before any run starts.
std::vector<Point> plan_points(const SweepConfig& c, const std::vector<Axis>& axes) {
  std::vector<Point> points = expand(axes);
  for (auto& p : points) {
    std::vector<std::string> overrides = c.sets;
    for (const auto& [k, v] : p.keys) overrides.push_back(k + "=" + v);
    try {
      p.steps = train_config_from_file(c.config, overrides).trainer.steps;
    } catch (const UsageError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--grid point {}: {}", p.name, e.what()));
    }
  }
  return points;
}

// The sweep's definition in OUT/sweep.json: rerunning into the folder continues only the same
// sweep.
void claim_folder(const SweepConfig& c) {
  make_output_dir("--out", c.out);
  nlohmann::json definition{
      {"config", c.config}, {"sets", c.sets}, {"grid", c.grid}, {"seeds", c.seeds}};
  const fs::path def_file = fs::path(c.out) / "sweep.json";
  if (fs::exists(def_file)) {
    auto stored = nlohmann::json::parse(read_file("--out", def_file.string()), nullptr, false);
    if (stored != definition)
      throw UsageError(fmt::format(
          "--out {}: holds another sweep ({}); rerun that command to continue it, or choose "
          "another folder",
          c.out, stored.is_discarded() ? "unreadable sweep.json" : stored.dump()));
  } else {
    write_file_atomic(def_file.string(), definition.dump(2) + "\n");
  }
}

// Runs the points not yet finished as child processes, `jobs` at a time, and relays signals to
// them.
class Scheduler {
 public:
  Scheduler(const SweepConfig& c, const std::vector<Axis>& axes, const std::vector<Point>& points)
      : config_(c), axes_(axes), points_(points), out_(c.out) {
    for (const auto& p : points) states_.push_back(read_state(out_ / p.name, p.steps));
    write_summary(out_, axes_, points_, states_);
    program_ = c.program.empty() ? fs::read_symlink("/proc/self/exe").string() : c.program;
    jobs_ = std::max<int64_t>(1, std::min<int64_t>(c.jobs, points.size()));
    threads_ = std::max(1, torch::get_num_threads() / static_cast<int>(jobs_));
    for (size_t i = 0; i < points.size(); ++i)
      if (states_[i].status != "finished") todo_.push_back(i);
  }

  SweepResult run() {
    if (config_.progress)
      fmt::print(stderr,
                 "sweep: {} runs in {}, {} finished already; {} at a time, {} thread{} each\n",
                 points_.size(), config_.out, points_.size() - todo_.size(), jobs_, threads_,
                 threads_ == 1 ? "" : "s");
    SignalRelay signals;  // the runs lead their own process groups: signals reach them from here
    while ((!stopping_ && next_ < todo_.size()) || !running_.empty()) {
      while (!stopping_ && static_cast<int64_t>(running_.size()) < jobs_ && next_ < todo_.size())
        start(todo_[next_++]);
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0 && running_.count(pid)) {
        const size_t i = running_[pid];
        running_.erase(pid);
        collect(i, exit_code(status));
        continue;
      }
      relay(signals);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    SweepResult r;
    r.csv = write_summary(out_, axes_, points_, states_);
    r.runs = points_.size();
    for (const auto& s : states_) r.finished += s.status == "finished";
    r.stop_signal = stopping_;
    r.failures = failures_;
    return r;
  }

 private:
  // Starts `recall train` for point i; its stdout (the summary) goes to train.json, its stderr
  // (progress, errors) is appended to train.log.
  void start(size_t i) {
    const Point& p = points_[i];
    const fs::path dir = out_ / p.name;
    fs::create_directories(dir);
    const bool resume = fs::exists(checkpoint_path(dir.string()));
    std::vector<std::string> argv = {program_, "--threads", std::to_string(threads_),
                                     "train",  "--config",  config_.config};
    for (const auto& s : config_.sets) argv.insert(argv.end(), {"--set", s});
    for (const auto& [k, v] : p.keys) argv.insert(argv.end(), {"--set", k + "=" + v});
    argv.insert(argv.end(), {"--out", dir.string()});
    if (resume) argv.push_back("--resume");
    SpawnOptions options;
    options.stdout_file = (dir / "train.json").string();
    options.stderr_file = (dir / "train.log").string();
    options.stderr_append = true;
    options.own_group = true;  // signals reach it through the sweep
    running_[spawn(argv, options).pid] = i;
    started_[i] = std::chrono::steady_clock::now();
    if (config_.progress)
      fmt::print(stderr, "sweep: {} {}\n", p.name,
                 resume ? fmt::format("resumes from step {}",
                                      states_[i].train ? states_[i].train->step : 0)
                        : std::string("starts"));
  }

  // Point i's run ended with `code`: its state from its folder, the summaries rewritten.
  void collect(size_t i, int code) {
    const fs::path dir = out_ / points_[i].name;
    states_[i] = read_state(dir, points_[i].steps);
    if (code != 0 && code < 128) {
      states_[i].status = "failed";
      failures_.push_back(fmt::format("{}: {} (log: {})", points_[i].name,
                                      last_line(dir / "train.log"), (dir / "train.log").string()));
    }
    write_summary(out_, axes_, points_, states_);
    if (!config_.progress) return;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_[i]).count();
    const auto& s = states_[i];
    std::string what = s.status;
    if (s.train) what += fmt::format(" at step {}", s.train->step);
    if (s.status == "finished" && s.train && s.eval)
      what += fmt::format(", loss {:.4f}, eval accuracy {:.4f}", s.train->get("loss").value_or(NAN),
                          s.eval->get("accuracy").value_or(NAN));
    fmt::print(stderr, "sweep: {} {} ({:.1f} s)\n", points_[i].name, what, secs);
  }

  // Passes on the signals that arrived; the first SIGINT or SIGTERM stops starting runs.
  void relay(SignalRelay& signals) {
    std::vector<pid_t> children;
    for (const auto& [child, i] : running_) children.push_back(child);
    if (const int sig = signals.relay(children); sig && !stopping_) {
      stopping_ = sig;
      if (config_.progress)
        fmt::print(stderr, "sweep: signal {}: stopping {} run{} after a checkpoint\n", stopping_,
                   running_.size(), running_.size() == 1 ? "" : "s");
    }
  }

  const SweepConfig& config_;
  const std::vector<Axis>& axes_;
  const std::vector<Point>& points_;
  const fs::path out_;
  std::vector<RunState> states_;
  std::string program_;
  int64_t jobs_ = 1;
  int threads_ = 1;
  std::vector<size_t> todo_;  // the points not finished, in order
  size_t next_ = 0;           // todo_'s next to start
  std::map<pid_t, size_t> running_;
  std::map<size_t, std::chrono::steady_clock::time_point> started_;
  int stopping_ = 0;
  std::vector<std::string> failures_;
};

}  // namespace

SweepResult run_sweep(const SweepConfig& config) {
  const std::vector<Axis> axes = plan_axes(config);
  const std::vector<Point> points = plan_points(config, axes);
  claim_folder(config);
  return Scheduler(config, axes, points).run();
}

}  // namespace recall
