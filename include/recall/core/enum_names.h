// Enums spelled as strings: config values and command-line names map to `enum class` values by a
// table of names in enum order. One rule for every enum, so every message lists what is accepted.
#pragma once
#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

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

// Every value in enum order, one per name: a loop over them cannot leave a new value out.
template <typename Enum, size_t N>
std::vector<Enum> enum_values(const std::array<const char*, N>& names) {
  std::vector<Enum> all;
  for (size_t i = 0; i < names.size(); ++i) all.push_back(static_cast<Enum>(i));
  return all;
}

}  // namespace recall
