#pragma once
#include <string>

namespace recall {
// Sets torch's intra-op threads; n <= 0 means all cores. Torch here defaults to 1 thread.
// Returns the number set.
int set_threads(int n);
}  // namespace recall
