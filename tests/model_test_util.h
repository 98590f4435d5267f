// The tests' small model: small enough for exact comparisons against references and for
// finite differences, large enough for every store kind (2 heads, feed-forward stores at 2 d
// hidden units, 3 learned slots). Each test sets what it varies on the result.
#pragma once
#include "recall/models/model_config.h"

namespace recall::test {

inline ModelConfig small_model(int64_t vocab_size, int64_t d_model, int64_t seq_len,
                               int64_t n_layers = 2) {
  ModelConfig c;
  c.vocab_size = vocab_size;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.n_heads = 2;
  c.seq_len = seq_len;
  c.ffn_mult = 2;
  c.ffn_slots = 3;
  return c;
}

}  // namespace recall::test
