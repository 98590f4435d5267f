// torch.save's format both ways (recall/formats/torch_save.h and torch_pickle.h): a dict of tensors
// written by recall reads back name for name and bit for bit in recall's reader and in LibTorch's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "recall/core/io.h"
#include "recall/formats/torch_pickle.h"
#include "recall/formats/torch_save.h"

namespace recall {
namespace {

TEST(TorchSave, StateDictReadsBackInRecallAndLibTorch) {
  torch::manual_seed(1);
  const NamedTensors state = {{"a.weight", torch::randn({3, 4})},
                              {"a.bias", torch::randn({4})},
                              {"b", torch::randn({2, 2, 2})}};
  const std::string zip = state_dict_pickle(state);
  const auto dict = torch::pickle_load(std::vector<char>(zip.begin(), zip.end())).toGenericDict();
  ASSERT_EQ(dict.size(), state.size());
  for (const auto& [name, t] : state)
    EXPECT_TRUE(torch::equal(dict.at(name).toTensor(), t)) << name;
  const auto path = std::filesystem::temp_directory_path() / "recall_torch_save_test.pt";
  write_file_atomic(path.string(), zip);
  const PickleRef back = read_torch_file(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(back->kind, PickleValue::Kind::kDict);
  ASSERT_EQ(back->entries.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(back->entries[i].first->s, state[i].first);
    EXPECT_TRUE(torch::equal(back->entries[i].second->tensor, state[i].second)) << state[i].first;
  }
}

}  // namespace
}  // namespace recall
