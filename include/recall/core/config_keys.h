// Flat, typed config keys: one table per config struct names each key, what it accepts, how to
// read it from TOML and how to print it back as a TOML literal. The model's keys (models layer)
// and the task and trainer keys (train layer) are tables of this one kind, so every key is read,
// bounded, printed and compared the same way.
#pragma once
#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recall/core/error.h"

namespace recall {

template <class C>
struct ConfigKey {
  std::string name;
  std::function<void(C&, const toml::node&)> set;  // throws std::invalid_argument: what it accepts
  std::function<std::string(const C&)> get;        // the value as a TOML literal
};

// The field a key reads and writes; a capture-free lambda converts to it (RECALL_CONFIG_FIELD).
template <class C, class T>
using ConfigField = T& (*)(C&);
#define RECALL_CONFIG_FIELD(C, type, member) \
  static_cast<::recall::ConfigField<C, type>>([](C& c) -> type& { return member; })

[[noreturn]] inline void bad_config_value(const std::string& name, const toml::node& node,
                                          const std::string& ok) {
  std::ostringstream value;
  node.visit([&](auto&& v) { value << v; });
  throw std::invalid_argument(fmt::format("{} = {}: must be {}", name, value.str(), ok));
}

// A double as a TOML float literal (1 -> 1.0), exact on reading back.
inline std::string toml_real(double v) {
  std::string s = fmt::format("{}", v);
  return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
}

inline std::string toml_string(const std::string& s) {
  std::ostringstream os;
  os << toml::value<std::string>(s);
  return os.str();
}

namespace config_detail {
template <class C, class T>
T& at(ConfigField<C, T> field, const C& c) {
  return field(const_cast<C&>(c));  // one accessor per key serves reading and printing
}
}  // namespace config_detail

template <class C>
ConfigKey<C> int_key(std::string name, ConfigField<C, int64_t> field, int64_t lo, int64_t hi) {
  std::string ok = fmt::format("an integer in [{}, {}]", lo, hi);
  return {name,
          [=](C& c, const toml::node& n) {
            auto v = n.value_exact<int64_t>();
            if (!v || *v < lo || *v > hi) bad_config_value(name, n, ok);
            field(c) = *v;
          },
          [=](const C& c) { return std::to_string(config_detail::at(field, c)); }};
}

// lo_open: the lower bound itself is excluded (a rate that must be > 0).
template <class C>
ConfigKey<C> real_key(std::string name, ConfigField<C, double> field, double lo, bool lo_open,
                      double hi) {
  std::string ok = hi == std::numeric_limits<double>::infinity()
                       ? fmt::format("a finite number {} {}", lo_open ? ">" : ">=", lo)
                       : fmt::format("a number in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
  return {name,
          [=](C& c, const toml::node& n) {
            std::optional<double> v = n.is_integer() ? std::optional<double>(*n.value<int64_t>())
                                                     : n.value_exact<double>();
            if (!v || !std::isfinite(*v) || *v < lo || (lo_open && *v == lo) || *v > hi)
              bad_config_value(name, n, ok);
            field(c) = *v;
          },
          [=](const C& c) { return toml_real(config_detail::at(field, c)); }};
}

template <class C>
ConfigKey<C> bool_key(std::string name, ConfigField<C, bool> field) {
  return {name,
          [=](C& c, const toml::node& n) {
            auto v = n.value_exact<bool>();
            if (!v) bad_config_value(name, n, "true or false");
            field(c) = *v;
          },
          [=](const C& c) { return std::string(config_detail::at(field, c) ? "true" : "false"); }};
}

template <class C>
ConfigKey<C> string_key(std::string name, ConfigField<C, std::string> field) {
  return {name,
          [=](C& c, const toml::node& n) {
            auto v = n.value_exact<std::string>();
            if (!v) bad_config_value(name, n, "a string");
            field(c) = *v;
          },
          [=](const C& c) { return toml_string(config_detail::at(field, c)); }};
}

// An enumeration written as a string: `parse` throws std::invalid_argument naming the accepted
// names (enum_names.h) for an unknown one, `print` is its inverse.
template <class C, class E>
ConfigKey<C> enum_key(std::string name, ConfigField<C, E> field, E (*parse)(const std::string&),
                      std::string (*print)(E)) {
  return {name,
          [=](C& c, const toml::node& n) {
            auto v = n.value_exact<std::string>();
            if (!v) bad_config_value(name, n, "a string");
            try {
              field(c) = parse(*v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(fmt::format("{} = {}: {}", name, *v, e.what()));
            }
          },
          [=](const C& c) { return toml_string(print(config_detail::at(field, c))); }};
}

// The TOML text of a config file, shape or recipe; a syntax error is a UsageError naming
// source:line:column.
inline toml::table parse_config_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UsageError(
        fmt::format("{}:{}:{}: {}", source, where.line, where.column, e.description()));
  }
}

// Sets every key of `keys` that `table` holds; other entries are the caller's.
template <class C>
void read_config_keys(const std::vector<ConfigKey<C>>& keys, const toml::table& table, C& c) {
  for (const auto& key : keys)
    if (const toml::node* n = table.get(key.name)) key.set(c, *n);
}

// (key, TOML literal) for every key of `keys`, in table order.
template <class C>
std::vector<std::pair<std::string, std::string>> config_key_items(
    const std::vector<ConfigKey<C>>& keys, const C& c) {
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& key : keys) items.emplace_back(key.name, key.get(c));
  return items;
}

}  // namespace recall
