// The safetensors reader and writer (recall/formats/safetensors.h): a round trip, and every way a
// header can lie about its data, refused with one line that says how.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "recall/core/error.h"
#include "recall/formats/safetensors.h"

namespace recall {
namespace {

TEST(Safetensors, ReaderRefusesOverlapsAndHoles) {
  const std::string bytes =
      safetensors_bytes({{"a", torch::ones({2})}, {"b", torch::zeros({3})}}, {{"k", "v"}});
  const auto ok = read_safetensors(bytes, "ok");
  ASSERT_EQ(ok.tensors.size(), 2u);
  EXPECT_TRUE(torch::equal(ok.tensors[1].second, torch::zeros({3})));
  EXPECT_EQ(ok.metadata.at("k"), "v");
  auto with = [&](const std::string& header) {
    std::string h = header;
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
    return out + h + std::string(20, '\0');
  };
  const std::pair<std::string, std::string> bad[] = {
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
       "overlap"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
       "hole"},
      {R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,20]},"__metadata__":{"k":1}})",
       "not a string"},
      {R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,20]}})",
       "overflows"},
      {R"({"a":{"dtype":"Q4","shape":[5],"data_offsets":[0,20]}})", "dtype \"Q4\""},
      {R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[20,0]}})", "outside"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "cover 16 of the 20"}};
  for (const auto& [header, needle] : bad) {
    try {
      read_safetensors(with(header), "bad");
      ADD_FAILURE() << "accepted " << header;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace recall
