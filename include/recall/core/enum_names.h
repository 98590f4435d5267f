// Enums spelled as strings: config values and command-line names map to `enum class` values by a
// table of names in enum order. One rule for every enum, so every message lists what is accepted.
#pragma once
#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <string>

namespace recall {

template <typename Enum, size_t N>
std::string enum_name(const std::array<const char*, N>& names, Enum v) {
  return names[static_cast<size_t>(v)];
}

// Throws std::invalid_argument "<what> '<s>' is unknown: use one of a, b, c".
template <typename Enum, size_t N>
Enum enum_from_name(const std::array<const char*, N>& names, const std::string& s,
                    const char* what) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<Enum>(i);
  std::string accepted;
  for (size_t i = 0; i < N; ++i) accepted += (i ? ", " : "") + std::string(names[i]);
  throw std::invalid_argument(fmt::format("{} '{}' is unknown: use one of {}", what, s, accepted));
}

}  // namespace recall
