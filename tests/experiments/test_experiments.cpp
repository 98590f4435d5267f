// The experiments' pieces against independent computations, and the essay's small identities: one
// gradient step on a linear layer is an outer-product (delta-rule) write, and the per-M ISR of the
// outer-product and least-squares stores measured by the probe follows the closed forms.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "recall/analysis/probe.h"
#include "recall/analysis/probe_output.h"
#include "recall/experiments/experiments.h"
#include "recall/models/block.h"
#include "recall/stores/outer_product.h"
#include "train_test_util.h"

namespace recall {
namespace {

// From W = 0, one full-batch gradient step of lr 1 on 1/2 sum_i || W k_i - v_i ||^2 gives
// W = sum_i v_i k_i^T: the outer-product store written with the same keys and values. From any W
// the step adds the outer product of the residuals v_i - W k_i (the delta rule).
TEST(Identities, OneGradientStepOnALinearLayerIsAnOuterProductWrite) {
  torch::manual_seed(3);
  const int64_t M = 5, dk = 6, dv = 4;
  auto keys = torch::randn({M, dk}, torch::kFloat64),
       values = torch::randn({M, dv}, torch::kFloat64);
  torch::nn::Linear layer(torch::nn::LinearOptions(dk, dv).bias(false));
  layer->to(torch::kFloat64);
  auto step = [&] {
    layer->zero_grad();
    (0.5 * (layer(keys) - values).square().sum()).backward();
    torch::NoGradGuard no_grad;
    layer->weight -= layer->weight.grad();  // lr 1
  };
  {
    torch::NoGradGuard no_grad;
    layer->weight.zero_();
  }
  step();
  OuterProductStore store(OuterProductStoreOptions(dk, dv));
  store->to(torch::kFloat64);
  store->write(keys, values);
  auto x = torch::randn({7, dk}, torch::kFloat64);
  EXPECT_TRUE(torch::allclose(layer(x), store->forward(x), 1e-12, 1e-12));
  // from a non-zero W: the change is sum_i (v_i - W k_i) k_i^T
  const auto before = layer->weight.detach().clone();
  const auto residual = values - keys.mm(before.t());  // (M, dv)
  step();
  EXPECT_TRUE(
      torch::allclose(layer->weight.detach() - before, residual.t().mm(keys), 1e-12, 1e-12));
}

// The essay's per-M ISR table at d = 64: outer product E[ISR^2] = (M - 1) / d exactly for unit keys
// (E[s^2] = 1/d); least squares 0 up to M = d and M / d - 1 above (exact for Gaussian keys, close
// for unit ones).
TEST(Identities, ProbeIsrOfOuterProductAndLeastSquaresFollowsTheClosedForms) {
  ProbeConfig pc;
  pc.stores = {"outer_product", "least_squares"};
  pc.m = {16, 64, 256, 1024, 4096, 16384};
  pc.trials = 1;
  pc.queries = 256;
  pc.rules = {};
  const auto r = run_probe(pc);
  ASSERT_EQ(r.stores.size(), 2u);
  const double d = 64;
  for (size_t i = 0; i < pc.m.size(); ++i) {
    const double M = static_cast<double>(pc.m[i]);
    SCOPED_TRACE(pc.m[i]);
    const double outer = std::sqrt((M - 1) / d);
    EXPECT_NEAR(r.stores[0].curve[i].isr.rms / outer, 1.0, 0.08);
    if (M <= d) {
      EXPECT_LT(r.stores[1].curve[i].isr.rms, 1e-3);
    } else {
      EXPECT_NEAR(r.stores[1].curve[i].isr.rms / std::sqrt(M / d - 1), 1.0, 0.1);
    }
  }
}

TEST(Experiments, FittedSlopeAndStepsToAccuracy) {
  EXPECT_NEAR(fitted_slope({1, 2, 3, 4}, {3, 5, 7, 9}), 2.0, 1e-12);
  EXPECT_THROW(fitted_slope({1, 1}, {2, 3}), std::invalid_argument);
  test::TempDir dir;
  const std::string f = dir.path().string();
  test::write_text(dir / "metrics.jsonl",
                   "{\"step\": 50, \"loss\": 1.0}\n"
                   "{\"step\": 100, \"eval\": {\"accuracy\": 0.5}}\n"
                   "{\"step\": 200, \"eval\": {\"accuracy\": 0.995}}\n"
                   "{\"step\": 300, \"eval\": {\"accuracy\": 1.0}}\n");
  EXPECT_EQ(steps_to_accuracy(f, 0.99), std::optional<int64_t>(200));
  EXPECT_EQ(steps_to_accuracy(f, 0.999), std::optional<int64_t>(300));
  EXPECT_FALSE(steps_to_accuracy(f, 1.5).has_value());
}

// The facts experiment's plateau test, by hand: 2 % over one doubling is 2 %; 21 % over four
// times the steps is 10 % per doubling; glu-silu's last link (2.624 -> 2.674 bits per parameter
// from 196,608 to 393,216 steps) is 1.9 %, under the 3 % plateau line.
TEST(Experiments, GainPerDoubling) {
  EXPECT_NEAR(*gain_per_doubling(100, 1.0, 200, 1.02), 0.02, 1e-12);
  EXPECT_NEAR(*gain_per_doubling(100, 1.0, 400, 1.21), 0.10, 1e-12);
  EXPECT_NEAR(*gain_per_doubling(100, 2.0, 150, 2.0 * std::sqrt(1.5)), std::sqrt(2.0) - 1, 1e-12);
  EXPECT_NEAR(*gain_per_doubling(196608, 2.624, 393216, 2.674), 0.019, 1e-3);
  EXPECT_LT(*gain_per_doubling(196608, 2.624, 393216, 2.674), 0.03);
  EXPECT_NEAR(*gain_per_doubling(100, 1.0, 200, 0.9), -0.1, 1e-12);  // a loss is a negative gain
  EXPECT_FALSE(gain_per_doubling(100, -0.1, 200, 0.5).has_value());  // bits not yet positive
  EXPECT_FALSE(gain_per_doubling(100, 0.5, 100, 0.6).has_value());   // no more steps
}

// Under 3 % a doubling is the plateau, and so is a fall: more training no longer raises it.
TEST(Experiments, PlateauReached) {
  EXPECT_TRUE(plateau_reached(0.019));  // glu-silu's last link
  EXPECT_TRUE(plateau_reached(0.029));
  EXPECT_FALSE(plateau_reached(0.031));
  EXPECT_FALSE(plateau_reached(0.078));  // glu-silu from 768 to 1,536 exposures
  EXPECT_TRUE(plateau_reached(-0.05));
  EXPECT_FALSE(plateau_reached(std::nullopt));  // bits stored not yet positive
}

TEST(Experiments, RejectsAnUnknownNameOrNoOut) {
  test::TempDir dir;
  test::expect_usage_errors(
      {{{"experiment", "bogus", "--out", dir / "x"}, "bogus"},
       {{"experiment", "scaling"}, "--out"},
       {{"experiment", "lm", "--out", dir / "x", "--more-exposures", "256"},
        "only the facts experiment"},
       {{"experiment", "facts", "--out", dir / "x", "--more-kinds", "mlp"}, "names among mlp-relu"},
       {{"experiment", "facts", "--out", dir / "x", "--more-kinds", "all,linear"}, "'all' alone"},
       {{"experiment", "facts", "--out", dir / "x", "--more-exposures", "512,256"},
        "must be ascending"},
       {{"experiment", "facts", "--out", dir / "x", "--quick", "--more-exposures", "64"},
        "above the ranking's 64"},
       {{"experiment", "theory", "--out", dir / "x", "--steps", "5"}, "trains nothing"}},
      dir);
}

// The rows are the report's sections in order, each found by its name; a row run by name writes
// what its command writes (theory: recall theory's JSON at d_k = 64, beta = 8).
TEST(Experiments, EveryRowByNameAndTheTheoryRowAsItsCommand) {
  const auto& rows = experiment_rows();
  ASSERT_EQ(rows.size(), 11u);  // the report's sections 1 to 11
  EXPECT_EQ(rows.front().name, "theory");
  EXPECT_EQ(rows.back().name, "extrapolation");
  for (const auto& row : rows) {
    EXPECT_EQ(&experiment_row(row.name), &row);
    EXPECT_FALSE(row.claim.empty()) << row.name;
  }
  EXPECT_THROW(experiment_row("bogus"), std::invalid_argument);
  test::TempDir dir;
  ExperimentConfig c;
  c.name = "theory";
  c.out_dir = dir / "theory";
  c.run.progress = false;
  const ExperimentResult r = run_experiment(c);
  EXPECT_EQ(r.title, "Capacity of random stores: theory");
  EXPECT_EQ(nlohmann::json::parse(test::read_text(c.out_dir + "/" + r.json)),
            nlohmann::json::parse(theory_json(64, 8.0)));
  EXPECT_NE(r.markdown.find("| `softmax` |"), std::string::npos) << r.markdown;
}

// Each row's experiment is a measurement and a writer, in files named after it (README, "Adding an
// experiment"): experiment_<name>.h declares what it found and its writer, experiment_<name>.cpp
// measures, and experiment_<name>_output.cpp writes its files and its section. No measuring file
// (any experiment_*.cpp but the writers) builds a section or writes the experiment's files.
TEST(Experiments, EveryRowIsAMeasurementAndAWriterInFilesNamedAfterIt) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(test::source_dir()) / "src" / "experiments";
  int measuring = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string file = entry.path().filename().string();
    const auto ends_with = [&](const std::string& end) {
      return file.size() >= end.size() &&
             file.compare(file.size() - end.size(), end.size(), end) == 0;
    };
    if (file.rfind("experiment_", 0) != 0 || !ends_with(".cpp") || ends_with("_output.cpp"))
      continue;
    ++measuring;
    const std::string measure = test::read_text(entry.path().string());
    for (const char* writes : {"markdown", "write_file_atomic", "write_json", "formats/plot.h"})
      EXPECT_EQ(measure.find(writes), std::string::npos) << file << ": " << writes;
  }
  EXPECT_GE(measuring, static_cast<int>(experiment_rows().size()));
  for (const auto& row : experiment_rows()) {
    std::string name = row.name, found;
    std::replace(name.begin(), name.end(), '-', '_');
    for (size_t i = 0; i < name.size(); ++i)  // facts_kv: FactsKvFound
      if (name[i] != '_')
        found += i == 0 || name[i - 1] == '_' ? static_cast<char>(std::toupper(name[i])) : name[i];
    const std::string base = (folder / ("experiment_" + name)).string();
    ASSERT_TRUE(fs::exists(base + ".h") && fs::exists(base + ".cpp") &&
                fs::exists(base + "_output.cpp"))
        << base;
    EXPECT_NE(test::read_text(base + ".h").find("struct " + found + "Found {"), std::string::npos)
        << base << ".h";
    EXPECT_NE(test::read_text(base + "_output.cpp")
                  .find("ExperimentResult write_" + name + "(const Experiment& experiment"),
              std::string::npos)
        << base << "_output.cpp";
  }
}

// The facts sweep at a few steps a point, then kinds trained again at the exposures given: each
// chain starts at the sweep's own point for that kind and table, and its last link is stated as a
// gain per doubling of the steps.
TEST(FactsExperiment, TrainsKindsLongerAtTheGivenExposures) {
  test::TempDir dir;
  ExperimentConfig c;
  c.name = "facts";
  c.out_dir = dir / "facts";
  c.quick = true;
  c.run.progress = false;
  c.steps = 256;
  c.more_exposures = {128};  // 4096 facts x 128 / 512 = 1024 steps
  c.more_kinds = {"linear", "glu-silu"};
  const ExperimentResult r = run_experiment(c);
  const auto j = nlohmann::json::parse(test::read_text(c.out_dir + "/" + r.json));
  const auto& more = j.at("more_training");
  ASSERT_EQ(more.size(), 2u);
  // in the ranking's order: glu-silu stores more than the linear map
  EXPECT_EQ(more[0].at("kind"), "glu-silu");
  EXPECT_EQ(more[1].at("kind"), "linear");
  for (const auto& k : more) {
    const auto& points = k.at("points");
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points[0].at("steps"), 256);
    EXPECT_EQ(points[1].at("steps"), 1024);
    EXPECT_EQ(points[1].at("exposures_per_fact"), 128.0);
    EXPECT_EQ(k.at("facts"), 4096);
    double sweep_bpp = -1;  // the chain's first point is the sweep's own run
    for (const auto& p : j.at("points"))
      if (p.at("kind") == k.at("kind") && p.at("facts") == 4096)
        sweep_bpp = p.at("bits_per_param").get<double>();
    EXPECT_EQ(points[0].at("bits_per_param").get<double>(), sweep_bpp);
    const double b0 = points[0].at("bits_per_param"), b1 = points[1].at("bits_per_param");
    EXPECT_GT(b0, 0.0);
    EXPECT_GT(b1, b0);  // four times the steps store more
    EXPECT_NEAR(k.at("last_gain_per_doubling").get<double>(), std::sqrt(b1 / b0) - 1, 1e-12);
    EXPECT_GT(std::sqrt(b1 / b0) - 1, 0.03);  // far from the plateau after 1,024 steps
    EXPECT_FALSE(k.at("plateau").get<bool>());
  }
}

}  // namespace
}  // namespace recall
