// The command-line conventions (--version, unknown commands, "-" as stdout, data alone on stdout,
// --quiet, the default thread count), sampling with a KV cache, export to PyTorch, and a sweep
// interrupted by SIGINT and resumed, then plotted: all through the real binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "fast_gemm_test_util.h"
#include "python_test_util.h"
#include "recall/ops/gemm.h"
#include "recall/ops/precision.h"
#include "shell_test_util.h"
#include "train_test_util.h"

namespace fs = std::filesystem;

namespace {

using recall::test::read_text;
using recall::test::run_shell;
using recall::test::ShellRun;

// A tiny mqar model trained for a few steps: quick to train, export and sample.
const std::string kTiny =
    "--config mqar-tiny --set d_model=16 --set n_layers=1 --set n_heads=2 --set batch_size=4 "
    "--set warmup_steps=2 --set eval_batches=1 --set log_every=5 --set eval_every=0 "
    "--set checkpoint_every=0";

}  // namespace

TEST(Conventions, VersionUnknownCommandAndHelp) {
  const ShellRun v = run_shell("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("recall ", 0), 0u) << v.out;
  const ShellRun u = run_shell("trian --config x");
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.err.find("unknown command 'trian'"), std::string::npos) << u.err;
  EXPECT_NE(u.err.find("train"), std::string::npos) << "the commands are listed: " << u.err;
  // Help names no internal documents.
  for (const char* cmd :
       {"", "theory", "probe", "bench", "train", "eval", "sample", "fit", "inspect", "extrapolate",
        "report", "export", "import", "sweep", "plot"}) {
    const ShellRun h = run_shell(std::string(cmd) + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    for (const char* word : {"docs/", "science.md", "SPEC", "issue", "shared/"})
      EXPECT_EQ(h.out.find(word), std::string::npos) << cmd << " --help names " << word;
  }
}

TEST(Conventions, DashIsStdoutAndTablesMakeWay) {
  const ShellRun theory = run_shell("theory --json -");
  ASSERT_EQ(theory.code, 0) << theory.err;
  EXPECT_EQ(nlohmann::json::parse(theory.out)["d_k"], 64);
  const std::string probe = "probe --stores relu --m 16,64 --trials 1 --queries 8 --no-rules ";
  const ShellRun json = run_shell(probe + "--json -");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["stores"][0]["store"], "relu");
  const ShellRun csv = run_shell(probe + "--csv -");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.find("capacity"), std::string::npos) << "no table beside the CSV";
  EXPECT_GE(std::count(csv.out.begin(), csv.out.end(), '\n'), 3) << csv.out;
  const ShellRun fit = run_shell("fit --kind linear --width 4 --dk 4 --steps 20 --json -");
  ASSERT_EQ(fit.code, 0) << fit.err;
  EXPECT_TRUE(nlohmann::json::parse(fit.out).is_object());
}

TEST(Conventions, QuietAndThreadsFromTheEnvironment) {
  const ShellRun omp = run_shell("--version", "OMP_NUM_THREADS=3");
  ASSERT_EQ(omp.code, 0) << omp.err;
  EXPECT_NE(omp.out.find("default threads here: 3)"), std::string::npos) << omp.out;
  const ShellRun five = run_shell("--version", "OMP_NUM_THREADS=5");
  EXPECT_NE(five.out.find("default threads here: 5)"), std::string::npos) << five.out;
  const ShellRun quiet =
      run_shell("--quiet probe --stores relu --m 16,64 --trials 1 --queries 8 --no-rules");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(Conventions, TrainWritesDataAloneOnStdout) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_train");
  const ShellRun t = run_shell("train " + kTiny + " --set steps=10 --out " +
                               (dir / "run").string() + " --threads 1");
  ASSERT_EQ(t.code, 0) << t.err;
  const auto j = nlohmann::json::parse(t.out);  // one JSON line and nothing else
  EXPECT_EQ(j["step"], 10);
  EXPECT_NE(t.err.find("# resolved config"), std::string::npos);
  EXPECT_NE(read_text(dir / "run" / "config.toml").find("d_model = 16"), std::string::npos);
  const ShellRun q = run_shell("--quiet train " + kTiny + " --set steps=10 --out " +
                               (dir / "quiet").string() + " --threads 1");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.err, "");
}

TEST(Sample, SeveralSamplesTopKAndGreedy) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_sample");
  const std::string run = (dir / "run").string();
  ASSERT_EQ(run_shell("train " + kTiny + " --set steps=20 --out " + run + " --threads 1").code, 0);
  const ShellRun s =
      run_shell("sample --checkpoint " + run +
                " --prompt '1 2 3' --tokens 40 --samples 3 --top-k 4 --temperature 0.8");
  ASSERT_EQ(s.code, 0) << s.err;
  std::istringstream lines(s.out);
  std::vector<std::string> rows;
  for (std::string l; std::getline(lines, l);) rows.push_back(l);
  ASSERT_EQ(rows.size(), 3u) << s.out;
  for (const auto& r : rows) {
    EXPECT_EQ(r.rfind("1 2 3 ", 0), 0u) << r;
    EXPECT_EQ(std::count(r.begin(), r.end(), ' '), 3 + 40 - 1) << r;  // 43 ids, past seq_len 32
  }
  const ShellRun g = run_shell("sample --checkpoint " + run +
                               " --prompt '1 2 3' --tokens 40 "
                               "--samples 2 --temperature 0");
  ASSERT_EQ(g.code, 0) << g.err;
  const auto nl = g.out.find('\n');
  EXPECT_EQ(g.out.substr(0, nl + 1), g.out.substr(nl + 1)) << "greedy samples agree";
  // More than a stated limit (so on any machine): 4,096 samples of a million tokens hold 32 GiB
  // of token ids. Refused before any token, one line, exit 2; within it, the same run samples.
  const std::string many = "sample --checkpoint " + run + " --tokens 1000000 --samples 4096";
  const ShellRun big = run_shell(many + " --max-memory 4G");
  EXPECT_EQ(big.code, 2) << big.err;
  EXPECT_NE(big.err.find("--samples 4096 --tokens 1000000 needs an estimated"), std::string::npos)
      << big.err;
  EXPECT_NE(big.err.find("more than --max-memory 4.0 GiB"), std::string::npos) << big.err;
  EXPECT_EQ(std::count(big.err.begin(), big.err.end(), '\n'), 1) << big.err;
  EXPECT_EQ(big.out, "");
  EXPECT_EQ(run_shell("sample --checkpoint " + run + " --tokens 4 --max-memory 4G").code, 0);
}

TEST(ExportCli, PythonLoadsTheExportedRun) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_export");
  const std::string run = (dir / "run").string(), out = (dir / "exported").string();
  ASSERT_EQ(run_shell("train " + kTiny + " --set steps=5 --out " + run + " --threads 1").code, 0);
  const ShellRun e = run_shell("export --checkpoint " + run + " --out " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "");
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "exported" / "config.json"))["model"]["d_model"],
            16);
  const ShellRun bad =
      run_shell("export --checkpoint " + (dir / "none").string() + " --out " + out);
  EXPECT_EQ(bad.code, 2);
  // The same run evaluated past a stated limit, at a length whose 128 MiB any machine's free RAM
  // holds (so only the flag refuses it), and under a precision that does not exist: refused with
  // one line, exit 2
  for (const auto& [flags, needle] :
       {std::pair<std::string, std::string>{" --seq-len 32768 --max-memory 16M",
                                            "--seq-len 32768 needs an estimated"},
        {" --seq-len 32768 --max-memory 16M", "more than --max-memory 16.0 MiB;"},
        {" --precision fp16", "--precision"}}) {
    const ShellRun r = run_shell("eval --checkpoint " + run + flags);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // A GPT-2 folder of a model that is not GPT-2's: one line naming the key, no folder
  for (const auto& [format, needle] : {std::pair<std::string, std::string>{"gpt2", "pos = 'none'"},
                                       {"onnx", "--format 'onnx' is unknown"}}) {
    const ShellRun r = run_shell("export --checkpoint " + run + " --format " + format + " --out " +
                                 (dir / "gpt2").string());
    EXPECT_EQ(r.code, 2) << format;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir / "gpt2")) << format;
  }
  const std::string python = recall::test::python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch (install python3-torch)";
  // The README's lines, then a forward pass.
  const std::string script =
      std::string("import sys; sys.path.insert(0, '") + recall::test::source_dir() +
      "/python')\nfrom recall_model import load\nmodel = load('" + out +
      "')\nimport torch\nprint(tuple(model(torch.tensor([[1, 2, 3]])).shape))\n";
  std::ofstream(dir / "load.py") << script;
  const std::string cmd =
      python + " '" + (dir / "load.py").string() + "' > '" + (dir / "py.out").string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(dir / "py.out");
  EXPECT_EQ(read_text(dir / "py.out"), "(1, 3, 32)\n");
}

// The eval line's loss ({"accuracy":..,"loss":..,..}), NaN when there is none.
double eval_loss(const std::string& out) {
  const auto j = nlohmann::json::parse(out, nullptr, false);
  return j.is_object() && j.contains("loss") ? j["loss"].get<double>() : std::nan("");
}

// A trained run of GPT-2's shape through the commands a user types: export --format gpt2, import
// of that folder, and the imported run scores the same held-out batches as the run itself.
TEST(ExportCli, Gpt2FolderOfATrainedRunImportsBackWithItsScores) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_gpt2");
  const std::string run = (dir / "run").string(), gpt2 = (dir / "gpt2").string(),
                    back = (dir / "back").string();
  const std::string shape =
      " --set pos=learned --set norm=layernorm --set bias=true --set ffn=mlp --set attn_conv=0";
  const ShellRun t = run_shell("train " + kTiny + shape + " --set steps=20 --out " + run);
  ASSERT_EQ(t.code, 0) << t.err;
  const ShellRun e = run_shell("export --checkpoint " + run + " --format gpt2 --out " + gpt2);
  ASSERT_EQ(e.code, 0) << e.err;
  const auto config = nlohmann::json::parse(read_text(dir / "gpt2" / "config.json"));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["n_embd"], 16);
  EXPECT_TRUE(fs::exists(dir / "gpt2" / "model.safetensors"));
  // the run's task and evaluation batches, so that both score the same prompts
  const ShellRun i =
      run_shell("import --from " + gpt2 + " --out " + back +
                " --set task=mqar --set mqar_pairs=8 --set batch_size=4 --set eval_batches=1");
  ASSERT_EQ(i.code, 0) << i.err;
  const ShellRun a = run_shell("eval --checkpoint " + run);
  const ShellRun b = run_shell("eval --checkpoint " + back);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NEAR(eval_loss(b.out), eval_loss(a.out), 1e-5 * eval_loss(a.out)) << a.out << b.out;
  // An export over a folder that holds the other format's export, or a model another program
  // wrote, is refused and leaves the folder whole
  const std::string recall_out = (dir / "recall").string(), llama = (dir / "llama").string();
  ASSERT_EQ(run_shell("export --checkpoint " + run + " --out " + recall_out).code, 0);
  fs::create_directories(llama);
  std::ofstream(dir / "llama" / "config.json") << R"({"model_type": "mistral"})";
  for (const auto& [flags, kept, needle] :
       {std::tuple<std::string, fs::path, std::string>{" --format gpt2 --out " + recall_out,
                                                       dir / "recall" / "config.json",
                                                       "the other format"},
        {" --out " + gpt2, dir / "gpt2" / "config.json", "the other format"},
        {" --format gpt2 --out " + llama, dir / "llama" / "config.json", "no recall export"}}) {
    const std::string before = read_text(kept);
    const ShellRun r = run_shell("export --checkpoint " + run + flags);
    EXPECT_EQ(r.code, 2) << flags << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(read_text(kept), before) << flags;
    EXPECT_FALSE(fs::exists(dir / "llama" / "model.safetensors"));
  }
}

// --precision bf16 through the binary: where the CPU has bf16 products, a run trains and scores
// within bf16's rounding of the fp32 score of the same checkpoint; where it has none, train and
// eval refuse it in one line, exit 2, and write nothing.
TEST(Bf16Cli, TrainAndEvalWithBf16ProductsOrARefusal) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_bf16");
  const std::string run = (dir / "run").string();
  const bool bf16 = recall::test::bf16_products_here();
  const ShellRun t = run_shell("train " + kTiny + " --set steps=20 --precision bf16 --out " + run);
  if (!bf16) {
    EXPECT_EQ(t.code, 2) << t.err;
    EXPECT_NE(t.err.find("bf16"), std::string::npos) << t.err;
    EXPECT_EQ(std::count(t.err.begin(), t.err.end(), '\n'), 1) << t.err;
    EXPECT_FALSE(fs::exists(run));
    return;
  }
  ASSERT_EQ(t.code, 0) << t.err;
  const ShellRun fp32 = run_shell("eval --checkpoint " + run + " --precision fp32");
  const ShellRun b = run_shell("eval --checkpoint " + run + " --precision bf16");
  ASSERT_EQ(fp32.code, 0) << fp32.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const double l32 = eval_loss(fp32.out), l16 = eval_loss(b.out);
  EXPECT_TRUE(std::isfinite(l16)) << b.out;
  // rounded operands, fp32 sums: the loss moves by a few of bf16's 2^-8, not more
  EXPECT_NEAR(l16, l32, 0.02 * l32) << fp32.out << b.out;
  EXPECT_NE(l16, l32)
      << "bf16 products round: the same loss to the last bit means they did not run";
}

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(SweepCli, InterruptedBySigintThenResumedThenPlotted) {
  const fs::path dir = recall::test::fresh_dir("recall_interop_sweep");
  const fs::path out = dir / "sweep";
  std::vector<std::string> args =
      split("--threads 1 sweep " + kTiny + " --set steps=1000 --grid lr=1e-3,2e-3,3e-3 --out " +
            out.string());
  const recall::test::Proc first = recall::test::spawn_cli(args, dir, {}, "first_");
  const pid_t pid = first.pid;
  auto sweep_log = [&] { return read_text(first.out_file) + read_text(first.err_file); };
  // Interrupt while the second run trains: the first is finished, the third not started.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const fs::path second = out / "lr=2e-3" / "metrics.jsonl";
  while (std::chrono::steady_clock::now() < deadline &&
         !(fs::exists(second) && fs::file_size(second) > 0))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(second)) << sweep_log();
  // Ctrl-Z and fg, to the sweep's group: its runs lead their own groups, so only the sweep
  // passing them on pauses and resumes them.
  kill(-pid, SIGTSTP);
  EXPECT_EQ(recall::test::wait_for_stopped(pid, true), "TT");
  kill(-pid, SIGCONT);
  const std::string going_on = recall::test::wait_for_stopped(pid, false);
  EXPECT_EQ(going_on.find('T'), std::string::npos) << going_on;
  kill(-pid, SIGINT);  // Ctrl-C: passed on once, so the run stops after a checkpoint
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << sweep_log();
  EXPECT_EQ(WEXITSTATUS(status), 130) << sweep_log();
  auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
  ASSERT_EQ(summary["runs"].size(), 3u);
  EXPECT_EQ(summary["runs"][0]["status"], "finished");
  EXPECT_EQ(summary["runs"][1]["status"], "interrupted") << sweep_log();
  EXPECT_LT(summary["runs"][1]["step"].get<int>(), 1000);
  EXPECT_EQ(summary["runs"][2]["status"], "pending");
  EXPECT_NE(read_text(out / "lr=2e-3" / "train.log").find("stopped by signal 2 after step"),
            std::string::npos)
      << "a clean stop, after a checkpoint: " << read_text(out / "lr=2e-3" / "train.log");
  const auto first_log = fs::file_size(out / "lr=1e-3" / "train.log");

  const ShellRun resumed = run_shell([&] {
    std::string a;
    for (const auto& w : args) a += w + " ";
    return a;
  }());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(fs::file_size(out / "lr=1e-3" / "train.log"), first_log) << "the finished run is kept";
  EXPECT_NE(read_text(out / "lr=2e-3" / "train.log").find("step 1000/1000"), std::string::npos);
  summary = nlohmann::json::parse(read_text(out / "summary.json"));
  for (const auto& r : summary["runs"]) {
    EXPECT_EQ(r["status"], "finished") << r.dump();
    EXPECT_EQ(r["step"], 1000);
    EXPECT_TRUE(r["eval"].contains("accuracy")) << r.dump();
    EXPECT_GT(r["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_EQ(summary["runs"][1]["point"]["lr"], 2e-3);
  // The resumed run's metrics continue where it stopped: each logged step once, in order.
  std::ifstream metrics(out / "lr=2e-3" / "metrics.jsonl");
  int64_t last = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;
    EXPECT_EQ(j["step"].get<int64_t>(), last + 5) << line;
    last = j["step"];
  }
  EXPECT_EQ(last, 1000);
  EXPECT_EQ(resumed.out, read_text(out / "summary.csv"));
  EXPECT_EQ(resumed.out.substr(0, resumed.out.find('\n')),
            "run,lr,status,step,loss,tokens_per_s,eval_accuracy,eval_loss,eval_scored");

  const ShellRun plot =
      run_shell("plot " + out.string() + " --out " + (dir / "curves.svg").string());
  ASSERT_EQ(plot.code, 0) << plot.err;
  const std::string svg = read_text(dir / "curves.svg");
  for (const char* name :
       {"lr=1e-3", "lr=2e-3", "lr=3e-3", "training loss", "eval accuracy", "learning rate"})
    EXPECT_NE(svg.find(name), std::string::npos) << name;
  const ShellRun other = run_shell("sweep " + kTiny + " --grid lr=1e-2 --out " + out.string());
  EXPECT_EQ(other.code, 2) << "a folder holding another sweep is refused";
  const ShellRun bad =
      run_shell("sweep " + kTiny + " --grid nosuchkey=1,2 --out " + (dir / "b").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("nosuchkey"), std::string::npos) << bad.err;
}
