// The preset configs of models/ (mqar-tiny, mqar-extrapolate, facts-tiny, text-tiny, text-small,
// bench-gpt), compiled into the library: `--config mqar-tiny` works from any folder, and
// `recall report` needs no source tree.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recall {

// The TOML text of the preset `name` (the file name without .toml), or nullopt.
std::optional<std::string_view> preset_toml(const std::string& name);
std::vector<std::string> preset_names();

// What --config `path` names: nullopt when a file is there (read the file), else the preset of
// that name, if any. A file always wins over a preset of the same name.
std::optional<std::string_view> preset_for_config(const std::string& path);

}  // namespace recall
