// Data parallelism within one process: torchrun's environment is read as it sets it, the ranks'
// rows tile the global batch, the slices' losses and gradients add up to the whole batch's, and
// the checkpoint records the process count. The real binary as several processes:
// test_distributed_runs.cpp; its launcher (--nproc): test_launch_local.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model_test_util.h"
#include "recall/core/error.h"
#include "recall/train/checkpoint.h"
#include "recall/train/data_parallel.h"
#include "recall/train/distributed.h"

namespace recall {
namespace {

// Sets environment variables for a scope, restoring the previous values.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_)
      v ? (void)::setenv(k.c_str(), v->c_str(), 1) : (void)::unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(Distributed, EnvironmentIsReadAsTorchrunSetsIt) {
  {
    ScopedEnv e({{"WORLD_SIZE", "4"},
                 {"RANK", "3"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "10.0.0.7"},
                 {"MASTER_PORT", "23456"}});
    const DistEnv d = dist_env_from_environment();
    EXPECT_EQ(d.rank, 3);
    EXPECT_EQ(d.world_size, 4);
    EXPECT_EQ(d.local_rank, 1);
    EXPECT_EQ(d.local_world_size, 2);
    EXPECT_EQ(d.master_addr, "10.0.0.7");
    EXPECT_EQ(d.master_port, 23456);
  }
  {
    ScopedEnv e({{"WORLD_SIZE", "1"}, {"RANK", "0"}});
    EXPECT_EQ(dist_env_from_environment().world_size, 1);
  }
  {
    ScopedEnv e({{"WORLD_SIZE", "2"}, {"RANK", "1"}});  // one process on each host
    const DistEnv d = dist_env_from_environment();
    EXPECT_EQ(d.local_rank, 0);
    EXPECT_EQ(d.local_world_size, 1);
  }
  // LOCAL_RANK or LOCAL_WORLD_SIZE alone: both or neither
  for (const auto& [k, v] :
       std::vector<std::pair<std::string, std::string>>{{"RANK", "2"},
                                                        {"RANK", "x"},
                                                        {"MASTER_PORT", "70000"},
                                                        {"LOCAL_RANK", "-1"},
                                                        {"LOCAL_RANK", "0"},
                                                        {"LOCAL_WORLD_SIZE", "2"}}) {
    ScopedEnv e({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {k, v}});
    EXPECT_THROW(dist_env_from_environment(), std::invalid_argument) << k << "=" << v;
  }
}

TEST(Distributed, RowsTileTheBatchInOrder) {
  for (int world : {1, 2, 3, 5})
    for (int64_t B : {5, 8, 13}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const auto [first, last] = batch_rows(B, r, world);
        EXPECT_EQ(first, next);
        EXPECT_GE(last - first, B / world);
        EXPECT_LE(last - first, B / world + 1);
        next = last;
      }
      EXPECT_EQ(next, B);
    }
}

// The slices' losses and gradients, each normalised by the global batch's scored count, add up to
// the global batch's (float32 sums in another order: 1e-6), and the ready callback hands over
// each parameter's gradient of the backward once, with the value that lands in .grad.
TEST(Distributed, SlicesOfTheGlobalBatchAddUpToIt) {
  const ModelConfig c = test::small_model(13, 16, 12);
  torch::manual_seed(3);
  Transformer model(c);
  auto data = torch::randint(0, c.vocab_size, {6, c.seq_len + 1});
  auto mask = torch::rand({6, c.seq_len}) < 0.4;
  mask[1].fill_(false);
  const Batch b{data.narrow(1, 0, c.seq_len), data.narrow(1, 1, c.seq_len), mask};
  const auto params = model->parameters();
  auto take = [&] {
    std::vector<torch::Tensor> g;
    for (auto& p : params) {
      g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
      const_cast<torch::Tensor&>(p).mutable_grad().reset();
    }
    return g;
  };
  const double whole = data_parallel_backward(model, b, 1);
  const auto expected = take();
  const int64_t scored = mask.sum().item<int64_t>();
  for (int workers : {1, 2}) {
    for (int world : {2, 3}) {
      double sum = 0;
      std::vector<torch::Tensor> total;
      for (int r = 0; r < world; ++r) {
        const auto slice = batch_rows(6, r, world);  // [first, last)
        auto rows = [&](const torch::Tensor& t) { return t.slice(0, slice.first, slice.second); };
        std::vector<int> calls(params.size(), 0);
        std::vector<torch::Tensor> handed(params.size());
        sum += data_parallel_backward(model, {rows(b.x), rows(b.y), rows(b.mask)}, workers, scored,
                                      [&](size_t i, const torch::Tensor& g) {
                                        ++calls[i];
                                        handed[i] = g.clone();
                                      });
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_EQ(calls[i], 1) << "parameter " << i;
          if (handed[i].defined()) {
            EXPECT_TRUE(torch::equal(handed[i], params[i].grad()));
          }
        }
        auto g = take();
        if (total.empty())
          total = g;
        else
          for (size_t i = 0; i < g.size(); ++i) total[i] += g[i];
      }
      EXPECT_NEAR(sum, whole, 1e-6) << workers << " workers, " << world << " ranks";
      for (size_t i = 0; i < total.size(); ++i)
        EXPECT_TRUE(torch::allclose(total[i], expected[i], 1e-5, 1e-6)) << "parameter " << i;
    }
  }
}

TEST(Distributed, CheckpointRecordsTheProcessCount) {
  Checkpoint c;
  c.config_toml = "x";
  c.step = 3;
  const std::string one = encode_checkpoint(c);
  EXPECT_EQ(one.find("world_size"), std::string::npos);  // one process: the format as before
  EXPECT_EQ(decode_checkpoint(one, "one").world_size, 1);
  c.world_size = 2;
  EXPECT_EQ(decode_checkpoint(encode_checkpoint(c), "two").world_size, 2);
}

}  // namespace
}  // namespace recall
