// Column sums of an (n, w) float32 block (bias, and LayerNorm weight, gradients), taken inside a
// pass that reads its rows anyway or as a pass of their own: one chunk of rows per thread, each
// with its own sums, added up after, so no thread waits on another's and the result does not
// depend on the thread that ran a chunk.
#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "recall/core/torch.h"

namespace recall {

// rows(begin, end, sums) handles rows [begin, end) and adds their columns to sums: `count` rows
// of w floats, zeroed (count 2: LayerNorm's weight and bias sums side by side). Returns the sums,
// (count, w).
template <typename Rows>
torch::Tensor column_sums(int64_t n, int64_t w, int64_t count, const torch::TensorOptions& options,
                          const Rows& rows) {
  const int64_t chunks = std::min<int64_t>(at::get_num_threads(), std::max<int64_t>(n, 1));
  auto partial = torch::zeros({chunks, count, w}, options);
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      rows(n * c / chunks, n * (c + 1) / chunks, partial[c].data_ptr<float>());
  });
  // one chunk (a training worker's single thread): its sums, without a torch op to add them
  return chunks == 1 ? partial[0] : partial.sum(0);  // (count, w)
}

}  // namespace recall
