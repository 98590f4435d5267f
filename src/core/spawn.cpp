#include "recall/core/spawn.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "recall/core/signals.h"

extern char** environ;

namespace recall {

namespace {

// posix_spawn's attributes and file actions, released however spawn() ends.
struct SpawnState {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int pipe_fds[2] = {-1, -1};
  SpawnState() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnState() {
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    for (int fd : pipe_fds)
      if (fd >= 0) ::close(fd);
  }
};

// recall's environment with `extra` ("NAME=value") set over it, null-terminated; the pointers
// point into `extra` and environ.
std::vector<char*> child_environment(const std::vector<std::string>& extra) {
  std::vector<char*> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    const auto name = entry.substr(0, eq == std::string_view::npos ? 0 : eq + 1);  // with its '='
    bool replaced = false;
    for (const auto& x : extra)
      replaced |= !name.empty() && std::string_view(x).substr(0, name.size()) == name;
    if (!replaced) out.push_back(*e);
  }
  for (const auto& x : extra) out.push_back(const_cast<char*>(x.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Child spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) throw std::invalid_argument("spawn: no program given");
  SpawnState s;
  if (options.stdout_pipe) {
    // close-on-exec: only the dup2'ed copy (fd 1) lives on in the child
    if (::pipe2(s.pipe_fds, O_CLOEXEC) != 0)
      throw std::runtime_error(
          fmt::format("cannot start {}: pipe: {}", argv[0], std::strerror(errno)));
    posix_spawn_file_actions_adddup2(&s.actions, s.pipe_fds[1], 1);
  } else if (!options.stdout_file.empty()) {
    posix_spawn_file_actions_addopen(&s.actions, 1, options.stdout_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (!options.stderr_file.empty())
    posix_spawn_file_actions_addopen(
        &s.actions, 2, options.stderr_file.c_str(),
        O_WRONLY | O_CREAT | (options.stderr_append ? O_APPEND : O_TRUNC), 0644);
  reset_signals_on_spawn(s.attr, options.own_group);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env = child_environment(options.env);
  Child child;
  // glibc reports a failed exec (or open) as posix_spawn's own error
  const int err =
      argv[0].find('/') == std::string::npos
          ? posix_spawnp(&child.pid, args[0], &s.actions, &s.attr, args.data(), env.data())
          : posix_spawn(&child.pid, args[0], &s.actions, &s.attr, args.data(), env.data());
  if (err != 0)
    throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(err)));
  if (options.stdout_pipe) {
    child.stdout_fd = s.pipe_fds[0];
    s.pipe_fds[0] = -1;  // the caller's now; the write end closes with `s`
  }
  return child;
}

int exit_code(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(fmt::format("waitpid: {}", std::strerror(errno)));
  return exit_code(status);
}

int run_capture(const std::vector<std::string>& argv, std::string& out) {
  SpawnOptions options;
  options.stdout_pipe = true;
  const Child child = spawn(argv, options);
  char buf[4096];
  for (ssize_t n; (n = ::read(child.stdout_fd, buf, sizeof buf)) != 0;) {
    if (n > 0)
      out.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR)
      break;
  }
  ::close(child.stdout_fd);
  return wait_child(child.pid);
}

}  // namespace recall
