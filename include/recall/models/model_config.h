// Reading ModelConfig from a flat TOML table whose keys are the ModelConfig field names.
#pragma once
#include <toml++/toml.h>

#include <string>
#include <vector>

#include "recall/models/model.h"

namespace recall {

// Reads the model keys present in `table` over the defaults of ModelConfig and validates the
// result. Keys that are not model keys are ignored (the caller owns them); the model keys found are
// appended to used_keys when given. Throws std::invalid_argument naming the key on a wrong type or
// value.
ModelConfig model_config_from_toml(const toml::table& table,
                                   std::vector<std::string>* used_keys = nullptr);

}  // namespace recall
