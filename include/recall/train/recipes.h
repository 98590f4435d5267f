// The training recipes of train/ (mqar-tiny, mqar-extrapolate, facts-tiny, text-tiny, text-small,
// bench-gpt), compiled into the library: `--config mqar-tiny` works from any folder, and
// `recall report` needs no source tree. A recipe names its model shape (`model = "tiny-attn"`, a
// shape of models/ or a file) and adds the task and trainer keys and any model keys it overrides.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recall {

// The TOML text of the recipe `name` (the file name without .toml), or nullopt.
std::optional<std::string_view> train_recipe_toml(const std::string& name);
std::vector<std::string> train_recipe_names();

}  // namespace recall
