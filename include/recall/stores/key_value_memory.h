// The memories of a store, appended by write(): keys (M, d_k), values (M, d_v). Kept as tensors
// that stay connected to the autograd graph of what was written, so gradients reach keys and
// values.
#pragma once
#include <torch/torch.h>

namespace recall {

struct KeyValueMemory {
  int64_t d_k = 0, d_v = 0;
  torch::Tensor keys, values;  // undefined until the first write
  void append(const torch::Tensor& k, const torch::Tensor& v);
  int64_t size() const { return keys.defined() ? keys.size(0) : 0; }
};

}  // namespace recall
