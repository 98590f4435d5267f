// Output files are written atomically: into a temporary file in the same folder, flushed, then
// renamed over the target, so a reader never sees a half-written file and a crash leaves the old
// one.
#pragma once
#include <string>

namespace recall {

// Writes `content` to `path` atomically. Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::string& path, const std::string& content);
// Removes the temporary files that write_file_atomic(path, ...) leaves when the process is killed
// mid-write (.NAME.tmpXXXXXX beside path); returns how many there were. For the only writer of
// path, at its start.
int remove_atomic_leftovers(const std::string& path);

// Checks, before any work starts, that `path` can be created: its folder exists and is writable and
// the path is not a folder. Throws UsageError naming `flag` and the path otherwise.
void check_output_path(const std::string& flag, const std::string& path);

// Checks, before any work starts, that the folder `dir` is usable: it exists and is writable, or
// can be created inside a writable folder above it. Throws UsageError naming `flag` otherwise.
void check_output_dir(const std::string& flag, const std::string& dir);

// check_output_dir, then creates the folder; throws UsageError naming `flag` when it cannot (a
// path that only looks writable, such as one under /proc).
void make_output_dir(const std::string& flag, const std::string& dir);
// Reads a whole file; throws UsageError naming `flag` and the path when it cannot be read.
std::string read_file(const std::string& flag, const std::string& path);

}  // namespace recall
