// A trained checkpoint shared by the inspect and extrapolate tests.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "recall/core/threads.h"
#include "recall/train/trainer.h"
#include "train_test_util.h"

namespace recall::test {

// Trains `toml` on one thread (seconds; two threads on a busy machine are several times slower)
// into a folder that lives as long as the test binary.
inline std::string train_small_once(const char* toml, const char* name) {
  static std::vector<std::unique_ptr<TempDir>> dirs;
  dirs.push_back(std::make_unique<TempDir>());
  TrainOptions o;
  o.out_dir = *dirs.back() / "run";
  o.progress = false;
  set_threads(1);
  train(train_config_from_toml(toml, name), o);
  set_threads(0);
  return o.out_dir;
}

// A small mqar (2 pairs in 16 tokens) that reaches full accuracy in about 250 steps, trained on one
// thread (seconds; two threads on a busy machine are several times slower) once per test binary.
inline const std::string& trained_small_mqar() {
  static const std::string run = train_small_once(R"(
task = "mqar"
vocab_size = 16
mqar_pairs = 2
seq_len = 16
d_model = 32
n_layers = 2
n_heads = 2
ffn_mult = 1
steps = 300
batch_size = 64
lr = 3e-3
min_lr = 3e-4
warmup_steps = 30
eval_batches = 2
log_every = 100
seed = 7
)",
                                                  "small mqar");
  return run;
}

// The essay's store in a small trained model (mqar-store's design at a tenth of its size): no
// positions, the q, k, v convolution, unit q and k at beta = 6, 31 keys, 4 pairs in 16 tokens;
// full accuracy in 300 steps, about 4 s on one thread, trained once per test binary. Its heads
// recall by content alone, the regime of the ISR forecast.
inline const std::string& trained_small_store() {
  static const std::string run = train_small_once(R"(
task = "mqar"
vocab_size = 64
mqar_pairs = 4
seq_len = 16
d_model = 32
n_layers = 2
n_heads = 2
pos = "none"
attn_conv = 2
attn_qk_norm = true
attn_scale = 6.0
ffn = "none"
steps = 300
batch_size = 64
lr = 3e-3
min_lr = 3e-4
warmup_steps = 30
eval_batches = 2
log_every = 100
seed = 7
)",
                                                  "small store");
  return run;
}

}  // namespace recall::test
