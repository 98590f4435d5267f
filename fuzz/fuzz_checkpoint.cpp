// libFuzzer target: the checkpoint reader must refuse any bytes with UsageError, never crash or
// read past the input. The checksum stops almost every input early, so the fuzzer is also given
// inputs whose checksum is made right: the first input byte chooses which.
#include <cstddef>
#include <cstdint>
#include <string>

#include "recall/core/error.h"
#include "recall/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1 && bytes.size() >= 28) {
    const uint64_t sum = recall::fnv1a64(std::string_view(bytes).substr(28));
    for (int i = 0; i < 8; ++i) bytes[20 + i] = static_cast<char>((sum >> (8 * i)) & 0xFF);
  }
  try {
    recall::decode_checkpoint(bytes, "fuzz");
  } catch (const recall::UsageError&) {
  }
  return 0;
}
