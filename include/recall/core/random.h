// Seeded random numbers: splitmix64 derives independent seeds (of trials, blocks, lanes) from one,
// so that every draw is a function of the user's seed alone, whatever the thread count. The fast
// normal stream built on it is a kernel (recall/ops/normal.h).
#pragma once
#include <cstdint>

namespace recall {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace recall
