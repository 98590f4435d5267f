// libFuzzer target: the torch.save pickle reader must refuse any bytes with UsageError, never
// crash, run past the input or build a tensor outside its storage. Storages are zeros of the size
// the pickle names (up to 2^16 elements; larger ones are refused as a missing record would be).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "recall/core/error.h"
#include "recall/formats/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto storage = [](const std::string&, torch::ScalarType dtype, int64_t numel) {
    if (numel > (1 << 16)) throw recall::UsageError("fuzz: storage too large");
    return torch::zeros({numel}, torch::TensorOptions().dtype(dtype));
  };
  try {
    recall::unpickle(bytes, storage, "fuzz");
  } catch (const recall::UsageError&) {
  }
  return 0;
}
