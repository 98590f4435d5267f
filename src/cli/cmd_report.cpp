// recall report: every experiment at toy size, written as DIR/report.md with plots
// (recall/report.h).
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/core/io.h"
#include "recall/experiments/report.h"

namespace recall::cli {

void add_report(CLI::App& root, Action& action) {
  struct Opts {
    std::string out;
    bool quick = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand(
      "report", "run the essay's reproduction and the trained-model experiments; write Markdown");
  cmd->add_option("--out", o->out, "folder for report.md, plots, JSON and runs/")->required();
  cmd->add_flag("--quick", o->quick,
                "smaller runs: about 4 minutes on 2 cores instead of about 28");
  cmd->callback([o, &action] {
    check_output_dir("--out", o->out);
    action = [o] {
      ReportConfig config;
      config.out_dir = o->out;
      config.quick = o->quick;
      config.run.progress = !quiet();
      config.run.stop = stop_on_signal();
      return run_stoppable(
          [&] {
            fmt::print("{}\n", run_report(config));
            return 0;
          },
          "the same command resumes the runs in --out");
    };
  });
}

}  // namespace recall::cli
