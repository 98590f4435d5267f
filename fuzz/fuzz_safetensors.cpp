// libFuzzer target: the safetensors reader must refuse any bytes with UsageError, never crash or
// read past the input. A random length prefix almost never fits the input, so the first input byte
// chooses whether the rest is taken as it is or as "JSON header NUL data" framed with the header's
// true length.
#include <cstddef>
#include <cstdint>
#include <string>

#include "recall/core/error.h"
#include "recall/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    const size_t n = std::min(bytes.find('\0'), bytes.size());
    std::string framed(8, '\0');
    for (int i = 0; i < 8; ++i) framed[i] = static_cast<char>((uint64_t{n} >> (8 * i)) & 0xFF);
    bytes = framed + bytes.substr(0, n) + (n < bytes.size() ? bytes.substr(n + 1) : "");
  }
  try {
    recall::read_safetensors(bytes, "fuzz");
  } catch (const recall::UsageError&) {
  }
  return 0;
}
