// The README's example of probing a layer from C++ compiles and runs: its lines are the lines
// between the markers below, and the test checks that the README holds each of them.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "recall/models/transformer.h"
#include "test_paths.h"

namespace recall {
namespace {

TEST(ReadmeActivationCache, TheExampleCompilesRunsAndIsInTheReadme) {
  testing::internal::CaptureStdout();
  // README begin
  recall::Transformer model(recall::ModelConfig{});          // or recall::restore(run).model
  auto tokens = torch::randint(96, {2, 16}, torch::kInt64);  // (B, T) token ids
  recall::ActivationCache cache;
  auto logits = model->forward(tokens, &cache);    // (B, T, vocab) as without it
  auto resid = cache.at("blocks.1.resid_mid");     // (B, T, D) residual stream
  auto attn = cache.at("blocks.1.attn.weights");   // (B, H, T, T) rows sum to 1
  auto hidden = cache.at("blocks.1.ffn.weights");  // (B, T, 4 D) hidden units
  for (const auto& name : cache.names()) std::cout << name << "\n";
  // README end
  const std::string names = testing::internal::GetCapturedStdout();
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 96}));
  EXPECT_EQ(resid.sizes(), (std::vector<int64_t>{2, 16, 128}));
  EXPECT_EQ(attn.sizes(), (std::vector<int64_t>{2, 4, 16, 16}));
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{2, 16, 512}));
  EXPECT_NE(names.find("blocks.3.resid_post\n"), std::string::npos) << names;

  std::ifstream self(recall::test::source_dir() + "/tests/models/test_readme_cache.cpp");
  std::ifstream readme_file(recall::test::source_dir() + "/README.md");
  std::stringstream readme;
  readme << readme_file.rdbuf();
  bool inside = false;
  int lines = 0;
  for (std::string line; std::getline(self, line);) {
    if (line.find("// README end") != std::string::npos) break;
    if (inside) {
      const std::string code = line.substr(std::min(line.find_first_not_of(' '), line.size()));
      EXPECT_NE(readme.str().find(code + "\n"), std::string::npos) << "README lacks: " << code;
      ++lines;
    }
    if (line.find("// README begin") != std::string::npos) inside = true;
  }
  EXPECT_EQ(lines, 8);
}

}  // namespace
}  // namespace recall
