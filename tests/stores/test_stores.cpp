// Every store against a naive loop over its memories, exact-recall properties, gradients and
// argument checks.
#include <gtest/gtest.h>

#include <cmath>

#include "recall/stores/delta.h"
#include "recall/stores/store.h"
#include "recall/stores/weight_function_store.h"

using namespace recall;

namespace {

torch::Tensor unit_rows(int64_t n, int64_t d, torch::ScalarType dtype, int seed) {
  torch::manual_seed(seed);
  auto x = torch::randn({n, d}, dtype);
  return x / x.norm(2, 1, true);
}

// f(x) = sum_i w_i(x) v_i with w from docs/science.md §1, one memory at a time.
torch::Tensor naive_recall(const StoreSpec& spec, const torch::Tensor& K, const torch::Tensor& V,
                           const torch::Tensor& X) {
  auto out = torch::zeros({X.size(0), V.size(1)}, X.options());
  for (int64_t q = 0; q < X.size(0); ++q) {
    double norm = 0;
    std::vector<double> w(K.size(0));
    for (int64_t i = 0; i < K.size(0); ++i) {
      const double s = K[i].dot(X[q]).item<double>();
      w[i] = spec.weight(s);
      norm += w[i];
    }
    for (int64_t i = 0; i < K.size(0); ++i) {
      const double wi = spec.weight.kind == WeightKind::kSoftmax ? w[i] / norm : w[i];
      out[q] += wi * V[i];
    }
  }
  return out;
}

}  // namespace

TEST(Stores, WeightFunctionStoresMatchNaiveLoop) {
  // Tolerance: float64 products of 40 terms, 1e-10 relative to the largest entry.
  const auto K = unit_rows(40, 16, torch::kFloat64, 1), V = unit_rows(40, 8, torch::kFloat64, 2);
  const auto X = unit_rows(7, 16, torch::kFloat64, 3);
  for (const char* name : {"outer_product", "linear", "relu", "relu2", "relu3", "relu5", "swiglu",
                           "exp2", "exp3", "exp4", "softmax"}) {
    const auto spec = StoreSpec::parse(name, 4.0);
    auto store = make_store(spec, 16, 8);
    store->write(K.slice(0, 0, 25), V.slice(0, 0, 25));
    store->write(K.slice(0, 25), V.slice(0, 25));  // writes append
    ASSERT_EQ(store->size(), 40);
    const auto want = naive_recall(spec, K, V, X);
    const double scale = want.abs().max().item<double>();
    EXPECT_LT((store->forward(X) - want).abs().max().item<double>(), 1e-10 * scale) << name;
    EXPECT_LT((store->recall_weights(X).mm(V) - want).abs().max().item<double>(), 1e-10 * scale)
        << name;
  }
}

TEST(Stores, Float32MatchesFloat64) {
  // Tolerance: float32 rounding over 64 terms, 1e-5 relative.
  const auto K = unit_rows(64, 32, torch::kFloat64, 4), V = unit_rows(64, 32, torch::kFloat64, 5);
  for (const char* name :
       {"outer_product", "least_squares", "relu2", "swiglu", "softmax", "delta"}) {
    auto a = make_store(StoreSpec::parse(name), 32, 32),
         b = make_store(StoreSpec::parse(name), 32, 32);
    a->write(K, V);
    b->write(K.to(torch::kFloat32), V.to(torch::kFloat32));
    auto ra = a->forward(K), rb = b->forward(K.to(torch::kFloat32));
    EXPECT_EQ(rb.scalar_type(), torch::kFloat32) << name;
    EXPECT_LT((ra - rb.to(torch::kFloat64)).abs().max().item<double>(),
              1e-5 * std::max(1.0, ra.abs().max().item<double>()))
        << name;
  }
}

TEST(Stores, LeastSquaresRecallsExactlyUpToDk) {
  for (int64_t M : {1, 16, 63, 64}) {
    const auto K = unit_rows(M, 64, torch::kFloat64, 10 + M),
               V = unit_rows(M, 64, torch::kFloat64, 20);
    auto store = make_store(StoreSpec::parse("least_squares"), 64, 64);
    store->write(K, V);
    auto err = (store->forward(K) - V).norm(2, 1);  // interference / signal, signal = |v| = 1
    EXPECT_LT(err.max().item<double>(), 1e-4) << "M = " << M;
  }
  // Past d_k the least-squares fit is no longer exact.
  const auto K = unit_rows(128, 64, torch::kFloat64, 7), V = unit_rows(128, 64, torch::kFloat64, 8);
  auto store = make_store(StoreSpec::parse("least_squares"), 64, 64);
  store->write(K, V);
  EXPECT_GT((store->forward(K) - V).norm(2, 1).mean().item<double>(), 0.3);
}

TEST(Stores, OuterProductRecallsExactlyWithOrthonormalKeys) {
  torch::manual_seed(3);
  auto Q = std::get<0>(torch::linalg_qr(torch::randn({64, 64}, torch::kFloat64)));  // orthonormal
  const auto V = unit_rows(64, 32, torch::kFloat64, 9);
  auto store = make_store(StoreSpec::parse("outer_product"), 64, 32);
  store->write(Q.t(), V);  // rows of Q^T are orthonormal
  EXPECT_LT((store->forward(Q.t()) - V).abs().max().item<double>(), 1e-12);
  // Random keys interfere: the essay's sqrt(M / d) at M = d is about 1.
  const auto K = unit_rows(64, 64, torch::kFloat64, 11);
  auto random = make_store(StoreSpec::parse("outer_product"), 64, 32);
  random->write(K, V);
  const double isr = ((random->forward(K) - V).norm(2, 1)).mean().item<double>();
  EXPECT_GT(isr, 0.7);
  EXPECT_LT(isr, 1.3);
}

TEST(Stores, DeltaRuleWeightsMatchSequentialStateAndOrthonormalKeysAreExact) {
  const auto K = unit_rows(30, 16, torch::kFloat64, 12), V = unit_rows(30, 8, torch::kFloat64, 13);
  for (double rate : {1.0, 0.5}) {
    DeltaStore store(DeltaStoreOptions(16, 8).rate(rate));
    store->write(K, V);
    // The WY form X K^T T V against the state S built one write at a time.
    EXPECT_LT((store->recall_weights(K).mm(V) - store->forward(K)).abs().max().item<double>(),
              1e-10);
  }
  torch::manual_seed(4);
  auto Q = std::get<0>(torch::linalg_qr(torch::randn({16, 16}, torch::kFloat64)));
  DeltaStore exact(DeltaStoreOptions(16, 8));
  exact->write(Q.t(), V.slice(0, 0, 16));
  EXPECT_LT((exact->forward(Q.t()) - V.slice(0, 0, 16)).abs().max().item<double>(), 1e-12);
}

TEST(Stores, GradientsFlowToKeysAndValues) {
  // d/dK and d/dV of sum(recall) against central differences, float64, tolerance 1e-6. Written
  // memories are state (buffers), so the recall as a function of its memories is differentiated.
  for (const char* name : {"relu2", "swiglu", "exp3", "softmax"}) {
    auto K = unit_rows(6, 5, torch::kFloat64, 14).requires_grad_(true);
    auto V = unit_rows(6, 3, torch::kFloat64, 15).requires_grad_(true);
    const auto X = unit_rows(4, 5, torch::kFloat64, 16);
    auto loss_of = [&](const torch::Tensor& k, const torch::Tensor& v) {
      return weight_function_recall(StoreSpec::parse(name, 2.0).weight, k, v, X).pow(2).sum();
    };
    loss_of(K, V).backward();
    ASSERT_TRUE(K.grad().defined() && V.grad().defined()) << name;
    torch::NoGradGuard no_grad;
    const double h = 1e-6;
    for (auto [tensor, grad] : {std::pair{K, K.grad()}, std::pair{V, V.grad()}}) {
      auto e = torch::zeros_like(tensor);
      e[2][1] = h;
      const bool is_k = tensor.is_same(K);
      const double up = (is_k ? loss_of(K + e, V) : loss_of(K, V + e)).item<double>();
      const double dn = (is_k ? loss_of(K - e, V) : loss_of(K, V - e)).item<double>();
      EXPECT_NEAR(grad[2][1].item<double>(), (up - dn) / (2 * h), 1e-6) << name;
    }
  }
}

TEST(Stores, BadArgumentsNameTheArgumentAndRange) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { make_store(StoreSpec::parse("relu"), 0, 4); }).find("d_k = 0"),
            std::string::npos);
  EXPECT_NE(message([] { make_store(StoreSpec::parse("relu"), 4, -1); }).find("d_v = -1"),
            std::string::npos);
  EXPECT_NE(message([] {
              make_store(StoreSpec::parse("relu"), 4, 4)
                  ->write(torch::zeros({3, 4}), torch::zeros({2, 4}));
            }).find("counts 3 and 2"),
            std::string::npos);
  EXPECT_NE(message([] {
              auto k = torch::zeros({2, 4});
              k[0][0] = std::nan("");
              make_store(StoreSpec::parse("softmax"), 4, 4)->write(k, torch::zeros({2, 4}));
            }).find("finite"),
            std::string::npos);
  EXPECT_NE(message([] { StoreSpec::parse("relu0"); }).find("p = 0"), std::string::npos);
  EXPECT_NE(message([] { StoreSpec::parse("exp0"); }).find("n = 0"), std::string::npos);
  EXPECT_NE(message([] { StoreSpec::parse("softmax", 0.0); }).find("beta = 0"), std::string::npos);
  EXPECT_NE(message([] { StoreSpec::parse("softmax", -2.0); }).find("> 0"), std::string::npos);
  EXPECT_NE(message([] { StoreSpec::parse("hopfield"); }).find("'hopfield' is unknown"),
            std::string::npos);
  EXPECT_NE(message([] {
              make_store(StoreSpec::parse("relu"), 4, 4)->forward(torch::zeros({2, 5}));
            }).find("d_k = 4"),
            std::string::npos);
}

TEST(Stores, NamesRoundTrip) {
  for (const char* name : {"outer_product", "least_squares", "delta", "linear", "relu", "relu2",
                           "relu3", "relu7", "swiglu", "exp2", "exp3", "exp4", "exp9", "softmax"})
    EXPECT_EQ(StoreSpec::parse(name).name(), name);
}
