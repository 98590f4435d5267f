#include "output.h"

#include <cstdio>

#include "recall/core/io.h"

namespace recall::cli {

bool& quiet() {
  static bool value = false;
  return value;
}

void check_output(const std::string& flag, const std::string& path) {
  if (!path.empty() && !is_stdout(path)) check_output_path(flag, path);
}

void write_output(const std::string& path, const std::string& content) {
  if (path.empty()) return;
  if (is_stdout(path)) {
    std::fputs(content.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  write_file_atomic(path, content);
}

}  // namespace recall::cli
