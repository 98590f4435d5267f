// Helpers for the training tests: temporary run folders, a tiny config, and running the real CLI.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "recall/core/spawn.h"
#include "recall/train/train_config.h"
#include "recall/train/trainer.h"
#include "test_paths.h"

namespace recall::test {

// A fresh, empty folder under the system temp folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "recall-train-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Small enough that a step takes milliseconds on one core.
inline std::string tiny_mqar_toml() {
  return R"(
task = "mqar"
vocab_size = 32
mqar_pairs = 4
seq_len = 32
d_model = 32
n_layers = 2
n_heads = 2
steps = 12
batch_size = 8
lr = 3e-3
min_lr = 3e-4
warmup_steps = 3
eval_batches = 2
log_every = 1
seed = 7
)";
}

inline TrainConfig tiny_mqar(const std::vector<std::string>& overrides = {}) {
  return train_config_from_toml(tiny_mqar_toml(), "tiny", overrides);
}

// train() into `out` without progress lines; with stop_at > 0, stopped as by signal 99 after
// that step (a checkpoint, then return).
inline TrainResult run_quietly(const TrainConfig& cfg, const std::string& out, bool resume = false,
                               int64_t stop_at = 0) {
  TrainOptions o;
  o.out_dir = out;
  o.resume = resume;
  o.progress = false;
  if (stop_at > 0) o.stop = [stop_at](int64_t step) { return step == stop_at ? 99 : 0; };
  return train(cfg, o);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Proc {
  pid_t pid = -1;
  std::string out_file, err_file;
};

// Starts the CLI with `args` in a process group of its own (as a shell starts a job: kill(-pid) is
// a terminal's Ctrl-C), its stdout and stderr going to files in `dir` (named after `tag`), with
// `env` ("NAME=value") set in its environment and `prefix` (a program and its arguments, such as
// `ip netns exec NAME`) run in front of it.
inline Proc spawn_cli(const std::vector<std::string>& args, const std::filesystem::path& dir,
                      const std::vector<std::string>& env = {}, const std::string& tag = "",
                      const std::vector<std::string>& prefix = {}) {
  Proc p{-1, (dir / (tag + "stdout.txt")).string(), (dir / (tag + "stderr.txt")).string()};
  std::vector<std::string> argv = prefix;
  argv.push_back(recall::test::recall_binary());
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions options;
  options.stdout_file = p.out_file;
  options.stderr_file = p.err_file;
  options.own_group = true;
  options.env = env;
  p.pid = spawn(argv, options).pid;
  return p;
}
inline Proc spawn_cli(const std::vector<std::string>& args, const TempDir& dir,
                      const std::vector<std::string>& env = {}, const std::string& tag = "",
                      const std::vector<std::string>& prefix = {}) {
  return spawn_cli(args, dir.path(), env, tag, prefix);
}

// The states (/proc/PID/stat: R running, S sleeping, T stopped, ...) of process `pid` and its
// children, the process first.
inline std::string process_states(pid_t pid) {
  auto state = [](const std::string& id) {
    std::ifstream stat("/proc/" + id + "/stat");
    const std::string all((std::istreambuf_iterator<char>(stat)), {});
    const auto paren = all.rfind(')');  // the name before it may hold spaces
    return paren == std::string::npos || paren + 2 >= all.size() ? '?' : all[paren + 2];
  };
  const std::string id = std::to_string(pid);
  std::string states(1, state(id));
  std::ifstream children("/proc/" + id + "/task/" + id + "/children");
  for (std::string child; children >> child;) states += state(child);
  return states;
}

// Polls process_states(pid) until all of them are stopped (T), or none is; at most 10 s.
inline std::string wait_for_stopped(pid_t pid, bool stopped) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string states;
  do {
    states = process_states(pid);
    if (stopped ? states.find_first_not_of('T') == std::string::npos
                : states.find('T') == std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return states;
}

// Exit code, or 128 + signal when killed by a signal.
inline int wait_cli(const Proc& p) {
  return wait_child(p.pid);
}

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult run_cli(const std::vector<std::string>& args, const TempDir& dir) {
  Proc p = spawn_cli(args, dir);
  const int code = wait_cli(p);
  return {code, read_text(p.out_file), read_text(p.err_file)};
}

// Bad input through the binary: each (args, needle) exits 2 with one stderr line naming the needle.
using UsageCases = std::vector<std::pair<std::vector<std::string>, std::string>>;
inline void expect_usage_errors(const UsageCases& cases, const TempDir& dir) {
  for (const auto& [args, needle] : cases) {
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.code, 2) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace recall::test
