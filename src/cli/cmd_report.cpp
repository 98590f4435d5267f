// recall report: every experiment at toy size, written as DIR/report.md with plots
// (recall/report.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "recall/error.h"
#include "recall/report.h"

namespace recall::cli {

namespace fs = std::filesystem;

void add_report(CLI::App& root, Action& action) {
  struct Opts {
    std::string out;
    bool quick = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand(
      "report", "run the essay's reproduction and the trained-model experiments; write Markdown");
  cmd->add_option("--out", o->out, "folder for report.md, plots, JSON and runs/")->required();
  cmd->add_flag("--quick", o->quick, "smaller runs: about 2 minutes instead of 15");
  cmd->add_flag("--quiet", o->quiet, "no progress on stderr");
  cmd->callback([o, &action] {
    // the folder, or the nearest existing folder above it, must be writable before any work
    std::error_code ec;
    fs::path p = fs::absolute(o->out, ec);
    if (fs::exists(p, ec) && !fs::is_directory(p, ec))
      throw UsageError(fmt::format("--out {}: is a file, give a folder", o->out));
    while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
    if (::access(p.c_str(), W_OK) != 0)
      throw UsageError(fmt::format("--out {}: folder {} is not writable", o->out, p.string()));
    action = [o] {
      ReportConfig config = ReportConfig::make(o->out, o->quick);
      config.progress = !o->quiet;
      fmt::print("{}\n", run_report(config));
      return 0;
    };
  });
}

}  // namespace recall::cli
