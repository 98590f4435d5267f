#include "recall/core/allocator.h"

#include <malloc.h>

namespace recall {

void keep_freed_heap() {
  // Fixing M_MMAP_THRESHOLD also turns off glibc's dynamic threshold. 32 MiB is its maximum for
  // heap allocations (half a thread arena's heap).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // the main heap's free top is returned only past 1 GiB
  mallopt(M_TOP_PAD, 64 << 20);  // heaps grow 64 MiB ahead; an emptied arena heap is kept in reach
}

}  // namespace recall
