// The real binary: bad input gets one line naming the flag and exit code 2, and no output file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "shell_test_util.h"

namespace fs = std::filesystem;

namespace {

using recall::test::fresh_dir;
using recall::test::run_shell;
using recall::test::ShellRun;

}  // namespace

TEST(Cli, TheoryPrintsCapacitiesAndJson) {
  const auto dir = fresh_dir("recall_cli_theory");
  const auto json_path = (dir / "t.json").string();
  const ShellRun r = run_shell("theory --dk 64 --beta 8 --json " + json_path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("relu2"), std::string::npos);
  std::ifstream in(json_path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["d_k"], 64);
  std::map<std::string, double> cap;
  for (const auto& s : j["stores"]) cap[s["store"]] = s["capacity"];
  EXPECT_DOUBLE_EQ(cap["outer_product"], 65.0);
  EXPECT_DOUBLE_EQ(cap["least_squares"], 128.0);
  EXPECT_NEAR(cap["relu2"], 2817.0, 1e-6);
  EXPECT_NEAR(cap["softmax"] / 1.2e6, 1.06, 0.02);
  const ShellRun alone = run_shell("theory --json");  // JSON on stdout
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out), j);
}

TEST(Cli, ProbeWritesJsonCsvAndPlot) {
  const auto dir = fresh_dir("recall_cli_probe");
  const ShellRun r = run_shell(
      "probe --stores relu,softmax --m 16,64,256 --trials 2 --queries 32 --rule-m-max 4096 "
      "--threads 1 --json " +
      (dir / "p.json").string() + " --csv " + (dir / "p.csv").string() + " --plot " +
      (dir / "p.png").string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(dir / "p.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j["stores"].size(), 2u);
  EXPECT_EQ(j["stores"][0]["store"], "relu");
  EXPECT_EQ(j["stores"][0]["curve"].size(), 3u);
  EXPECT_TRUE(j["stores"][0]["curve"][0].contains("isr_p90"));
  EXPECT_TRUE(j["stores"][0]["capacity"].contains("theory"));
  ASSERT_EQ(j["rules"].size(), 4u);
  EXPECT_EQ(j["rules"][1]["rule"], "su");
  EXPECT_EQ(j["rules"][1]["curve"].size(), 3u);  // 1024, 2048, 4096
  EXPECT_GT(fs::file_size(dir / "p.png"), 1000u);
  EXPECT_GT(fs::file_size(dir / "p.csv"), 100u);
}

TEST(Cli, BenchProbeBesideBusyNeighbours) {
  // The busy runs are the same probe again beside one spinning process (gone afterwards), in
  // rounds of idle then busy runs whose median slowdown is reported beside each round's.
  const ShellRun r = run_shell(
      "--threads 2 bench probe --stores relu --m 16,64 --no-rules --trials 1 --busy 1 "
      "--busy-train-steps 0 --busy-rounds 3");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["busy_neighbours"], 1);
  EXPECT_EQ(j["busy_rounds"], 3);
  EXPECT_GT(j["busy_seconds"].get<double>(), 0.0);
  auto x = j["busy_slowdowns"].get<std::vector<double>>();
  ASSERT_EQ(x.size(), 3u);
  std::sort(x.begin(), x.end());
  EXPECT_EQ(j["busy_slowdown"].get<double>(), x[1]);
  EXPECT_GT(j["profile_s"]["accumulate"].get<double>(), 0.0);
  EXPECT_FALSE(j.contains("busy_train_slowdown"));
  EXPECT_EQ(run_shell("bench probe --busy -1").code, 2);
  EXPECT_EQ(run_shell("bench probe --busy 1 --busy-rounds 0").code, 2);
  EXPECT_EQ(run_shell("bench probe --peer /nonexistent/peer_probe.py").code, 2);
}

TEST(Cli, BadInputIsOneLineExitTwoAndNoFile) {
  const auto dir = fresh_dir("recall_cli_bad");
  const std::string json = " --json " + (dir / "x.json").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"probe --dk 0" + json, "--dk 0"},
      {"probe --dk abc" + json, "--dk"},
      {"probe --trials 0" + json, "--trials 0"},
      {"probe --stores relu,bogus" + json, "bogus"},
      {"probe --rules su,logn" + json, "logn"},
      {"probe --m 1,64" + json, "--m 1"},
      {"probe --beta -2" + json, "--beta -2"},
      {"probe --plot " + (dir / "x.pdf").string() + json, ".png or .svg"},
      {"probe --json /nonexistent-dir/x.json", "does not exist"},
      {"probe --unknown-flag" + json, "unknown-flag"},
      {"theory --dk 1" + json, "--dk"},
      {"nosuchcommand", "unknown command 'nosuchcommand'"},
      {"report --quick --out /proc/recall-report", "/proc"},
  };
  for (const auto& [args, needle] : cases) {
    const ShellRun r = run_shell(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "x.json")) << args;
  }
}

// What a new user might try: malformed exports, grids, plot folders, distributed variables, text
// corpora, sampling flags, and output flags pointed where nothing can be written. Each is one line,
// exit 2, and leaves nothing in the folder.
TEST(Cli, NewUsersBadInputIsOneLineExitTwoAndNoOutput) {
  const auto dir = fresh_dir("recall_cli_new_user");
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  const std::string d = dir.string(), bad_ckpt = write("bad.bin", "garbage"),
                    afile = write("afile", "x"), empty = write("empty.txt", ""),
                    one = write("one.txt", "a"),
                    binary = write("binary.txt", std::string("text\0\x01\x02 more", 13));
  fs::create_directories(dir / "empty_folder");
  fs::create_directories(dir / "not_a_run");
  write("not_a_run/notes.txt", "hello\n");
  // a sparse file of 4 GiB: refused for RAM before it is read, not met with bad_alloc (about
  // 104 GiB estimated)
  const std::string huge = write("huge.txt", "");
  fs::resize_file(huge, 4ull << 30);
  const std::string out = " --out " + d + "/out",
                    train = "train --config text-tiny --set text_file=";
  struct Case {
    Case(std::string a, std::string n, std::string e = "")
        : args(std::move(a)), needle(std::move(n)), env(std::move(e)) {}
    std::string args, needle, env;
  };
  const std::vector<Case> cases = {
      {"export --checkpoint " + bad_ckpt + out, "truncated"},
      {"export --checkpoint " + d + "/none.bin" + out, "none.bin"},
      {"export --checkpoint " + bad_ckpt + " --out /proc/x", "/proc"},
      {"sweep --config facts-tiny --grid lr=" + out, "--grid lr="},
      {"sweep --config facts-tiny --grid =1" + out, "--grid =1"},
      {"sweep --config facts-tiny --grid lr=1,,2" + out, "--grid lr=1,,2"},
      {"sweep --config facts-tiny --grid nosuch=1" + out, "nosuch"},
      {"sweep --config facts-tiny --grid lr=1e-3,1e-3" + out, "twice"},
      {"plot " + d + "/empty_folder --out " + d + "/out.png", "no metrics.jsonl"},
      {"plot " + d + "/not_a_run --out " + d + "/out.png", "no metrics.jsonl"},
      {"plot " + afile + " --out " + d + "/out.png", "no metrics.jsonl"},
      {"train --config facts-tiny" + out, "RANK=abc", "RANK=abc WORLD_SIZE=2"},
      {"train --config facts-tiny" + out, "WORLD_SIZE=0", "RANK=0 WORLD_SIZE=0"},
      {"train --config facts-tiny" + out, "RANK=2", "RANK=2 WORLD_SIZE=2"},
      {"train --config facts-tiny" + out, "MASTER_PORT=99999",
       "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999"},
      {train + empty + out, "0 characters"},
      {train + one + out, "1 characters"},
      {train + binary + out, "binary"},
      // against a stated limit, so that a machine with 104 GiB free refuses it as well
      {train + huge + out + " --max-memory 4G", "more than --max-memory 4.0 GiB"},
      {"sample --checkpoint " + bad_ckpt + " --temperature -1", "--temperature"},
      {"sample --checkpoint " + bad_ckpt + " --temperature nan", "--temperature"},
      {"sample --checkpoint " + bad_ckpt + " --top-k -1", "--top-k: -1: must be a number >= 0"},
      {"sample --checkpoint " + bad_ckpt + " --tokens 0", "--tokens"},
      {"sample --checkpoint " + bad_ckpt + " --tokens 99999999999", "--tokens"},
      {"theory --json /proc/x", "/proc"},
      {"theory --json " + afile + "/x", "not a folder"},
      {"probe --csv /proc/x", "/proc"},
      {"probe --plot /proc/x.png", "/proc"},
      {"train --config facts-tiny --out /proc/x", "/proc"},
      {"train --config facts-tiny --out " + afile + "/x", "--out"},
      {"extrapolate --config mqar-tiny --out /proc/x", "/proc"},
      {"experiment sharpness --out /proc/x", "/proc"},
      {"plot " + d + "/not_a_run --out /proc/x.png", "--out"},
      // thousands of threads took a minute per thousand on two cores, whatever the work
      {"--threads 100000 theory", "--threads: 100000: must be a number in [0, 1024]"},
      // an unsigned seed took -1 as 2^64 - 1
      {"fit --seed -1 --json " + d + "/out", "--seed: -1"},
      {"probe --seed -1 --json " + d + "/out", "--seed: -1"},
      // a seed past int64 was taken as its largest value
      {"sample --checkpoint " + d + "/none --seed 99999999999999999999",
       "--seed: 99999999999999999999"},
      // a series past float32's range was NaN in every ISR
      {"theory --beta 1e38 --json " + d + "/out", "beta = 1e+38"},
      {"probe --stores exp20 --beta 1000 --no-rules --json " + d + "/out", "exp20 at s = 1"},
  };
  for (const auto& c : cases) {
    const ShellRun r = run_shell(c.args, c.env);
    EXPECT_EQ(r.code, 2) << c.env << " " << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "out")) << c.args;
    EXPECT_FALSE(fs::exists(dir / "out.png")) << c.args;
  }
  fs::remove_all(dir);
}

// A run whose metrics.jsonl holds no curve yet (empty, or records without loss and lr) is plotted
// as empty panels, the loss panel's log scale included, not refused by gnuplot.
TEST(Cli, PlotOfARunWithNoRecordsDrawsEmptyPanels) {
  const auto dir = fresh_dir("recall_cli_plot_empty");
  fs::create_directories(dir / "empty");
  std::ofstream(dir / "empty" / "metrics.jsonl");
  fs::create_directories(dir / "bare");
  std::ofstream(dir / "bare" / "metrics.jsonl") << "{\"step\":1,\"loss\":1.0}\n";
  for (const std::string name : {"empty", "bare"}) {
    const auto png = dir / (name + ".png");
    const ShellRun r = run_shell("plot " + (dir / name).string() + " --out " + png.string());
    EXPECT_EQ(r.code, 0) << name << "\n" << r.err;
    EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 1000u) << name;
  }
  fs::remove_all(dir);
}
