// recall report --quick through the binary: every section, plot and JSON file is written, and the
// numbers in them are the experiments' (theory, a trained mqar model, fits between the constructed
// store and the parameter count, facts above chance).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "recall/analysis/probe_output.h"
#include "recall/stores/theory.h"
#include "recall/train/task.h"
#include "train_test_util.h"

namespace recall {
namespace {

// At 2 threads on any machine: the trained sections' bounds below were measured at 2 threads, and
// another thread count splits the GEMMs' sums otherwise (another trajectory).
TEST(Report, QuickWritesEverySectionPlotAndJson) {
  test::TempDir dir;
  const auto r =
      test::run_cli({"--threads", "2", "report", "--out", dir / "rep", "--quick", "--quiet"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("report.md"), std::string::npos) << r.out;
  const std::string md = test::read_text(dir / "rep/report.md");
  for (const char* section :
       {"# recall report (quick)", "## 1. Capacity of random stores", "## 2. The probe",
        "## 3. Trained attention at longer contexts", "## 4. Which heads recall",
        "## 5. Trained stores against constructed ones", "## 6. Facts", "## 7. Sharpness",
        "## 8. Capacity scaling laws", "## 9. Facts to saturation", "## 10. Learned key-values",
        "## 11. Length extrapolation"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
  for (const char* plot :
       {"probe.png", "extrapolate.png", "inspect.png", "fit.png", "beta_sweep.png", "scaling.png",
        "facts_sweep.png", "lm.png", "extrapolation.png", "extrapolation_store.png",
        "extrapolation_store_isr.png"}) {
    EXPECT_EQ(test::read_text(dir / "rep/" + std::string(plot)).substr(1, 3), "PNG") << plot;
    EXPECT_NE(md.find(fmt::format("]({})", plot)), std::string::npos) << plot;
  }
  // theory: the same numbers as recall theory
  const auto theory = nlohmann::json::parse(test::read_text(dir / "rep/theory.json"));
  EXPECT_EQ(theory, nlohmann::json::parse(theory_json(64, 8.0)));
  const auto softmax = theory_capacity(StoreSpec::parse("softmax", 8.0), 64);
  EXPECT_NE(md.find(fmt::format("| {:.6g} |", *softmax)), std::string::npos);
  // the probe's measured outer-product capacity is near d
  const auto probe = nlohmann::json::parse(test::read_text(dir / "rep/probe.json"));
  EXPECT_EQ(probe["config"]["trials"], 2);
  // every store's measured capacity (where the RMS ISR crosses 1) within 15 % of the exact theory
  // (2 trials; the default's 4 trials give 0.95 to 1.04)
  for (const auto& s : probe["stores"]) {
    const auto& c = s["capacity"];
    if (c["theory"].is_null()) continue;
    EXPECT_NEAR(c["rms"].get<double>() / c["theory"].get<double>(), 1.0, 0.15) << s["store"];
  }
  // mqar-extrapolate, two seeds under none (read under none, qwen and yarn) and two under su:
  // every run recalls at its training length, and under none and su at 16x with the pairs
  // growing with the length (the preset learns for every seed; no run may be left out)
  const auto ex = nlohmann::json::parse(test::read_text(dir / "rep/extrapolate.json"));
  int at_train = 0, at_16 = 0;
  for (const auto& p : ex["points"]) {
    if (p["multiple"] == 1) {
      EXPECT_GE(p["accuracy"].get<double>(), 0.99) << p;
      ++at_train;
    }
    if (p["multiple"] == 16 && p["rule"] == p["trained_rule"]) {
      EXPECT_EQ(p["pairs"], 128) << p;  // 8 x 16 distinct keys of the 255
      EXPECT_GE(p["accuracy"].get<double>(), 0.9) << p;
      ++at_16;
    }
  }
  EXPECT_EQ(at_train, 2 * 3 + 2);
  EXPECT_EQ(at_16, 2 * 2);
  EXPECT_NE(md.find("Runs left out, not having learned at 1x (accuracy): none."),
            std::string::npos);
  const auto inspect = nlohmann::json::parse(test::read_text(dir / "rep/inspect.json"));
  // the fixed-seed run recalls with 4 of its 8 heads here (2 threads); a thread count that splits
  // the batches otherwise trains other bits, so one head either way is allowed
  int recalling = 0;
  for (const auto& h : inspect["attention"][0]["heads"]) recalling += h["recalls"].get<bool>();
  EXPECT_EQ(inspect["attention"][0]["heads"].size(), 8u);
  EXPECT_GE(recalling, 3);
  EXPECT_LE(recalling, 5);
  // every fit holds at least the constructed store and at most one memory per parameter
  const auto fits = nlohmann::json::parse(test::read_text(dir / "rep/fit.json"));
  ASSERT_EQ(fits.size(), 4u);
  for (const auto& f : fits) {
    EXPECT_GE(f["capacity"].get<double>(), f["constructed_capacity"].get<double>()) << f;
    EXPECT_LE(f["capacity"].get<double>(), f["parameters"].get<double>()) << f;
  }
  const auto facts = nlohmann::json::parse(test::read_text(dir / "rep/facts.json"));
  ASSERT_EQ(facts.size(), 2u);
  // chance is one object in facts_objects; the trained stores are well above it (0.117 and 0.151
  // here, against 1/32)
  const double chance =
      1.0 / static_cast<double>(train_config_from_file("facts-tiny").task.facts_objects);
  for (const auto& f : facts) EXPECT_GT(f["eval"]["accuracy"].get<double>(), 2.5 * chance) << f;
  EXPECT_EQ(facts[0]["parameters"], facts[1]["parameters"]);  // equal parameter counts
  // the sharpness sweep at initialisation, where the logits are small and iid: a softmax of
  // logits of variance s^2 falls below the uniform entropy by s^2 / 2 to leading order, so the
  // deficit quadruples when attn_scale doubles (measured 3.96 to 4.03); and the gradient, which
  // the scale reaches only at second order there, is the same at every scale up to 1 (within
  // 0.02 % here)
  const auto beta = nlohmann::json::parse(test::read_text(dir / "rep/beta_sweep.json"));
  const auto& points = beta["points"];
  ASSERT_EQ(points.size(), 6u);
  auto deficit = [](const nlohmann::json& p) {
    return p["entropy_uniform"].get<double>() - p["entropy_init"].get<double>();
  };
  for (size_t i = 1; i < points.size(); ++i) {
    ASSERT_DOUBLE_EQ(points[i]["attn_scale"].get<double>(),
                     2 * points[i - 1]["attn_scale"].get<double>());
    EXPECT_NEAR(deficit(points[i]) / deficit(points[i - 1]), 4.0, 0.4) << points[i];
    if (points[i]["attn_scale"].get<double>() <= 1.0) {
      EXPECT_NEAR(
          points[i]["grad_norm_init"].get<double>() / points[0]["grad_norm_init"].get<double>(),
          1.0, 0.01)
          << points[i];
    }
  }
  // the theory slopes of the essay's laws, and the probe's beside them
  const auto scaling = nlohmann::json::parse(test::read_text(dir / "rep/scaling.json"));
  std::map<std::string, nlohmann::json> fit;
  for (const auto& f : scaling["fits"]) fit[f["store"].get<std::string>()] = f;
  EXPECT_NEAR(fit.at("outer_product")["slope"].get<double>(), 1.0, 0.05);
  EXPECT_NEAR(fit.at("relu2")["slope"].get<double>(), 2.0, 0.1);
  EXPECT_NEAR(fit.at("relu2")["measured"].get<double>(), 2.0, 0.2);
  EXPECT_NEAR(fit.at("softmax")["slope"]["a"].get<double>(), 2.0, 0.1);
  // facts: every kind at the same parameter count, and something stored
  const auto sweep = nlohmann::json::parse(test::read_text(dir / "rep/facts_sweep.json"));
  ASSERT_GE(sweep["points"].size(), 7u);
  for (const auto& p : sweep["points"]) EXPECT_EQ(p["params"], sweep["points"][0]["params"]) << p;
  // bits stored are facts x (log2 objects - cross-entropy in bits), the information about the
  // objects that the model holds: the best kind's run, scored again by `recall eval` (its loss in
  // nats), holds what the report says, and at the plateau most of the table's information (0.709
  // bits a parameter here, of 0.997)
  const auto& top = sweep["plateau"][0];
  const std::string best_run = fmt::format(
      "{}/rep/runs/facts/{}-{}-{}steps", dir.path().string(), top["kind"].get<std::string>(),
      top["facts"].get<int64_t>(), top["steps"].get<int64_t>());
  const auto scored = test::run_cli({"eval", "--checkpoint", best_run}, dir);
  ASSERT_EQ(scored.code, 0) << scored.err;
  const double ce_bits = nlohmann::json::parse(scored.out)["loss"].get<double>() / std::log(2.0);
  const double objects = sweep["objects"].get<double>(), stored = top["facts"].get<double>();
  const double held_bits = stored * (std::log2(objects) - ce_bits);
  EXPECT_NEAR(top["bits_per_param"].get<double>() * top["params"].get<double>(), held_bits,
              1e-4 * held_bits)
      << top << scored.out;
  EXPECT_GE(held_bits, 0.5 * stored * std::log2(objects)) << top;
  // quick: the best kind at the largest table, then with twice the exposures
  ASSERT_EQ(sweep["more_training"].size(), 1u);
  const auto& more = sweep["more_training"][0]["points"];
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(more[1]["steps"].get<int64_t>(), 2 * more[0]["steps"].get<int64_t>());
  EXPECT_EQ(sweep["more_training"][0]["kind"], sweep["plateau"][0]["kind"]);
  const auto lm = nlohmann::json::parse(test::read_text(dir / "rep/lm.json"));
  ASSERT_EQ(lm["runs"].size(), 4u);
  // an untrained model predicts uniformly over the corpus's characters: log2(vocab) bits each;
  // 150 steps of every kind are at least 2 bits below that
  const double uniform =
      std::log2(static_cast<double>(make_task(train_config_from_file("text-tiny"))->vocab_size()));
  for (const auto& r : lm["runs"]) {
    EXPECT_LT(r["val_bits_per_char"].get<double>(), uniform - 2.0) << r;
    EXPECT_GT(r["tokens_per_s"].get<double>(), 0.0) << r;
  }
  // the essay's law on random stores (the probe: ISR ~ sqrt(M) at a fixed beta, flat under su),
  // and its mechanism on the trained heads: growing beta with ln M lowers their ISR exponent
  const auto ext = nlohmann::json::parse(test::read_text(dir / "rep/extrapolation.json"));
  std::map<std::string, double> trained_b, probe_b;
  for (const auto& f : ext["fits"]) {
    if (f["variant"] != "grow" || f["b"].is_null()) continue;
    const std::string rule = f["rule"];
    trained_b[rule] = f["b"].get<double>();
    if (!f["probe_b"].is_null()) probe_b[rule] = f["probe_b"].get<double>();
  }
  ASSERT_TRUE(trained_b.count("none") && trained_b.count("su") && probe_b.count("none") &&
              probe_b.count("su"));
  EXPECT_NEAR(probe_b["none"], 0.5, 0.2);
  EXPECT_NEAR(probe_b["su"], 0.0, 0.15);
  EXPECT_LT(trained_b["su"], trained_b["none"] - 0.2);
  // The essay's mechanism in a trained model, end to end: mqar-store (unit q and k, beta = 6),
  // seed 0, trained under none and under su, read at 64x its length with the pairs growing to 512.
  // Both learn at 1x; at 64x the store overflows without the rule and holds with it. Measured over
  // seeds 0 to 4 at 1 and at 2 threads (docs/science.md §8), ten runs per rule: none 0.025 to 0.350
  // at 64x, su 0.889 to 1.000 (seed 0: 1.000 both times). The bounds, none < 0.5 and su > 0.85,
  // hold for every run measured, so a machine whose GEMM rounds otherwise (another trajectory)
  // keeps them.
  const auto store = nlohmann::json::parse(test::read_text(dir / "rep/extrapolation_store.json"));
  std::map<std::pair<std::string, int64_t>, nlohmann::json> own;  // (rule, multiple) -> point
  for (const auto& p : store["points"])
    if (p["rule"] == p["trained_rule"]) own[{p["rule"], p["multiple"].get<int64_t>()}] = p;
  ASSERT_EQ(own.size(), 2u * 3u) << store["points"];  // none and su at 1x, 16x, 64x: none left out
  EXPECT_EQ(own.at({"none", 64})["pairs"], 512);
  EXPECT_GE(own.at({"none", 1})["accuracy"].get<double>(), 0.99);
  EXPECT_GE(own.at({"su", 1})["accuracy"].get<double>(), 0.99);
  EXPECT_LT(own.at({"none", 64})["accuracy"].get<double>(), 0.5);  // chance is 1/256
  EXPECT_GT(own.at({"su", 64})["accuracy"].get<double>(), 0.85);
  // the rule-less store overflows where su holds, and the forecast from 1x sits beside what the
  // long prompts measured
  ASSERT_TRUE(store["target"].is_object()) << store["curves"];
  EXPECT_TRUE(store["target"]["met"].get<bool>()) << store["target"];
  // At 1x the forecast is the ISR of the same heads at the same length: read on recall forecast's
  // 2 batches of prompts, against inspect's 1 (when written: 0.4 % to 3.2 % apart in the default
  // report, the stores and the held-out content-only runs). A head read in place of another is
  // off by far more than 10 %.
  const auto expect_1x_read = [&](const char* key) {
    bool none = false;
    for (const auto& f : store[key])
      if (f["trained_rule"] == "none" && f["rule"] == "none") {
        none = true;
        EXPECT_NEAR(f["forecast_isr"][0].get<double>(), f["measured_isr"][0].get<double>(),
                    0.1 * f["measured_isr"][0].get<double>())
            << f;
      }
    EXPECT_TRUE(none) << store[key];
  };
  expect_1x_read("forecast");
  for (const auto& f : store["forecast"]) {  // the random store beside the rule-less row
    if (f["trained_rule"] == "none" && f["rule"] == "none") {
      EXPECT_FALSE(f["random_store_isr"][0].is_null()) << f;
    }
  }
  // held out: the same forecast on the first part's rule-less content-only runs
  expect_1x_read("forecast_held_out");
  // The prescription, forecast from 1x, then measured at 64x: on the forecast accuracy, c holds
  // accuracy >= 0.95 and c/2 does not (when written, on 2 threads: c 0.148, accuracy 0.993 at c,
  // 0.043 above the level, and 0.882 at c/2, 0.068 below it).
  ASSERT_EQ(store["prescription"].size(), 1u) << store["prescription"];
  const auto& by_accuracy = store["prescription"][0]["by_accuracy"];
  ASSERT_FALSE(by_accuracy["c"].is_null()) << by_accuracy;
  EXPECT_GT(by_accuracy["c"].get<double>(), 0.0) << by_accuracy;
  EXPECT_GE(by_accuracy["accuracy_at_c"].get<double>(), 0.95) << by_accuracy;
  EXPECT_LT(by_accuracy["accuracy_at_half_c"].get<double>(), 0.95) << by_accuracy;
}

TEST(Report, RejectsAnOutThatIsAFile) {
  test::TempDir dir;
  test::write_text(dir / "file", "x");
  test::expect_usage_errors({{{"report", "--out", dir / "file"}, "--out"}, {{"report"}, "--out"}},
                            dir);
}

}  // namespace
}  // namespace recall
