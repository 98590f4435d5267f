// Data-parallel backward: same loss and gradients as one backward over the whole batch.
#include <gtest/gtest.h>

#include "recall/train/data_parallel.h"

namespace recall {
namespace {

TEST(ModelDataParallel, GradientsEqualOneBackwardOverTheBatch) {
  ModelConfig c;
  c.vocab_size = 13;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.seq_len = 12;
  c.attn_mem_kv = 2;
  torch::manual_seed(10);
  Transformer model(c);
  auto data = torch::randint(0, c.vocab_size, {5, c.seq_len + 1});
  auto inputs = data.narrow(1, 0, c.seq_len), targets = data.narrow(1, 1, c.seq_len);
  auto logits = model(inputs);
  auto loss =
      torch::nn::functional::cross_entropy(logits.reshape({-1, c.vocab_size}), targets.reshape(-1));
  loss.backward();
  std::vector<torch::Tensor> expected;
  for (auto& p : model->parameters()) {
    expected.push_back(p.grad().clone());
    p.mutable_grad().reset();
  }
  const int threads = at::get_num_threads();
  for (int workers : {1, 2, 3}) {
    const double l = data_parallel_backward(model, inputs, targets, workers);
    EXPECT_NEAR(l, loss.item<double>(), 1e-5) << workers;
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT((params[i].grad() - expected[i]).abs().max().item<double>(), 1e-6)
          << workers << " " << i;
      params[i].mutable_grad().reset();
    }
  }
  EXPECT_EQ(at::get_num_threads(), threads);
}

}  // namespace
}  // namespace recall
