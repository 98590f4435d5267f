// What every command shares about its output: stdout carries data only (tables, JSON), progress
// and notes go to stderr unless --quiet; an output file given as "-" is stdout.
#pragma once
#include <string>

namespace recall::cli {

// The root --quiet flag: no progress or notes on stderr (errors still go there).
bool& quiet();

// "-" names stdout.
inline bool is_stdout(const std::string& path) {
  return path == "-";
}
// check_output_path for a file flag, before any work; "-" and "" (not given) pass.
void check_output(const std::string& flag, const std::string& path);
// Writes `content` to `path` atomically, or to stdout for "-"; nothing for "".
void write_output(const std::string& path, const std::string& content);

}  // namespace recall::cli
