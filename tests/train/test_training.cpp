// End to end: a tiny model trained with FusedAdamW and the data-parallel backward learns to copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "recall/ops/fused_adamw.h"
#include "recall/train/data_parallel.h"

namespace recall {
namespace {

// Copying at a fixed offset is learnt by most seeds and missed by a few (a plateau near 0.7): a
// distribution, so 5 seeds, of which at least 3 must learn. With one seed the test passed or
// failed on the last bits of a kernel's sums (seed 11 went from 0.11 to 0.66 in the clang build
// when the row reductions changed order). Measured on seeds 11 to 20: 9 of 10 learn (GCC build),
// 8 of 8 (clang's sanitized build, seeds 11 to 18); a model that cannot copy stays near ln 8.
TEST(ModelTraining, LearnsToRepeatTheFirstHalf) {
  const ModelConfig c = test::small_model(8, 64, 16);
  std::vector<double> after;
  for (uint64_t seed = 11; seed < 16; ++seed) {
    torch::manual_seed(seed);
    Transformer model(c);
    FusedAdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.0));
    // Sequences x x with x of 8 random tokens: the second half is predictable only by attention.
    auto batch = [&] {
      auto half = torch::randint(0, c.vocab_size, {16, 8});
      return torch::cat({half, half, half.narrow(1, 0, 1)}, 1);  // (16, 17)
    };
    auto copy_loss = [&](const torch::Tensor& data) {  // cross-entropy on the copied positions
      torch::NoGradGuard no_grad;
      auto logits = model(data.narrow(1, 0, 16)).narrow(1, 8, 7);
      return torch::nn::functional::cross_entropy(logits.reshape({-1, c.vocab_size}),
                                                  data.narrow(1, 9, 7).reshape(-1))
          .item<double>();
    };
    const auto held_out = batch();
    const double before = copy_loss(held_out);
    EXPECT_GT(before, 1.8) << "seed " << seed;  // about ln 8 at init
    for (int step = 0; step < 600; ++step) {
      auto data = batch();
      optimizer.zero_grad();
      const Batch b{data.narrow(1, 0, 16), data.narrow(1, 1, 16),
                    torch::ones({16, 16}, torch::kBool)};
      data_parallel_backward(model, b, 2);
      optimizer.step();
    }
    after.push_back(copy_loss(held_out));
  }
  const auto learnt = std::count_if(after.begin(), after.end(), [](double l) { return l < 0.5; });
  std::string losses;
  for (double l : after) losses += " " + std::to_string(l);
  EXPECT_GE(learnt, 3) << "copy loss after training, seeds 11 to 15:" << losses;
}

}  // namespace
}  // namespace recall
