// End to end: a tiny model trained with FusedAdamW and the data-parallel backward learns to copy.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "recall/ops/fused_adamw.h"
#include "recall/train/data_parallel.h"

namespace recall {
namespace {

TEST(ModelTraining, LearnsToRepeatTheFirstHalf) {
  const ModelConfig c = test::small_model(8, 32, 16);
  torch::manual_seed(11);
  Transformer model(c);
  FusedAdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.0));
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
  for (int step = 0; step < 400; ++step) {
    auto data = batch();
    optimizer.zero_grad();
    const Batch b{data.narrow(1, 0, 16), data.narrow(1, 1, 16),
                  torch::ones({16, 16}, torch::kBool)};
    data_parallel_backward(model, b, 2);
    optimizer.step();
  }
  const double after = copy_loss(held_out);
  EXPECT_GT(before, 1.8);                        // about ln 8 at init
  EXPECT_LT(after, 0.5) << "before " << before;  // 0.18 when written
}

}  // namespace
}  // namespace recall
