// libFuzzer target: the readers of other programs' config.json (GPT-2's, and the Llama, Qwen2 and
// Qwen3 families') must refuse any bytes with UsageError, never crash; a config they accept must
// be written back by the export of its format and read again as the same model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "recall/core/error.h"
#include "recall/train/foreign_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const recall::ModelConfig c = recall::model_config_from_llama_json(text, "fuzz");
    const recall::LlamaFamily f =
        recall::llama_family_from_string(recall::foreign_model_type(text));
    const auto back = recall::model_config_from_llama_json(
        recall::llama_json_from_model_config(c, f, "fuzz").dump(), "printed");
    if (recall::model_config_items(back) != recall::model_config_items(c)) __builtin_trap();
  } catch (const recall::UsageError&) {
  }
  try {
    recall::model_config_from_gpt2_json(text, "fuzz");
  } catch (const recall::UsageError&) {
  }
  return 0;
}
