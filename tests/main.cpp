// The main of every test program. Besides running the tests it makes skips visible:
// - every skipped test prints one line "skipped: Suite.Name: reason" (.ci/run collects them from
//   ctest's log, so a skip next to passing tests in one program is listed too);
// - a program whose tests all skipped exits with kSkippedExitCode, which ctest reports as Skipped
//   (SKIP_RETURN_CODE, cmake/test_suites.cmake) rather than Passed;
// - RECALL_REQUIRE, a ':'-separated list of test names or patterns ('*' and '?' as in
//   --gtest_filter), names tests that must run: one of them skipping fails the program. CI sets it
//   for the tests whose dependency or privilege it has, so that those cannot skip unnoticed.
// - Under RECALL_KERNELS=reference (the *_reference_kernels reruns) the program fails when any
//   fused kernel ran (recall/ops/kernels.h counts their calls).
// - Caches (the measured peak, recall/ops/peak_flops.h) live beside the test program, in
//   <build>/cache, never in the user's ~/.cache: RECALL_CACHE_DIR is set before any test runs, and
//   the recall binaries the tests start inherit it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "recall/core/threads.h"
#include "recall/ops/blas.h"
#include "recall/ops/kernels.h"

namespace {

// Also in cmake/test_suites.cmake (SKIP_RETURN_CODE); 77 is the skip code of Automake's tests.
constexpr int kSkippedExitCode = 77;

// '*' matches any run of characters, '?' any one.
bool glob_match(const char* pattern, const char* name) {
  if (*pattern == '\0') return *name == '\0';
  if (*pattern == '*')
    return glob_match(pattern + 1, name) || (*name && glob_match(pattern, name + 1));
  return *name && (*pattern == '?' || *pattern == *name) && glob_match(pattern + 1, name + 1);
}

bool required(const std::string& test) {
  const char* env = std::getenv("RECALL_REQUIRE");
  if (!env) return false;
  const std::string all = env;
  for (size_t at = 0; at <= all.size();) {
    size_t end = all.find(':', at);
    if (end == std::string::npos) end = all.size();
    const std::string pattern = all.substr(at, end - at);
    if (!pattern.empty() && glob_match(pattern.c_str(), test.c_str())) return true;
    at = end + 1;
  }
  return false;
}

class SkipReport : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { reason_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.skipped()) reason_ = r.message();
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (!t.result()->Skipped()) return;
    const std::string name = std::string(t.test_suite_name()) + "." + t.name();
    std::string why = reason_.empty() ? "no reason given" : reason_;
    for (char& c : why)
      if (c == '\n') c = ' ';  // one line each, for .ci/run's list
    std::printf("skipped: %s: %s\n", name.c_str(), why.c_str());
    if (required(name)) {
      std::printf("error: %s skipped, but RECALL_REQUIRE says it must run here\n", name.c_str());
      required_skipped_ = true;
    }
    std::fflush(stdout);
  }
  bool required_skipped() const { return required_skipped_; }

 private:
  std::string reason_;
  bool required_skipped_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  recall::ensure_fast_blas(argv);
  if (!std::getenv("RECALL_CACHE_DIR")) {
    const auto build = std::filesystem::read_symlink("/proc/self/exe").parent_path();
    setenv("RECALL_CACHE_DIR", (build / "cache").c_str(), 1);
  }
  recall::set_threads(0);
  ::testing::InitGoogleTest(&argc, argv);
  auto* report = new SkipReport;  // owned by gtest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(report);
  const int code = RUN_ALL_TESTS();
  if (code != 0 || report->required_skipped()) return 1;
  // A rerun on the references (RECALL_KERNELS=reference) compares torch with torch only if no
  // fused kernel ran in it.
  if (recall::kernels_from_environment() == recall::Kernels::kReference)
    for (const recall::FastKernel k : recall::all_fast_kernels())
      if (const int64_t n = recall::fast_calls(k); n > 0) {
        std::printf("error: RECALL_KERNELS=reference, but the fused %s kernel ran %lld times\n",
                    recall::to_string(k).c_str(), static_cast<long long>(n));
        return 1;
      }
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (unit->skipped_test_count() > 0 && unit->successful_test_count() == 0) return kSkippedExitCode;
  return 0;
}
