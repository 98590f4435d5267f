#include <gtest/gtest.h>

#include "old_model_archive.h"
#include "recall/core/error.h"
#include "recall/models/block.h"
#include "recall/train/checkpoint.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

using test::TempDir;

Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.config_toml = test::tiny_mqar().to_toml();
  c.step = 42;
  c.task_rng = "1 2 3";
  c.torch_rng = std::string("\x00\x01\x02", 3);
  c.vocabulary = {10, 97, 0x2211};
  c.model = "model bytes";
  c.optimizer = "optimizer bytes";
  return c;
}

std::string refusal(const std::string& bytes) {
  try {
    decode_checkpoint(bytes, "ck.bin");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, EncodeDecodeRoundTrip) {
  const Checkpoint c = sample_checkpoint();
  const Checkpoint d = decode_checkpoint(encode_checkpoint(c), "mem");
  EXPECT_EQ(d.config_toml, c.config_toml);
  EXPECT_EQ(d.step, 42);
  EXPECT_EQ(d.task_rng, c.task_rng);
  EXPECT_EQ(d.torch_rng, c.torch_rng);
  EXPECT_EQ(d.vocabulary, c.vocabulary);
  EXPECT_EQ(d.model, c.model);
  EXPECT_EQ(d.optimizer, c.optimizer);
}

TEST(Checkpoint, TruncatedFlippedAndForeignAreRefused) {
  const std::string bytes = encode_checkpoint(sample_checkpoint());
  for (size_t keep : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_NE(refusal(bytes.substr(0, keep)).find("truncated"), std::string::npos) << keep;
  // every byte of the payload is covered by the checksum; the header is checked field by field
  for (size_t at = 0; at < bytes.size(); at += 7) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    EXPECT_NE(refusal(bad), "") << "flip at " << at;
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 3] ^= 1;
  EXPECT_NE(refusal(flipped).find("checksum"), std::string::npos);
  EXPECT_NE(refusal("PK\x03\x04 not ours at all, but long enough").find("bad magic"),
            std::string::npos);
}

TEST(Checkpoint, SavedAtomicallyWithoutLeftovers) {
  TempDir dir;
  const std::string path = dir / "checkpoint.bin";
  save_checkpoint(path, sample_checkpoint());
  Checkpoint next = sample_checkpoint();
  next.step = 43;
  save_checkpoint(path, next);
  EXPECT_EQ(load_checkpoint(dir.path().string()).step, 43);  // a run folder works as well
  EXPECT_THROW(save_checkpoint(dir / "missing/checkpoint.bin", next), std::runtime_error);
  size_t files = 0;  // no temporary files are left behind
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST(Checkpoint, ModelAndOptimizerRoundTrip) {
  torch::manual_seed(0);
  const TrainConfig cfg = test::tiny_mqar();
  Transformer a(cfg.model), b(cfg.model);
  torch::optim::AdamW opt_a(a->parameters(), torch::optim::AdamWOptions(1e-3));
  auto x = torch::randint(cfg.model.vocab_size, {2, 16});
  for (int i = 0; i < 2; ++i) {
    opt_a.zero_grad();
    a->forward(x).square().mean().backward();
    opt_a.step();
  }
  load_module_bytes(*b, module_bytes(*a));
  torch::optim::AdamW opt_b(b->parameters(), torch::optim::AdamWOptions(1e-3));
  load_optimizer_bytes(opt_b, optimizer_bytes(opt_a));
  EXPECT_TRUE(a->forward(x).equal(b->forward(x)));
  // one more identical step on both: equal only if the Adam moments and step count came across
  for (auto* pair : {&opt_a, &opt_b}) {
    auto& model = pair == &opt_a ? a : b;
    pair->zero_grad();
    model->forward(x).square().mean().backward();
    pair->step();
  }
  auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(pa[i].equal(pb[i])) << i;
  // a model of another shape is refused
  TrainConfig wide = cfg;
  wide.model.d_model = 64;
  Transformer c(wide.model);
  EXPECT_ANY_THROW(load_module_bytes(*c, module_bytes(*a)));
}

// A checkpoint written before the blocks were the list "blocks" (block0.attn... and no head_mask)
// loads into today's model: the same tensors, so the same logits bit for bit.
TEST(Checkpoint, ModelWithTheOldBlockNamesLoads) {
  torch::manual_seed(0);
  TrainConfig cfg = test::tiny_mqar({"attn_mem_kv=2", "ffn=learned_kv", "ffn_slots=4"});
  Transformer a(cfg.model), b(cfg.model);
  const std::string old = test::old_layout_bytes(*a);
  EXPECT_EQ(old.find("blocks"), std::string::npos);  // the old names only
  EXPECT_NE(old.find("block1"), std::string::npos);
  load_module_bytes(*b, old);
  auto x = torch::randint(cfg.model.vocab_size, {2, 16});
  EXPECT_TRUE(a->forward(x).equal(b->forward(x)));
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) EXPECT_FALSE(b->block(l)->attn->heads_masked());
  // and a file of another shape is still refused
  cfg.model.d_model = 64;
  Transformer c(cfg.model);
  EXPECT_ANY_THROW(load_module_bytes(*c, old));
}

TEST(Checkpoint, ConfigMismatchIsRefusedNamingTheKey) {
  const TrainConfig cfg = test::tiny_mqar();
  const TrainConfig other = test::tiny_mqar({"lr=0.01"});
  check_checkpoint_config(cfg, cfg.to_toml(), "ck.bin");
  try {
    check_checkpoint_config(other, cfg.to_toml(), "ck.bin");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("lr = 0.003, this run has lr = 0.01"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace recall
