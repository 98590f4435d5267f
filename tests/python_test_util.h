// A Python that imports torch, for the tests that check recall against a PyTorch program:
// $RECALL_PYTHON, Debian's /usr/bin/python3, then python3 on PATH; "" when none does (the tests
// that need one skip).
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

namespace recall::test {
inline std::string python_with_torch() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RECALL_PYTHON")) candidates.push_back(env);
  candidates.insert(candidates.end(), {"/usr/bin/python3", "python3"});
  for (const auto& py : candidates)
    if (std::system((py + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}
}  // namespace recall::test
