// Every feed-forward kind trains: 16 steps of mqar-tiny and facts-tiny, and the loss falls.
#include <gtest/gtest.h>

#include <numeric>

#include "recall/stores/feed_forward.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall {
namespace {

double mean(const std::vector<double>& v, size_t from, size_t n) {
  return std::accumulate(v.begin() + from, v.begin() + from + n, 0.0) / static_cast<double>(n);
}

TEST(FfnKinds, EveryKindTrainsOnMqarAndFacts) {
  for (const char* preset : {"mqar-tiny", "facts-tiny"})
    for (const auto& name : feed_forward_names()) {
      SCOPED_TRACE(std::string(preset) + " " + name);
      const auto [kind, activation] = feed_forward_from_name(name);
      test::TempDir dir;
      const TrainConfig cfg = train_config_from_file(
          preset, {"ffn=" + to_string(kind), "activation=" + to_string(activation), "ffn_mult=2",
                   "ffn_slots=16", "steps=16", "batch_size=8", "lr=1e-2", "min_lr=1e-3",
                   "warmup_steps=2", "eval_batches=1", "eval_every=16", "log_every=16"});
      EXPECT_EQ(cfg.model.ffn, kind);
      TrainOptions o;
      o.out_dir = dir / "run";
      o.progress = false;
      o.print_config = false;
      const TrainResult r = train(cfg, o);
      ASSERT_EQ(r.losses.size(), 16u);
      EXPECT_LT(mean(r.losses, 12, 4), mean(r.losses, 0, 4));
    }
}

}  // namespace
}  // namespace recall
