// The streaming probe against its slow reference, the essay's measured tables, and theory.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "recall/analysis/memory_stream.h"
#include "recall/analysis/probe.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/threads.h"
#include "recall/ops/kernels.h"

using namespace recall;

namespace {
const CurvePoint& point_at(const StoreResult& s, int64_t M) {
  for (const auto& p : s.curve)
    if (p.M == M) return p;
  throw std::runtime_error("no such M");
}
}  // namespace

TEST(Probe, StreamingFastPathMatchesStoreModules) {
  // The fast path (float32, nested sets in one stream, its own running sums) against every store
  // module written and queried one M at a time (float64), its ISR from the one ISR function
  // (self_recall_isr, isr.h): summaries agree to 1e-4 relative.
  ProbeConfig c;
  c.stores = {"outer_product", "relu", "relu3", "swiglu", "exp3", "softmax"};
  c.d_k = c.d_v = 16;
  c.queries = 24;
  c.trials = 2;
  c.m = {8, 20, 64, 300};
  c.chunk = 50;  // chunks that straddle grid points and generator blocks
  c.rules.clear();
  const auto fast = run_probe(c);
  c.reference = true;
  const auto ref = run_probe(c);
  for (size_t s = 0; s < fast.stores.size(); ++s)
    for (size_t g = 0; g < c.m.size(); ++g) {
      const auto &a = fast.stores[s].curve[g].isr, &b = ref.stores[s].curve[g].isr;
      EXPECT_EQ(a.count, b.count);
      for (auto [x, y] :
           {std::pair{a.median, b.median}, {a.rms, b.rms}, {a.p10, b.p10}, {a.p90, b.p90}})
        EXPECT_NEAR(x, y, 1e-4 * std::abs(y)) << fast.stores[s].store << " M " << c.m[g];
    }
}

// The memories are the same whichever ranges they are read in: the torch-ops path's chunks of 333
// and of 16384 (across the stream's blocks of 16384), and the fused path's blocks, drawn into a
// ring of three while the items of the blocks before run (5 blocks here, so the ring turns).
TEST(Probe, ChunkSizeDoesNotChangeTheMemories) {
  ProbeConfig c;
  c.stores = {"relu2"};
  c.d_k = c.d_v = 16;
  c.trials = 1;
  c.m = {100, 1000, 20000, 70000};
  c.rules.clear();
  const auto fused = run_probe(c);
  ScopedKernels reference(Kernels::kReference);
  c.chunk = 333;
  const auto a = run_probe(c);
  c.chunk = 16384;
  const auto b = run_probe(c);
  for (size_t g = 0; g < c.m.size(); ++g) {
    const double median = b.stores[0].curve[g].isr.median;
    EXPECT_NEAR(a.stores[0].curve[g].isr.median, median, 1e-5 * median) << c.m[g];
    EXPECT_NEAR(fused.stores[0].curve[g].isr.median, median, 1e-5 * median) << c.m[g];
  }
}

TEST(Probe, EssaysMeasuredTables) {
  // Outer product: ISR ~0.97 at M = 64 and ~16 at M = 16384; least squares: 0 up to 64, ~1.0 at
  // 128.
  ProbeConfig c;
  c.stores = {"outer_product"};
  c.m = {16, 32, 64, 128, 16384};
  c.rules.clear();
  const auto r = run_probe(c);
  EXPECT_NEAR(point_at(r.stores[0], 64).isr.median, 0.97, 0.05);
  EXPECT_NEAR(point_at(r.stores[0], 16384).isr.median, 16.0, 0.5);
  c.stores = {"least_squares"};
  c.m = {16, 32, 64, 128};
  const auto ls = run_probe(c);
  for (int64_t M : {16, 32, 64}) EXPECT_LT(point_at(ls.stores[0], M).isr.p90, 1e-4) << M;
  EXPECT_NEAR(point_at(ls.stores[0], 128).isr.median, 1.0, 0.06);
}

TEST(Probe, MeasuredCapacitiesAgreeWithTheory) {
  // The RMS crossing estimates what theory predicts (E[ISR^2] = 1): within 3 standard errors over
  // 8 trials. The headline median crossing sits a few per cent from it (ISR is skewed) and is as
  // noisy: within 5 % plus the same 3 standard errors (exp2, whose crossing lies near M = 25, has
  // standard errors near 5 %).
  ProbeConfig c;
  c.stores = {"outer_product", "least_squares", "relu", "relu2",  "swiglu",
              "exp2",          "exp3",          "exp4", "softmax"};
  c.beta = 4;  // softmax capacity ~1.8e3 at d_k = 64, so the test stays fast
  c.trials = 8;
  c.queries = 64;
  c.margin = 1.3;
  c.rules.clear();
  const auto r = run_probe(c);
  for (const auto& s : r.stores) {
    const auto& cap = s.capacity;
    ASSERT_TRUE(cap.rms && cap.rms_sem && cap.theory && cap.median)
        << s.store << " " << cap.rms.has_value() << cap.rms_sem.has_value()
        << cap.median.has_value();
    EXPECT_NEAR(*cap.rms, *cap.theory, 3 * *cap.rms_sem + 0.01 * *cap.theory) << s.store;
    EXPECT_NEAR(*cap.median / *cap.theory, 1.0, 0.05 + 3 * *cap.rms_sem / *cap.theory) << s.store;
    EXPECT_LE(*cap.low, *cap.median);
    EXPECT_GE(*cap.high, *cap.median);
  }
}

TEST(Probe, RulesOnTheEssaysFigureShape) {
  // L = 64 instead of 1024 keeps it fast; the shape is the essay's: past L, su and qwen coincide
  // and fall, yarn falls faster, a fixed beta rises.
  ProbeConfig c;
  c.stores = {"relu"};
  c.m = {16, 32};
  c.trials = 8;
  c.ref_len = 64;
  c.rule_m_max = 65536;
  c.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
  const auto r = run_probe(c);
  const auto &none = r.rules[0].curve, &su = r.rules[1].curve, &qwen = r.rules[2].curve,
             &yarn = r.rules[3].curve;
  ASSERT_EQ(none.size(), 11u);
  for (size_t g = 0; g < su.size(); ++g) {
    EXPECT_DOUBLE_EQ(su[g].isr.median, qwen[g].isr.median);
    // At beta near 20 a few memories dominate the interference, so the RMS over 512 queries is
    // only good to about 20 %; at fixed beta 8 its standard error is about 2 %: 7 % is 3 of
    // them, over 11 lengths.
    EXPECT_NEAR(su[g].isr.rms, su[g].theory_rms, 0.25 * su[g].theory_rms) << su[g].M;
    EXPECT_NEAR(none[g].isr.rms, none[g].theory_rms, 0.07 * none[g].theory_rms) << none[g].M;
  }
  EXPECT_LT(su.back().isr.median, su[1].isr.median);
  EXPECT_LT(yarn.back().isr.median, su.back().isr.median);
  EXPECT_GT(none.back().isr.median, 10 * none.front().isr.median);
}

TEST(Probe, SameSeedGivesIdenticalJson) {
  ProbeConfig c;
  c.stores = {"relu", "softmax"};
  c.m = {64, 256, 4096};
  c.rule_m_max = 4096;
  c.trials = 2;
  EXPECT_EQ(probe_json(run_probe(c)), probe_json(run_probe(c)));
  ProbeConfig other = c;
  other.seed = 1;
  EXPECT_NE(probe_json(run_probe(c)), probe_json(run_probe(other)));
}

TEST(Probe, OnePlanServesTheEstimateAndEveryRun) {
  // Rules none and su read one running sum at M = L (beta_0 both), su others past it; least
  // squares is built directly; chunks end at every M read.
  ProbeConfig c;
  c.stores = {"least_squares", "relu", "softmax"};
  c.m = {64, 256, 2048};
  c.queries = 64;
  c.ref_len = 256;
  c.rule_m_max = 1024;
  c.rules = {BetaRule::kNone, BetaRule::kSu};
  c.trials = 2;
  const ProbePlan plan = plan_probe(c);
  ASSERT_EQ(plan.store_sum.size(), 3u);
  EXPECT_EQ(plan.store_sum[0], -1);
  EXPECT_EQ(plan.rule_sum[0][0], plan.rule_sum[1][0]);
  EXPECT_EQ(plan.rule_sum[0][0], plan.rule_sum[0][2]);  // a fixed beta: one sum, read thrice
  EXPECT_NE(plan.rule_sum[1][1], plan.rule_sum[1][2]);
  EXPECT_EQ(plan.sums.size(), 5u);  // relu, softmax, the rules' beta_0, su at 2L and 4L
  EXPECT_EQ(plan.boundaries, (std::vector<int64_t>{64, 256, 512, 1024, 2048}));
  EXPECT_EQ(plan.end_max, 2048);
  // the estimate holds at least the stream's cached block and the fused path's three (keys and
  // values: 8 MiB each at d = 64), and grows with the queries' sums and similarities
  const double bytes = estimate_probe_ram(plan, nullptr);
  EXPECT_GE(bytes, 4 * 4.0 * 16384 * 128);
  ProbeConfig more = c;
  more.queries = 256;
  EXPECT_GT(estimate_probe_ram(plan_probe(more), nullptr), bytes);
  const std::string once = probe_json(run_probe(plan));
  EXPECT_EQ(probe_json(run_probe(plan)), once);  // a plan is read, never changed, by a run
  EXPECT_EQ(probe_json(run_probe(c)), once);
  c.trials = 0;
  EXPECT_THROW(plan_probe(c), std::invalid_argument);
}

TEST(Probe, AutomaticGridEndsPastCapacity) {
  ProbeConfig c;
  for (const char* name : {"outer_product", "relu2", "softmax"}) {
    const auto grid = store_grid(c, name);
    EXPECT_EQ(grid.front(), 16);
    EXPECT_EQ(grid.back() & (grid.back() - 1), 0);  // powers of 2
  }
  EXPECT_EQ(store_grid(c, "outer_product").back(), 128);         // theory ISR 1.41
  EXPECT_EQ(store_grid(c, "softmax").back(), int64_t{1} << 21);  // past 2 million, ISR 1.28
  EXPECT_EQ(rule_grid(c).front(), 1024);
  EXPECT_EQ(rule_grid(c).back(), int64_t{1} << 22);
}

TEST(Probe, CrossingInterpolatesInLogLog) {
  // ISR = sqrt(M / 100) on the grid: the crossing is at M = 100 exactly.
  std::vector<int64_t> M = {16, 32, 64, 128, 256};
  std::vector<double> isr;
  for (int64_t m : M) isr.push_back(std::sqrt(m / 100.0));
  EXPECT_NEAR(*crossing(M, isr), 100.0, 1e-9);
  EXPECT_FALSE(crossing(M, {0.1, 0.2, 0.3, 0.4, 0.5}).has_value());
  auto s = summarize({4, 1, 3, 2, 5});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(s.rms, std::sqrt(11.0));
  EXPECT_EQ(s.unread, 0);
}

// A saturated head gives some keys a signal weight of 0: their ISR is infinite, and the summary
// says so (the percentiles between two of them are infinite, not inf - inf = NaN).
TEST(Probe, InfiniteIsrsAreCountedNeverNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto s = summarize({inf, 1, inf, 2, inf});
  EXPECT_EQ(s.unread, 3);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_EQ(s.median, inf);
  EXPECT_EQ(s.p90, inf);
  EXPECT_EQ(s.mean, inf);
  EXPECT_EQ(s.rms, inf);
}

TEST(Probe, BadConfigNamesTheFlag) {
  auto message = [](ProbeConfig c) {
    try {
      c.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ProbeConfig c;
  c.d_k = 0;
  EXPECT_NE(message(c).find("--dk 0"), std::string::npos);
  c = {};
  c.trials = 0;
  EXPECT_NE(message(c).find("--trials 0"), std::string::npos);
  c = {};
  c.m = {64, 1};
  EXPECT_NE(message(c).find("--m 1"), std::string::npos);
  c = {};
  c.stores = {"relu", "bogus"};
  EXPECT_NE(message(c).find("'bogus'"), std::string::npos);
  c = {};
  c.beta = -1;
  EXPECT_NE(message(c).find("--beta -1"), std::string::npos);
}

// The probe's JSON (its timing zeroed) at `threads` torch threads.
std::string json_at(const ProbeConfig& c, int threads) {
  TorchThreads n(threads);
  auto r = run_probe(c);
  r.seconds = 0;
  return probe_json(r);
}

// The JSON is the same at one and two threads, to the last digit: the streamed fp32 products split
// only over output rows, and the stores computed directly in fp64 (least squares, whose solve
// otherwise splits its sums by thread count) run on one thread.
TEST(Probe, SameJsonAtOneAndTwoThreads) {
  ProbeConfig c;
  c.stores = {"outer_product", "least_squares", "relu2", "exp3", "softmax"};
  c.m = {32, 64, 128, 256};
  c.trials = 2;
  c.queries = 64;
  c.chunk = 100;
  c.rules = {BetaRule::kSu};
  c.rule_m_max = 2048;
  c.rule_queries = 32;
  auto at = [&](int threads) { return json_at(c, threads); };
  EXPECT_EQ(at(1), at(2));
}

// Past the one block of the test above: six blocks of 16,384 memories, so the fused path's ring of
// three blocks turns twice and the task queue's dependencies cross blocks; the same JSON, digit for
// digit, at 1, 2 and 3 threads and with more threads than the machine has cores.
TEST(Probe, SameJsonOverSixBlocksAtAnyThreadCount) {
  ProbeConfig c;
  c.stores = {"outer_product", "relu2", "softmax"};
  c.d_k = 16;
  c.d_v = 16;
  c.m = {1000, 40000, 6 * MemoryStream::kBlock};
  c.trials = 1;
  c.queries = 40;
  c.rules = {BetaRule::kSu};
  c.ref_len = 16384;
  c.rule_m_max = 6 * MemoryStream::kBlock;
  c.rule_queries = 24;
  auto at = [&](int threads) { return json_at(c, threads); };
  const std::string one = at(1);
  EXPECT_NE(one.find("98304"), std::string::npos) << "the curve stops short of six blocks";
  EXPECT_EQ(one, at(2));
  EXPECT_EQ(one, at(3));
  const int over = static_cast<int>(std::thread::hardware_concurrency()) + 2;
  EXPECT_EQ(one, at(over)) << over << " threads";
}
