#include "recall/formats/plot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/spawn.h"

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

// gnuplot `script`, its stderr to `err`; its exit code (-1 when it could not start, with the
// reason in `err`). A Ctrl-C ends it with recall.
int run_gnuplot(const fs::path& script, const fs::path& err) {
  SpawnOptions options;
  options.stderr_file = err.string();
  try {
    return wait_child(spawn({"gnuplot", script.string()}, options).pid);
  } catch (const std::runtime_error& e) {
    std::ofstream(err) << e.what() << "\n";
    return -1;
  }
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
    // gnuplot's last line that says something: the error (a blank line, the script's line and a
    // caret come first)
    std::string last;
    for (std::string line; std::getline(err, line);)
      if (line.find_first_not_of(" \t^") != std::string::npos) last = line;
    throw std::runtime_error(fmt::format("gnuplot failed writing {}: {}", path, last));
  }
  fs::rename(partial, path);
}

}  // namespace recall
