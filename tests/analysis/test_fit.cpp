// recall fit: a trained store holds more than the constructed store of its width and no more
// memories than it has parameters; bad flags exit with 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recall/analysis/fit.h"
#include "recall/core/threads.h"
#include "train_test_util.h"

namespace recall {
namespace {

void expect_between_constructed_and_parameters(const std::string& kind) {
  FitConfig c;
  c.kind = fit_kind_from_string(kind);
  c.width = 8;
  c.d_k = 16;
  c.steps = 300;
  c.lr = 3e-2;
  const FitResult r = fit_capacity(c);
  SCOPED_TRACE(fit_table(r));
  ASSERT_TRUE(r.constructed.has_value());
  EXPECT_DOUBLE_EQ(*r.constructed, 8.0);  // theory capacity at d = 16 exceeds the width
  ASSERT_TRUE(r.theory.has_value());
  EXPECT_GT(*r.theory, 8.0);
  EXPECT_GE(static_cast<double>(r.capacity), *r.constructed);
  EXPECT_LE(r.capacity, r.parameters);
  EXPECT_FALSE(r.capped);
  // the bracket is tight: capacity passes and capacity + 1 was tried and failed
  bool next_failed = false;
  for (const auto& t : r.trials) {
    if (t.M == r.capacity) {
      EXPECT_GE(t.recalled, c.target);
    }
    if (t.M == r.capacity + 1) next_failed = t.recalled < c.target;
  }
  EXPECT_TRUE(next_failed);
}

TEST(Fit, Relu2CapacityLiesBetweenConstructedAndParameters) {
  expect_between_constructed_and_parameters("mlp-relu2");
}

TEST(Fit, LearnedKvCapacityLiesBetweenConstructedAndParameters) {
  expect_between_constructed_and_parameters("learned_kv");
}

TEST(Fit, ParametersAndTheoryPerKind) {
  FitConfig c;
  c.width = 10;
  c.d_k = 64;
  auto set = [&](const char* kind) {
    c.kind = fit_kind_from_string(kind);
    return c;
  };
  EXPECT_EQ(set("mlp-relu2").parameters(), 2 * 10 * 64);
  EXPECT_EQ(set("linear").parameters(), 2 * 10 * 64);
  EXPECT_EQ(set("linear").constructed_spec()->name(), "linear");
  EXPECT_EQ(set("glu-relu").parameters(), 3 * 10 * 64);
  EXPECT_FALSE(set("glu-relu").constructed_spec());  // no theory: n/a
  EXPECT_FALSE(set("mlp-gelu").constructed_spec());
  EXPECT_EQ(set("swiglu").kind, fit_kind_from_string("glu-silu"));
  EXPECT_EQ(set("glu-silu").constructed_spec()->name(), "swiglu");
  EXPECT_EQ(set("mlp-relu").constructed_spec()->name(), "relu");
  EXPECT_EQ(set("mlp-relu3").constructed_spec()->name(), "relu3");
  // learned_kv: N key and value slots, and the query and output projections (d x d each)
  EXPECT_EQ(set("learned_kv").parameters(), 2 * 10 * 64 + 2 * 64 * 64);
  EXPECT_EQ(to_string(fit_kind_from_string("learned_kv")), "learned_kv");
  EXPECT_THROW(fit_kind_from_string("gelu"), std::invalid_argument);
}

// Each kind, trained, holds at least what the constructed store of the same width holds,
// min(N, theory capacity) = N here (the theory's capacity at d = 16 exceeds N = 8 for every weight
// function it has); a kind without a theory is held to N too. Measured (seed 0): linear 17, relu
// 15, relu2 14, relu3 11, gelu 15, glu-silu 26, glu-relu 13, glu-relu2 20, glu-gelu 26,
// learned_kv 22.
TEST(Fit, EveryKindHoldsAtLeastTheConstructedStoreOfItsWidth) {
  TorchThreads one(1);  // products of 8 x 16: threads only add their synchronisation
  for (const auto& name : feed_forward_names()) {
    FitConfig c;
    c.kind = fit_kind_from_string(name);
    c.width = 8;
    c.d_k = 16;
    c.steps = 300;
    c.lr = 3e-2;
    const FitResult r = fit_capacity(c);
    SCOPED_TRACE(fit_table(r));
    EXPECT_EQ(to_string(r.config.kind), name);
    EXPECT_EQ(r.theory.has_value(), c.constructed_spec().has_value()) << name;
    const double reference = r.constructed ? *r.constructed : static_cast<double>(c.width);
    if (r.constructed) {
      EXPECT_DOUBLE_EQ(*r.constructed, 8.0) << name;
    }
    EXPECT_GE(static_cast<double>(r.capacity), reference) << name;
    EXPECT_LE(r.capacity, r.parameters) << name;
    EXPECT_FALSE(r.capped) << name;
    if (!r.theory) {
      EXPECT_NE(fit_table(r).find("n/a"), std::string::npos) << name;
    }
  }
}

TEST(Fit, CliWritesJson) {
  test::TempDir dir;
  const auto r = test::run_cli({"fit", "--kind", "mlp-relu", "--width", "4", "--dk", "8", "--steps",
                                "100", "--json", dir / "fit.json"},
                               dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fitted capacity"), std::string::npos);
  const auto j = nlohmann::json::parse(test::read_text(dir / "fit.json"));
  EXPECT_EQ(j["config"]["kind"], "mlp-relu");
  EXPECT_EQ(j["parameters"], 64);
  EXPECT_EQ(j["constructed_capacity"], 4.0);
  EXPECT_GE(j["capacity"].get<int64_t>(), 1);
  EXPECT_LE(j["capacity"].get<int64_t>(), 64 * 4);
}

TEST(Fit, CliRejectsBadFlags) {
  test::TempDir dir;
  const test::UsageCases cases = {
      {{"fit", "--kind", "gelu"}, "--kind gelu"},
      {{"fit", "--width", "0"}, "--width 0"},
      {{"fit", "--dk", "1"}, "--dk 1"},
      {{"fit", "--target", "1.5"}, "--target 1.5"},
      {{"fit", "--json", dir / "no/such/dir/f.json"}, "--json"},
  };
  test::expect_usage_errors(cases, dir);
}

}  // namespace
}  // namespace recall
