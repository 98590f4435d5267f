// The real binary: work too large for the machine (or for --max-memory) is refused before it
// starts, and every command's JSON is strict JSON whose only nulls are the documented "no value"
// fields (nlohmann writes a NaN or infinity as null: a null anywhere else is a number that went
// bad).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "shell_test_util.h"

namespace fs = std::filesystem;

namespace {

using recall::test::fresh_dir;
using recall::test::read_text;
using recall::test::run_shell;
using recall::test::ShellRun;

// Every key whose value is null somewhere in `j`.
void null_keys(const nlohmann::json& j, const std::string& key, std::set<std::string>& out) {
  if (j.is_null()) out.insert(key);
  if (j.is_object())
    for (const auto& [k, v] : j.items()) null_keys(v, k, out);
  if (j.is_array())
    for (const auto& v : j) null_keys(v, key, out);
}

// Strict JSON (no NaN, Infinity or -Infinity tokens, which nlohmann refuses too), with nulls only
// under `allowed` keys.
void expect_clean_json(const std::string& text, const std::set<std::string>& allowed,
                       const std::string& what) {
  for (const char* bad : {"NaN", "nan", "Infinity", "inf,", "inf\n"})
    EXPECT_EQ(text.find(bad), std::string::npos) << what << " holds " << bad << ":\n" << text;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << what << ":\n" << text;
  std::set<std::string> nulls;
  null_keys(j, "", nulls);
  for (const auto& k : nulls) EXPECT_TRUE(allowed.count(k)) << what << ": null at key " << k;
}

std::string last_line(const std::string& s) {
  const auto end = s.find_last_not_of('\n');
  return s.substr(s.rfind('\n', end) + 1, end - s.rfind('\n', end));
}

}  // namespace

// Too large for any machine, or for the limit given: exit 2 and one line with the estimate, before
// any file is written.
TEST(CliLimits, WorkOverTheRamLimitIsRefusedUpFront) {
  const auto dir = fresh_dir("recall_cli_limits");
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"train --config mqar-tiny --set batch_size=65536 --set seq_len=65536 --out " +
           (dir / "huge").string(),
       "more than the"},
      {"train --config mqar-tiny --max-memory 1M --out " + (dir / "small").string(),
       "more than --max-memory 1.0 MiB"},
      {"probe --max-memory 64K --json " + (dir / "p.json").string(), "more than --max-memory"},
      // 1.5 GiB of scores, within any machine's free RAM: only the flag refuses it
      {"fit --m-max 20000 --max-memory 64M --json " + (dir / "f.json").string(),
       "of recall scores at M = 20000, 16.0 KiB for the store), more than --max-memory 64.0 MiB"},
      {"probe --max-memory 12X", "--max-memory 12X: give a size"},
      {"fit --max-memory -1G", "--max-memory -1G"},
  };
  for (const auto& c : cases) {
    const ShellRun r = run_shell(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
  }
  const ShellRun huge = run_shell(cases[0].args);
  EXPECT_NE(huge.err.find("needs an estimated"), std::string::npos) << huge.err;
  EXPECT_NE(huge.err.find("activations for batch 65536 x 65536 tokens"), std::string::npos)
      << huge.err;
  for (const char* f : {"huge", "small", "p.json", "f.json"})
    EXPECT_FALSE(fs::exists(dir / f)) << f;
  // under the limit it runs
  const ShellRun ok = run_shell("fit --kind linear --width 4 --dk 8 --steps 5 --max-memory 1G");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// Every command that writes JSON, on small inputs, including the edge that overflows (theory at
// beta 200: the Gaussian shortcut of softmax overflows and is null, no value).
TEST(CliJson, EveryCommandWritesStrictJson) {
  const auto dir = fresh_dir("recall_cli_json");
  const auto f = [&](const char* name) { return (dir / name).string(); };
  const std::set<std::string> none;

  ShellRun r = run_shell("theory --beta 200 --json " + f("theory.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(read_text(f("theory.json")), {"capacity", "capacity_gaussian"}, "theory");
  r = run_shell("theory --beta 200 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(r.out, {"capacity", "capacity_gaussian"}, "theory (stdout)");

  r = run_shell(
      "probe --stores outer_product,least_squares,relu,exp2,softmax --m 16,64 --trials 2 "
      "--queries 16 --rule-m-max 2048 --beta 200 --threads 1 --quiet --json " +
      f("probe.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  // capacities that the grid or the theory do not reach
  expect_clean_json(read_text(f("probe.json")),
                    {"median", "low", "high", "rms", "rms_sem", "theory", "theory_rms"}, "probe");

  r = run_shell("fit --kind mlp-relu2 --width 4 --dk 8 --steps 20 --threads 1 --json " +
                f("fit.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(read_text(f("fit.json")),
                    {"constructed_store", "theory_capacity", "constructed_capacity"}, "fit");

  const std::string sets =
      "--config mqar-tiny --set steps=4 --set warmup_steps=1 --set batch_size=4 --set "
      "eval_batches=1 "
      "--set "
      "log_every=1 --set peak_flops=1e12 --threads 1";
  r = run_shell("train " + sets + " --out " + f("run"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(last_line(r.out), none, "train summary");
  std::istringstream metrics(read_text(f("run/metrics.jsonl")));
  for (std::string line; std::getline(metrics, line);) expect_clean_json(line, none, "metrics");

  r = run_shell("eval --checkpoint " + f("run") + " --seq-len 64 --rule su --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(last_line(r.out), none, "eval");

  r = run_shell("extrapolate --checkpoints " + f("run") +
                " --lengths 1,2 --batches 1 --threads 1 --json " + f("x.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(read_text(f("x.json")), none, "extrapolate");

  r = run_shell("inspect --checkpoint " + f("run") +
                " --lengths 1,2 --batches 1 --threads 1 --json " + f("i.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  expect_clean_json(read_text(f("i.json")), {"theory_capacity"}, "inspect");
}
