#include "recall/core/plot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/signals.h"

namespace recall {

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "recall-plot-XXXXXX").string();
    if (!::mkdtemp(t.data()))
      throw std::runtime_error("cannot create a temporary folder for the plot");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// gnuplot `script`, its stderr to `err`; its exit status (-1 when it could not start, with the
// reason in `err`). Started with the signals a shell would give it: recall blocks SIGINT and
// SIGTERM in every thread (recall/core/signals.h), and a child would inherit that.
int run_gnuplot(const fs::path& script, const fs::path& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  reset_signals_on_spawn(attr, /*own_group=*/false);  // a Ctrl-C ends it with recall
  std::string name = "gnuplot", arg = script.string();
  char* argv[] = {name.data(), arg.data(), nullptr};
  pid_t pid = 0;
  const int failed = posix_spawnp(&pid, "gnuplot", &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (failed) {
    std::ofstream(err) << "cannot start gnuplot: " << std::strerror(failed) << "\n";
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string plot_colour(size_t i) {
  // gnuplot's default cycle repeats after eight
  static const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                   "#bcbd22", "#17becf", "#000080", "#808000"};
  return fmt::format("rgb '{}'", kColours[i % 12]);
}

void check_plot_path(const std::string& flag, const std::string& path) {
  check_output_path(flag, path);
  const std::string ext = fs::path(path).extension().string();
  if (ext != ".png" && ext != ".svg")
    throw UsageError(fmt::format("{} {}: the file must end in .png or .svg", flag, path));
}

void render_plot(const std::string& path, const std::string& data,
                 const std::function<std::string(const std::string&)>& script, int width,
                 int height) {
  const std::string ext = fs::path(path).extension().string();
  std::string terminal;
  if (ext == ".png")
    terminal = fmt::format("pngcairo size {},{} font ',11'", width, height);
  else if (ext == ".svg")
    terminal = fmt::format("svg size {},{} dynamic font ',11'", width, height);
  else
    throw std::invalid_argument(fmt::format("plot {}: the file must end in .png or .svg", path));
  TempDir tmp;
  const fs::path data_file = tmp.path / "data.txt";
  std::ofstream(data_file) << data;
  const fs::path dir =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  const fs::path partial = dir / fmt::format(".{}.partial", fs::path(path).filename().string());
  std::ofstream(tmp.path / "plot.gp")
      << fmt::format("set terminal {} noenhanced\nset output '{}'\n{}", terminal, partial.string(),
                     script(data_file.string()));
  if (run_gnuplot(tmp.path / "plot.gp", tmp.path / "err.txt") != 0) {
    std::error_code ec;
    fs::remove(partial, ec);
    std::ifstream err(tmp.path / "err.txt");
    std::string first;
    std::getline(err, first);
    throw std::runtime_error(fmt::format("gnuplot failed writing {}: {}", path, first));
  }
  fs::rename(partial, path);
}

}  // namespace recall
