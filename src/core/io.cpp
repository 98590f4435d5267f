#include "recall/core/io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "recall/core/error.h"

namespace recall {
namespace fs = std::filesystem;

namespace {

// RECALL_STOP_IN_WRITE=NAME:N stops the process (SIGSTOP) halfway through its Nth atomic write of
// a file named NAME: the crash-safety test kills it there, so that a kill during a checkpoint
// write is certain rather than left to the timing of random kills.
bool stop_in_this_write(const fs::path& target) {
  static const char* env = std::getenv("RECALL_STOP_IN_WRITE");
  if (!env) return false;
  static int writes = 0;
  const std::string spec = env;
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || spec.substr(0, colon) != target.filename().string())
    return false;
  return ++writes == std::atoi(spec.c_str() + colon + 1);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / fmt::format(".{}.tmpXXXXXX", target.filename().string())).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const char* p = content.data();
  size_t left = content.size();
  const size_t stop_at = stop_in_this_write(target) ? content.size() / 2 : content.size() + 1;
  bool ok = true;
  while (left > 0 && ok) {
    const auto done = static_cast<size_t>(p - content.data());
    if (done == stop_at) ::raise(SIGSTOP);
    ssize_t n = ::write(fd, p, done < stop_at ? std::min(left, stop_at - done) : left);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) p += n, left -= static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  ::fchmod(fd, 0644);
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, why));
  }
  // The rename is durable only once the folder's entry is on disk: without this a crash soon
  // after could leave the old file (or none) although the write returned.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

int remove_atomic_leftovers(const std::string& path) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = fmt::format(".{}.tmp", target.filename().string());
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0 &&
        fs::remove(entry.path(), ec))
      ++removed;
  }
  return removed;
}

namespace {

// Whether a file can be created in `dir`: access() passes for root where nothing can be created
// (/proc, a read-only mount), so one is created. An unnamed one (O_TMPFILE) where the filesystem
// has them: nothing is left behind whenever the process dies. Elsewhere a named one, created and
// removed, named as write_file_atomic's temporaries are so that remove_atomic_leftovers finds it
// should the process die in between.
bool can_create_in(const fs::path& dir, const std::string& name) {
  const int unnamed = ::open(dir.c_str(), O_TMPFILE | O_WRONLY, 0600);
  if (unnamed >= 0) {
    ::close(unnamed);
    return true;
  }
  // a filesystem (or kernel) without O_TMPFILE; any other error is the answer
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return false;
  std::string tmpl = (dir / fmt::format(".{}.tmpXXXXXX", name.empty() ? "check" : name)).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(tmpl.c_str());
  return true;
}

}  // namespace

void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UsageError(fmt::format("{} is empty: give a file path", flag));
  const fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec))
    throw UsageError(fmt::format("{} {}: is a folder, give a file path", flag, path));
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError(fmt::format("{} {}: {} is a file, not a folder; give a file path", flag, path,
                                 dir.string()));
  if (!fs::is_directory(dir, ec))
    throw UsageError(
        fmt::format("{} {}: folder {} does not exist; create it first", flag, path, dir.string()));
  if (::access(dir.c_str(), W_OK) != 0 || !can_create_in(dir, target.filename().string()))
    throw UsageError(fmt::format("{} {}: folder {} is not writable", flag, path, dir.string()));
}

void check_output_dir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) throw UsageError(fmt::format("{} is empty: give a folder", flag));
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    throw UsageError(fmt::format("{} {}: is a file, give a folder", flag, dir));
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec) || ::access(p.c_str(), W_OK) != 0 || !can_create_in(p, "check"))
    throw UsageError(fmt::format("{} {}: folder {} is not writable", flag, dir, p.string()));
}

void make_output_dir(const std::string& flag, const std::string& dir) {
  check_output_dir(flag, dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw UsageError(fmt::format("{} {}: cannot create the folder ({}); give a writable path", flag,
                                 dir, ec.message()));
}

std::string read_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path))
    throw UsageError(fmt::format("{} {}: cannot read the file; check the path", flag, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace recall
