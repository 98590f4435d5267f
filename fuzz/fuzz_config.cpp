// libFuzzer target: the config parser must refuse any bytes with std::invalid_argument, never
// crash.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "recall/train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const recall::TrainConfig c = recall::train_config_from_toml(text, "fuzz");
    recall::train_config_from_toml(c.to_toml(), "printed");  // what is printed must parse back
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
