#pragma once

namespace recall {

// Tunes glibc's malloc for training loops, which free and re-allocate the same few-MiB activation
// tensors every step. By default glibc hands such blocks back to the kernel (munmap, trimming the
// heap top, deleting a thread arena's emptied 64 MiB heaps), so every step page-faults its
// activations in again, one 4 KiB zeroed page at a time: about 140 MB a step on the bench-gpt
// model, a tenth of the step. This keeps freed memory in the process instead (allocations up to
// 32 MiB come from the heaps; heaps are neither trimmed nor deleted below 64 MiB of free top).
// Peak memory is unchanged; the process just does not shrink. Call once, before threads start.
void keep_freed_heap();

}  // namespace recall
