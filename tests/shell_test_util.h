// The real binary run through a shell, as a user types it: `[env] recall args`, its exit code,
// stdout and stderr; and a fresh folder of this test process's own.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_paths.h"
#include "train_test_util.h"

namespace recall::test {

struct ShellRun {
  int code = -1;  // the exit code; -1 for a program killed by a signal
  std::string out, err;
};

// `env` is "NAME=value ..." or "". stdout and stderr go to files of this process's own (test runs
// of other checkouts may share the temporary folder), numbered so that no run reads another's.
inline ShellRun run_shell(const std::string& args, const std::string& env = "") {
  static int n = 0;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("recall_shell_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / (std::to_string(n) + ".out"), err = dir / (std::to_string(n) + ".err");
  ++n;
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + recall_binary() + " " + args +
                          " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out.string()),
          read_text(err.string())};
}

// An empty folder named `name` and this process's id.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace recall::test
