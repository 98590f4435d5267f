// spawn(): argv as given, stdout and stderr where asked, the environment, exit codes, and the
// signal state a shell gives a program (recall blocks SIGINT and SIGTERM in its own threads).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "recall/core/spawn.h"

namespace recall {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempFolder {
  fs::path path = fs::temp_directory_path() / ("recall_spawn_test_" + std::to_string(::getpid()));
  TempFolder() { fs::create_directories(path); }
  ~TempFolder() { fs::remove_all(path); }
};

TEST(Spawn, CapturesStdoutAndExitCode) {
  std::string out;
  // an argument with a space and a quote stays one argument: no shell is involved
  EXPECT_EQ(run_capture({"sh", "-c", "printf '%s|' \"$0\"; exit 3", "a b'c"}, out), 3);
  EXPECT_EQ(out, "a b'c|");
}

TEST(Spawn, RedirectsToFilesTruncatingOrAppending) {
  TempFolder dir;
  const auto out = dir.path / "out.txt", err = dir.path / "err.txt";
  std::ofstream(out) << "old stdout\n";
  std::ofstream(err) << "old stderr\n";
  SpawnOptions o;
  o.stdout_file = out.string();
  o.stderr_file = err.string();
  o.stderr_append = true;
  EXPECT_EQ(wait_child(spawn({"sh", "-c", "echo new; echo more >&2"}, o).pid), 0);
  EXPECT_EQ(slurp(out), "new\n");
  EXPECT_EQ(slurp(err), "old stderr\nmore\n");
}

TEST(Spawn, SetsEnvironmentEntriesOverItsOwn) {
  TempFolder dir;
  const auto out = dir.path / "out.txt";
  ::setenv("RECALL_SPAWN_KEPT", "kept", 1);
  ::setenv("RECALL_SPAWN_SET", "old", 1);
  SpawnOptions o;
  o.stdout_file = out.string();
  o.env = {"RECALL_SPAWN_SET=new", "RECALL_SPAWN_ADDED=a=b"};
  EXPECT_EQ(wait_child(spawn({"sh", "-c",
                              "echo $RECALL_SPAWN_KEPT $RECALL_SPAWN_SET $RECALL_SPAWN_ADDED; "
                              "env | grep -c '^RECALL_SPAWN_SET='"},
                             o)
                           .pid),
            0);
  EXPECT_EQ(slurp(out), "kept new a=b\n1\n");  // set once, the new value
  ::unsetenv("RECALL_SPAWN_KEPT");
  ::unsetenv("RECALL_SPAWN_SET");
}

TEST(Spawn, ReportsSignalsAndMissingPrograms) {
  std::string out;
  EXPECT_EQ(run_capture({"sh", "-c", "kill -TERM $$"}, out), 128 + SIGTERM);
  try {
    spawn({"/nonexistent/recall-no-such-program"});
    FAIL() << "spawn of a missing program did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start /nonexistent/recall-no-such-program"),
              std::string::npos)
        << e.what();
  }
}

TEST(Spawn, ChildHasSignalsUnblocked) {
  // blocked here, as recall's threads have them; the child must not inherit that
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  std::string blocked;
  const int code = run_capture({"sh", "-c", "grep SigBlk /proc/self/status"}, blocked);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(code, 0);
  // SIGINT is bit 1 and SIGTERM bit 14 of the hexadecimal mask
  const unsigned long mask = std::stoul(blocked.substr(blocked.find(':') + 1), nullptr, 16);
  EXPECT_EQ(mask & ((1ul << (SIGINT - 1)) | (1ul << (SIGTERM - 1))), 0ul) << blocked;
}

TEST(Spawn, OwnProcessGroupOnRequest) {
  SpawnOptions own;
  own.own_group = true;
  for (const bool own_group : {false, true}) {
    const Child child = spawn({"sleep", "30"}, own_group ? own : SpawnOptions{});
    // posix_spawn returns after the exec, so the group is set by now
    EXPECT_EQ(::getpgid(child.pid), own_group ? child.pid : ::getpgrp());
    ::kill(child.pid, SIGKILL);
    EXPECT_EQ(wait_child(child.pid), 128 + SIGKILL);
  }
}

}  // namespace
}  // namespace recall
