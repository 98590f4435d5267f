// A Python for the tests that check recall against a PyTorch program: the first of $RECALL_PYTHON,
// Debian's /usr/bin/python3, python3 on PATH, and the venv named by $RECALL_TORCH_VENV (made by
// scripts/torch2_venv.sh; never looked for in ~/.cache unnamed) that imports the modules asked for;
// "" when none does (the tests that need one skip, and CI's RECALL_REQUIRE makes that a failure).
// CI runs the tests that need torch alone twice: under Debian's torch 1.13, then with RECALL_PYTHON
// set to the venv's torch 2.x (ctest -L python); those that need transformers run once, under the
// venv (cmake/test_suites.cmake labels them `transformers`).
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

namespace recall::test {
inline std::string python_with(const std::string& modules) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RECALL_PYTHON")) candidates.push_back(env);
  candidates.insert(candidates.end(), {"/usr/bin/python3", "python3"});
  if (const char* venv = std::getenv("RECALL_TORCH_VENV"))
    candidates.push_back(std::string(venv) + "/bin/python3");
  for (const auto& py : candidates)
    if (std::system((py + " -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}
inline std::string python_with_torch() {
  return python_with("torch");
}
}  // namespace recall::test
