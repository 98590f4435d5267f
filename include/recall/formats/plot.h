// Plots through gnuplot, written like every output file: data and script go to a private
// temporary folder, gnuplot renders into a hidden file beside the target, which is then renamed
// over it, so a failed plot leaves no half-written file.
#pragma once
#include <functional>
#include <string>

namespace recall {

// check_output_path, and the extension: .png (pngcairo) or .svg. Throws UsageError naming `flag`.
void check_plot_path(const std::string& flag, const std::string& path);

// Renders `path` (.png or .svg) at width x height pixels. `data` holds gnuplot data blocks (two
// blank lines between blocks, addressed by `index`); script(data_file) returns the commands after
// the terminal and output settings. Throws std::runtime_error with gnuplot's first error line.
void render_plot(const std::string& path, const std::string& data,
                 const std::function<std::string(const std::string& data_file)>& script,
                 int width = 1600, int height = 640);

// The i-th of twelve distinct line colours, as a gnuplot colour spec: "rgb '#1f77b4'".
std::string plot_colour(size_t i);

}  // namespace recall
