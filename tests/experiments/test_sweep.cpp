// The sweep engine without training: its plan's checks come before any folder or run, and its
// scheduler records a run that fails (here a program that only exits 1) with its log, in the
// summaries, and refuses a folder that holds another sweep.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "recall/core/error.h"
#include "recall/experiments/sweep.h"
#include "train_test_util.h"

namespace recall {
namespace {

namespace fs = std::filesystem;

SweepConfig sweep_config(const std::string& out, const std::vector<std::string>& grid) {
  SweepConfig c;
  c.config = "mqar-tiny";
  c.grid = grid;
  c.out = out;
  c.progress = false;
  return c;
}

TEST(Sweep, ChecksEveryPointBeforeStarting) {
  test::TempDir dir;
  const std::string out = dir / "sweep";
  for (const auto& grid : std::vector<std::vector<std::string>>{
           {"lr="}, {"lr=1e-3,1e-3"}, {"lr=1e-3", "lr=2e-3"}, {"nosuch=1"}, {"steps=0,10"}})
    EXPECT_THROW(run_sweep(sweep_config(out, grid)), UsageError) << grid.back();
  EXPECT_FALSE(fs::exists(out));  // nothing written for a sweep that cannot run
}

TEST(Sweep, RecordsFailedRunsAndRefusesAnotherSweep) {
  test::TempDir dir;
  const std::string out = dir / "sweep";
  SweepConfig c = sweep_config(out, {"seed=1,2"});
  c.program = "/bin/false";  // each "run" exits 1 at once, writing nothing
  c.jobs = 2;
  const SweepResult r = run_sweep(c);
  EXPECT_EQ(r.runs, 2u);
  EXPECT_EQ(r.finished, 0u);
  EXPECT_EQ(r.stop_signal, 0);
  ASSERT_EQ(r.failures.size(), 2u);
  // two jobs: the runs fail in either order
  const std::string log1 = "(log: " + out + "/seed=1/train.log)";
  EXPECT_TRUE(r.failures[0].find(log1) != std::string::npos ||
              r.failures[1].find(log1) != std::string::npos)
      << r.failures[0] << "\n"
      << r.failures[1];
  EXPECT_EQ(r.csv,
            "run,seed,status,step,loss,tokens_per_s\n"
            "seed=1,1,failed,0,,\n"
            "seed=2,2,failed,0,,\n");
  EXPECT_EQ(test::read_text(out + "/summary.csv"), r.csv);
  const auto summary = nlohmann::json::parse(test::read_text(out + "/summary.json"));
  EXPECT_EQ(summary.at("grid").at("seed"), nlohmann::json::array({1, 2}));
  EXPECT_EQ(summary.at("runs").at(1).at("point").at("seed"), 2);
  // the same folder with another grid is refused, naming the sweep it holds
  c.grid = {"seed=3"};
  EXPECT_THROW(run_sweep(c), UsageError);
}

}  // namespace
}  // namespace recall
