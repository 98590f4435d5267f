#include "recall/experiments/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "recall/analysis/extrapolate.h"
#include "recall/analysis/fit.h"
#include "recall/analysis/inspect.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/core/signals.h"
#include "recall/experiments/experiments.h"
#include "recall/experiments/extrapolate_runs.h"
#include "recall/formats/plot.h"
#include "recall/stores/theory.h"
#include "recall/train/trainer.h"

namespace recall {

namespace fs = std::filesystem;

ReportConfig ReportConfig::make(const std::string& out_dir, bool quick) {
  ReportConfig c;
  c.out_dir = out_dir;
  c.quick = quick;
  if (quick) {
    c.probe_trials = 2;
    // mqar-extrapolate forms its recall within a few hundred steps for every seed: quick keeps
    // the steps and drops seeds, rules and lengths
    c.mqar_seeds = 2;
    c.mqar_rules = {BetaRule::kNone, BetaRule::kSu};
    c.extrapolate_lengths = {1, 4, 16, 64};
    c.inspect_lengths = {1, 4, 16};
    c.store_seeds = 1;
    c.store_rules = {BetaRule::kNone, BetaRule::kSu};
    c.store_lengths = {1, 16, 64};
    c.fit_widths = {8};
    c.fit_steps = 400;
    c.facts_steps = 1500;
  }
  return c;
}

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::string out = "| " + fmt::format("{}", fmt::join(header, " | ")) + " |\n|";
  for (size_t i = 0; i < header.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& r : rows) out += "| " + fmt::format("{}", fmt::join(r, " | ")) + " |\n";
  return out;
}

namespace {

// A Markdown table: a header row, then rows of the same width.
struct MdTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string str() const { return markdown_table(header, rows); }
};

std::string num(std::optional<double> x, const char* f = "{:.4g}") {
  return x ? fmt::format(fmt::runtime(f), *x) : "—";
}

// The essay's figures for d_k = 64, beta = 8 (its sections on each store).
const char* essay_capacity(const std::string& store) {
  static const std::map<std::string, const char*> essay = {
      {"outer_product", "~64"}, {"least_squares", "~128"}, {"relu", "~128"},
      {"relu2", "~2,700"},      {"swiglu", "~relu2"},      {"exp2", "~40"},
      {"exp3", "~450"},         {"exp4", "~3,100"},        {"softmax", "~1.2e6"}};
  auto it = essay.find(store);
  return it == essay.end() ? "—" : it->second;
}

class Report {
 public:
  explicit Report(const ReportConfig& c) : config_(c), t0_(std::chrono::steady_clock::now()) {}

  void step(const std::string& what) {
    if (config_.run.stop)
      if (int s = config_.run.stop(0)) throw StopRequested(s, "before " + what);
    ++step_;
    if (config_.run.progress)
      fmt::print(stderr, "report [{}/11] {} ({:.0f} s so far)\n", step_, what, elapsed());
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  std::string path(const std::string& name) const {
    return (fs::path(config_.out_dir) / name).string();
  }
  std::string run_dir(const std::string& name) const {
    return (fs::path(config_.out_dir) / "runs" / name).string();
  }

  std::string theory() {
    step("theory");
    MdTable t{{"store", "sphere keys (exact)", "Gaussian shortcut", "essay"}, {}};
    for (const auto& name : default_store_names()) {
      const auto spec = StoreSpec::parse(name, 8.0);
      t.rows.push_back({"`" + name + "`", num(theory_capacity(spec, 64), "{:.6g}"),
                        num(theory_capacity(spec, 64, KeyLaw::kGaussian), "{:.6g}"),
                        essay_capacity(name)});
    }
    write_file_atomic(path("theory.json"), theory_json(64, 8.0));
    return "## 1. Capacity of random stores: theory\n\n"
           "M where E[ISR^2] = 1 for keys and values uniform on the unit sphere, d_k = 64, "
           "beta = 8 (`recall theory`). The exact column integrates the similarity density of "
           "unit keys; the Gaussian shortcut (s ~ N(0, 1/d)) is the essay's.\n\n" +
           t.str();
  }

  std::string probe() {
    step(fmt::format("probe ({} trials)", config_.probe_trials));
    ProbeConfig probing;
    probing.trials = config_.probe_trials;
    const ProbeResult r = run_probe(probing);
    write_file_atomic(path("probe.json"), probe_json(r));
    write_probe_plot(r, path("probe.png"));
    MdTable t{
        {"store", "median crossing", "trial range", "RMS crossing ± sem", "theory", "RMS / theory"},
        {}};
    for (const auto& s : r.stores) {
      const auto& k = s.capacity;
      t.rows.push_back(
          {"`" + s.store + "`", num(k.median),
           k.low && k.high ? fmt::format("[{:.4g}, {:.4g}]", *k.low, *k.high) : "—",
           k.rms ? fmt::format("{:.4g} ± {:.2g}", *k.rms, k.rms_sem.value_or(0.0)) : "—",
           num(k.theory), k.rms && k.theory ? fmt::format("{:.3f}", *k.rms / *k.theory) : "—"});
    }
    // the rules' curves at M = L, 16 L, 256 L, ... and the last point
    MdTable rules{{"rule"}, {}};
    std::vector<size_t> cols;
    if (!r.rules.empty()) {
      const auto& curve = r.rules.front().curve;
      for (size_t i = 0; i < curve.size(); ++i)
        if (i % 4 == 0 || i + 1 == curve.size()) {
          cols.push_back(i);
          rules.header.push_back(fmt::format("M = {}", curve[i].M));
        }
      for (const auto& rr : r.rules) {
        std::vector<std::string> row{"`" + to_string(rr.rule) + "`"};
        for (size_t i : cols)
          row.push_back(
              fmt::format("{:.3g} ({:.3g})", rr.curve[i].isr.median, rr.curve[i].theory_rms));
        rules.rows.push_back(row);
      }
    }
    return fmt::format(
        "## 2. The probe: measured capacity beside theory\n\n"
        "`recall probe --trials {}` ({:.0f} s): ISR of stored keys against M, {} trials of {} "
        "queries. The median crossing is where the pooled median ISR falls through 1 (the "
        "trial range: the same crossing in each trial alone); the RMS crossing is what theory "
        "predicts, since "
        "theory gives E[ISR^2].\n\n{}\n"
        "Softmax ISR under each sharpness rule (median, theory RMS in brackets), L = {}, "
        "beta_0 = {}:\n\n{}\n![probe](probe.png)\n",
        config_.probe_trials, r.seconds, r.config.trials, r.config.queries, t.str(),
        r.config.ref_len, r.config.beta, rules.str());
  }

  std::string extrapolate_section() {
    step(fmt::format("mqar-extrapolate under each beta rule ({} steps, {} seed(s) each)",
                     config_.mqar_steps, config_.mqar_seeds));
    ExtrapolateRuns runs;
    runs.train_config = "mqar-extrapolate";
    runs.sets = {fmt::format("steps={}", config_.mqar_steps)};
    // the runs of the extrapolation experiment (section 11), which reads them again
    runs.out_dir = run_dir(fmt::format("mqar-extrapolate-{}", config_.mqar_steps));
    runs.seeds = config_.mqar_seeds;
    runs.rules = config_.mqar_rules;
    runs.run = config_.run;
    ExtrapolateConfig extrapolation;
    extrapolation.lengths = config_.extrapolate_lengths;
    extrapolation.pairs = PairsAtLength::kGrow;
    extrapolation.none_also = rules_equal_to_none_within_training_length();
    extrapolation.batches = config_.extrapolate_batches;
    extrapolation.device = config_.run.device;
    const auto points = train_and_extrapolate(runs, extrapolation);
    write_file_atomic(path("extrapolate.json"), extrapolate_json(points));
    // the means are over the runs that learned (accuracy >= 0.9 at 1x under their own rule)
    const std::vector<std::string> failed = unlearned_runs(points);
    const std::vector<ExtrapolatePoint> learned = learned_points(points, failed);
    for (const auto& p : learned)
      if (p.trained == BetaRule::kNone && none_run_.empty()) none_run_ = p.checkpoint;
    if (learned.empty() || none_run_.empty())
      throw std::runtime_error(
          "report: no mqar-extrapolate run trained with rule none learned to recall");
    write_extrapolate_plot(learned, path("extrapolate.png"));
    std::string left_out;
    for (const auto& f : failed) {
      const auto a = std::find_if(points.begin(), points.end(), [&](const ExtrapolatePoint& p) {
        return p.checkpoint == f && p.multiple == 1;
      });
      left_out += fmt::format("{}`{}` ({:.3f})", left_out.empty() ? "" : ", ",
                              fs::relative(f, config_.out_dir).string(), a->accuracy);
    }
    const auto curves = extrapolate_curves(learned);
    MdTable t{{"trained", "evaluated", "runs"}, {}};
    for (int64_t m : curves.front().multiples)
      t.header.push_back(fmt::format("{}x ({}, {} pairs)", m, m * 32,
                                     std::find_if(points.begin(), points.end(), [&](const auto& p) {
                                       return p.multiple == m;
                                     })->pairs));
    for (const auto& cv : curves) {
      std::vector<std::string> row{"`" + to_string(cv.trained) + "`",
                                   "`" + to_string(cv.rule) + "`", std::to_string(cv.runs)};
      for (size_t i = 0; i < cv.accuracy.size(); ++i)
        row.push_back(cv.runs > 1 ? fmt::format("{:.3f} [{:.2f}, {:.2f}]", cv.accuracy[i],
                                                cv.low[i], cv.high[i])
                                  : fmt::format("{:.3f}", cv.accuracy[i]));
      t.rows.push_back(row);
    }
    return fmt::format(
        "## 3. Trained attention at longer contexts\n\n"
        "`recall extrapolate --config mqar-extrapolate --set steps={} --seeds {} --lengths {} "
        "--pairs grow`: mqar-extrapolate (8 pairs in 32 tokens, 255 keys, 2 layers x 4 heads, no "
        "positions, a width-2 convolution of q, k, v, no MLP) trained once per rule and seed, "
        "then scored at 1x to {}x its length ({} x 64 prompts at 1x; with the pairs grown g times, "
        "1/g of them, 4 at least: as many scored queries at every length) with the pairs growing "
        "with the length, so that a longer context holds more memories. Mean accuracy over the "
        "runs that learned, [min, max] when there are several. Rows where training and "
        "evaluation differ are runs trained with `none`, for which qwen and yarn are the identity "
        "up to L.\n\n{}\n"
        "Runs left out, not having learned at 1x (accuracy): {}.\n\n"
        "![extrapolate](extrapolate.png)\n",
        config_.mqar_steps, config_.mqar_seeds, fmt::join(extrapolation.lengths, ","),
        extrapolation.lengths.back(), extrapolation.batches, t.str(),
        left_out.empty() ? "none" : left_out);
  }

  std::string inspect_section() {
    step("inspect of the mqar run trained with rule none");
    Restored r = restore(none_run_);
    InspectConfig inspection;
    inspection.lengths = config_.inspect_lengths;
    // ssmax at evaluation of a model trained without it starts at its initial scale: su again
    inspection.rules = {BetaRule::kNone, BetaRule::kSu, BetaRule::kQwen, BetaRule::kYarn};
    inspection.batches = config_.extrapolate_batches;
    inspection.pairs = PairsAtLength::kGrow;
    const InspectResult result = inspect(r, inspection, none_run_);
    write_file_atomic(path("inspect.json"), inspect_json(result));
    write_inspect_plot(result, path("inspect.png"));
    return fmt::format(
        "## 4. Which heads recall\n\n"
        "`recall inspect --checkpoint {} --lengths {} --pairs grow` (paths relative to this "
        "folder). For a query whose key sits at 2i, a head reads position 2i + o of the pair "
        "(key, value, or the next key's position, where a first-layer head gathers both); "
        "ablated is the accuracy with the head's output zeroed.\n\n```\n{}```\n\n"
        "![inspect](inspect.png)\n",
        fs::relative(none_run_, config_.out_dir).string(), fmt::join(inspection.lengths, ","),
        inspect_table(result));
  }

  std::string fit_section() {
    step(fmt::format("fit (widths {})", fmt::join(config_.fit_widths, ", ")));
    MdTable t{{"kind", "width N", "parameters", "fitted M", "bits / param", "constructed",
               "random-key theory", "fitted / constructed"},
              {}};
    nlohmann::json all = nlohmann::json::array();
    std::vector<FitResult> results;
    for (const char* kind : {"mlp-relu", "mlp-relu2", "glu-silu", "learned_kv"})
      for (int64_t width : config_.fit_widths) {
        FitConfig fc;
        fc.kind = fit_kind_from_string(kind);
        fc.width = width;
        fc.steps = config_.fit_steps;
        const FitResult r = fit_capacity(fc);
        all.push_back(nlohmann::json::parse(fit_json(r)));
        t.rows.push_back(
            {fmt::format("`{}`", kind), std::to_string(width), std::to_string(r.parameters),
             fmt::format("{}{}", r.capacity, r.capped ? "+" : ""),
             fmt::format("{:.3f}", r.bits_per_param),
             fmt::format("{:.4g}", r.constructed.value_or(0.0)), num(r.theory),
             fmt::format("{:.2f}", r.capacity / std::max(r.constructed.value_or(0.0), 1.0))});
        results.push_back(r);
      }
    write_file_atomic(path("fit.json"), all.dump(2) + "\n");
    write_fit_plot(results, path("fit.png"));
    return fmt::format(
        "## 5. Trained stores against constructed ones\n\n"
        "`recall fit --kind K --width N --steps {}`: a store of width N trained by full-batch "
        "Adam on M random unit keys -> values (d_k = d_v = 32); fitted M is the largest M with "
        ">= 99 % recalled (nearest value among M), found by bisection. Constructed: N memories "
        "written as keys and values, min(N, random-key theory). Bits per parameter count "
        "M log2 M.\n\n{}\n![fit](fit.png)\n",
        config_.fit_steps, t.str());
  }

  std::string facts_section() {
    step(fmt::format("facts: mlp against learned_kv ({} steps each)", config_.facts_steps));
    MdTable t{{"ffn", "parameters", "accuracy", "bits stored", "bits / param", "FFN keys",
               "key ISR median", "keys with ISR < 1", "random-key theory"},
              {}};
    nlohmann::json all = nlohmann::json::array();
    const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
        {"mlp", {}}, {"learned_kv", {"ffn=learned_kv", "ffn_slots=96"}}};
    for (const auto& [name, sets] : runs) {
      auto all_sets = sets;
      all_sets.push_back(fmt::format("steps={}", config_.facts_steps));
      const TrainConfig tc = train_config_from_file("facts-tiny", all_sets);
      const std::string dir = run_dir(fmt::format("facts-{}-{}", name, config_.facts_steps));
      const TrainResult tr = train_run(tc, dir, config_.run);
      Restored r = restore(dir);
      const InspectResult ir = inspect(r, InspectConfig{}, dir);
      const auto& f = ir.ffn.front();
      t.rows.push_back({"`" + name + "`", std::to_string(r.model->num_parameters()),
                        fmt::format("{:.3f}", tr.eval.at("accuracy")),
                        fmt::format("{:.0f}", tr.eval.at("bits")),
                        fmt::format("{:.3f}", tr.eval.at("bits_per_param")), std::to_string(f.keys),
                        fmt::format("{:.3g}", f.isr.median), fmt::format("{:.3f}", f.recalled),
                        f.theory ? fmt::format("{:.4g} ({})", *f.theory, f.theory_store) : "—"});
      all.push_back({{"ffn", name},
                     {"parameters", r.model->num_parameters()},
                     {"eval", tr.eval},
                     {"inspect", nlohmann::json::parse(inspect_json(ir))}});
    }
    write_file_atomic(path("facts.json"), all.dump(2) + "\n");
    return fmt::format(
        "## 6. Facts: an MLP against learned key-values at equal parameters\n\n"
        "`recall train --config facts-tiny --set steps={}` (and `--set ffn=learned_kv --set "
        "ffn_slots=96`): 8192 random (subject, relation) -> object facts, 5 bits each, in a "
        "one-layer model; bits stored = facts x (5 - cross-entropy in bits). Each FFN is then "
        "read as a store (`recall inspect`): its keys queried through its own weights.\n\n{}",
        config_.facts_steps, t.str());
  }

  // Sections 7 on: the experiments of recall experiment, into this folder (the extrapolation one
  // reuses the runs of section 3).
  std::string experiment_section(int number, const std::string& name) {
    step("experiment " + name);
    ExperimentConfig experiment;
    experiment.name = name;
    experiment.out_dir = config_.out_dir;
    experiment.quick = config_.quick;
    experiment.run = config_.run;
    const ExperimentResult r = run_experiment(experiment);
    return fmt::format("## {}. {}\n\n{}", number, r.title, r.markdown);
  }

 private:
  void write_fit_plot(const std::vector<FitResult>& results, const std::string& file) {
    std::ostringstream data;  // one block per kind: width  fitted  constructed  parameters
    std::vector<std::string> kinds;
    std::vector<double> widths;
    for (const auto& r : results) widths.push_back(static_cast<double>(r.config.width));
    std::sort(widths.begin(), widths.end());
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      if (i > 0 && results[i - 1].config.kind != r.config.kind) data << "\n\n";
      if (kinds.empty() || kinds.back() != to_string(r.config.kind))
        kinds.push_back(to_string(r.config.kind));
      data << r.config.width << ' ' << std::max<int64_t>(r.capacity, 1) << ' '
           << r.constructed.value_or(0.0) << ' ' << r.parameters << '\n';
    }
    render_plot(
        file, data.str(),
        [&](const std::string& f) {
          std::string gp =
              "set logscale xy 2\nset grid\nset key outside right\nset xlabel 'width N'\n"
              "set ylabel 'memories recalled at 99 %'\nset title 'trained (solid) against "
              "constructed (dashed) stores, d_k = 32'\n";
          gp += fmt::format("set xrange [{}:{}]\nplot ", widths.front() / 1.5, widths.back() * 1.5);
          for (size_t i = 0; i < kinds.size(); ++i)
            gp += fmt::format(
                "'{0}' index {1} using 1:2 with linespoints lc {2} pt 7 title '{3}', "
                "'{0}' index {1} using 1:3 with linespoints dt 2 lc {2} pt 6 notitle{4}",
                f, i, plot_colour(i), kinds[i], i + 1 < kinds.size() ? ", " : "\n");
          return gp;
        },
        1100, 640);
  }

  const ReportConfig& config_;
  std::chrono::steady_clock::time_point t0_;
  int step_ = 0;
  std::string none_run_;
};

}  // namespace

std::string run_report(const ReportConfig& config) {
  make_output_dir("--out", config.out_dir);
  Report report(config);
  const double gemm = measure_gemm_gflops(3, 1);
  std::vector<std::string> sections;
  sections.push_back(report.theory());
  sections.push_back(report.probe());
  sections.push_back(report.extrapolate_section());
  sections.push_back(report.inspect_section());
  sections.push_back(report.fit_section());
  sections.push_back(report.facts_section());
  int number = 7;
  for (const auto& name : experiment_names())
    sections.push_back(report.experiment_section(number++, name));
  std::string md = fmt::format(
      "# recall report{}\n\n"
      "The essay's capacity experiments reproduced on random stores, then its claims put to "
      "trained models at toy size. Made by `recall report --out {}{}` in {:.1f} minutes on "
      "{} threads (fp32 GEMM {:.0f} GFLOP/s on this machine); every number below is in the "
      "JSON files beside this one, and each section names the command that makes it alone.\n\n",
      config.quick ? " (quick)" : "", config.out_dir, config.quick ? " --quick" : "",
      report.elapsed() / 60.0, at::get_num_threads(), gemm);
  if (config.quick)
    md +=
        "Quick mode: fewer trials, steps and widths than the default; the trends are there, the "
        "figures are rough.\n\n";
  md += fmt::format("{}", fmt::join(sections, "\n"));
  const std::string out = report.path("report.md");
  write_file_atomic(out, md);
  return out;
}

}  // namespace recall
