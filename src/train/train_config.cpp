// The task and trainer keys: one table with each key's type, range and place in TrainConfig, used
// for parsing, printing and comparing. The model keys are read by the model's own reader
// (models/model_config.h) from the same flat table, so that there is one reader per key.
#include "recall/train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/models/model_config.h"
#include "recall/train/presets.h"

namespace recall {
namespace {

struct Key {
  std::string name;
  std::string accepted;                                      // what the key accepts, for messages
  std::function<void(TrainConfig&, const toml::node&)> set;  // throws with `accepted` on bad input
  std::function<std::string(const TrainConfig&)> get;        // the value as a TOML literal
};

[[noreturn]] void bad_value(const std::string& name, const toml::node& node,
                            const std::string& ok) {
  std::ostringstream value;
  node.visit([&](auto&& v) { value << v; });
  throw std::invalid_argument(fmt::format("{} = {}: must be {}", name, value.str(), ok));
}

template <class T>
using Ref = T& (*)(TrainConfig&);

template <class T>
T& at(Ref<T> ref, const TrainConfig& c) {
  return ref(const_cast<TrainConfig&>(c));  // the table has one accessor per key, for both ways
}

Key int_key(std::string name, Ref<int64_t> ref, int64_t lo, int64_t hi) {
  std::string ok = fmt::format("an integer in [{}, {}]", lo, hi);
  return {name, ok,
          [=](TrainConfig& c, const toml::node& n) {
            auto v = n.value_exact<int64_t>();
            if (!v || *v < lo || *v > hi) bad_value(name, n, ok);
            ref(c) = *v;
          },
          [=](const TrainConfig& c) { return std::to_string(at(ref, c)); }};
}

// A double as a TOML float literal (1 -> 1.0), exact on reading back.
std::string toml_real(double v) {
  std::string s = fmt::format("{}", v);
  return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
}

// lo_open: the lower bound itself is excluded (a rate that must be > 0).
Key real_key(std::string name, Ref<double> ref, double lo, bool lo_open, double hi) {
  std::string ok = hi == std::numeric_limits<double>::infinity()
                       ? fmt::format("a finite number {} {}", lo_open ? ">" : ">=", lo)
                       : fmt::format("a number in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
  return {name, ok,
          [=](TrainConfig& c, const toml::node& n) {
            std::optional<double> v = n.is_integer() ? std::optional<double>(*n.value<int64_t>())
                                                     : n.value_exact<double>();
            if (!v || !std::isfinite(*v) || *v < lo || (lo_open && *v == lo) || *v > hi)
              bad_value(name, n, ok);
            ref(c) = *v;
          },
          [=](const TrainConfig& c) { return toml_real(at(ref, c)); }};
}

std::string toml_string(const std::string& s) {
  std::ostringstream os;
  os << toml::value<std::string>(s);
  return os.str();
}

Key string_key(std::string name, Ref<std::string> ref) {
  return {name, "a string",
          [=](TrainConfig& c, const toml::node& n) {
            auto v = n.value_exact<std::string>();
            if (!v) bad_value(name, n, "a string");
            ref(c) = *v;
          },
          [=](const TrainConfig& c) { return toml_string(at(ref, c)); }};
}

// An enumeration written as a string; `parse` throws std::invalid_argument listing the names.
template <class E>
Key enum_key(std::string name, Ref<E> ref, E (*parse)(const std::string&), std::string names) {
  std::string ok = "one of " + names;
  return {name, ok,
          [=](TrainConfig& c, const toml::node& n) {
            auto v = n.value_exact<std::string>();
            if (!v) bad_value(name, n, ok);
            try {
              ref(c) = parse(*v);
            } catch (const std::invalid_argument&) {
              bad_value(name, n, ok);
            }
          },
          [=](const TrainConfig& c) { return toml_string(to_string(at(ref, c))); }};
}

TaskKind task_kind_from_string(const std::string& s) {
  for (TaskKind k : {TaskKind::kMqar, TaskKind::kFacts, TaskKind::kText})
    if (to_string(k) == s) return k;
  throw std::invalid_argument(s);
}

TextUnits text_units_from_string(const std::string& s) {
  for (TextUnits u : {TextUnits::kByte, TextUnits::kCodepoint})
    if (to_string(u) == s) return u;
  throw std::invalid_argument(s);
}

constexpr int64_t kBig = int64_t{1} << 30;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Lambdas without captures convert to the accessor pointers; one line per key keeps the table
// whole.
#define RECALL_REF(type, member) \
  static_cast<Ref<type>>([](TrainConfig& c) -> type& { return member; })

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      // task
      enum_key("task", RECALL_REF(TaskKind, c.task.kind), task_kind_from_string,
               "mqar, facts, text"),
      int_key("mqar_pairs", RECALL_REF(int64_t, c.task.mqar_pairs), 1, 1 << 16),
      int_key("facts_n", RECALL_REF(int64_t, c.task.facts_n), 1, 1 << 24),
      int_key("facts_subjects", RECALL_REF(int64_t, c.task.facts_subjects), 1, 1 << 20),
      int_key("facts_relations", RECALL_REF(int64_t, c.task.facts_relations), 1, 1 << 20),
      int_key("facts_objects", RECALL_REF(int64_t, c.task.facts_objects), 2, 1 << 20),
      string_key("text_file", RECALL_REF(std::string, c.task.text_file)),
      enum_key("text_units", RECALL_REF(TextUnits, c.task.text_units), text_units_from_string,
               "byte, codepoint"),
      real_key("val_fraction", RECALL_REF(double, c.task.val_fraction), 0, true, 0.5),
      // trainer
      int_key("steps", RECALL_REF(int64_t, c.trainer.steps), 1, kBig),
      int_key("batch_size", RECALL_REF(int64_t, c.trainer.batch_size), 1, 1 << 16),
      real_key("lr", RECALL_REF(double, c.trainer.lr), 0, true, kInf),
      real_key("min_lr", RECALL_REF(double, c.trainer.min_lr), 0, false, kInf),
      int_key("warmup_steps", RECALL_REF(int64_t, c.trainer.warmup_steps), 0, kBig),
      real_key("weight_decay", RECALL_REF(double, c.trainer.weight_decay), 0, false, 10),
      real_key("beta1", RECALL_REF(double, c.trainer.beta1), 0, false, 0.9999),
      real_key("beta2", RECALL_REF(double, c.trainer.beta2), 0, false, 0.99999),
      real_key("grad_clip", RECALL_REF(double, c.trainer.grad_clip), 0, false, kInf),
      int_key("eval_every", RECALL_REF(int64_t, c.trainer.eval_every), 0, kBig),
      int_key("eval_batches", RECALL_REF(int64_t, c.trainer.eval_batches), 1, 1 << 16),
      int_key("log_every", RECALL_REF(int64_t, c.trainer.log_every), 1, kBig),
      int_key("checkpoint_every", RECALL_REF(int64_t, c.trainer.checkpoint_every), 0, kBig),
      int_key("seed", RECALL_REF(int64_t, c.trainer.seed), 0, std::numeric_limits<int64_t>::max()),
      real_key("peak_flops", RECALL_REF(double, c.trainer.peak_flops), 0, false, kInf),
  };
  return table;
}
#undef RECALL_REF

bool is_model_key(const std::string& name) {
  const auto& m = model_config_keys();
  return std::find(m.begin(), m.end(), name) != m.end();
}

// The trainer or task key `name`, or nullptr for a model key; anything else is unknown.
const Key* find_key(const std::string& name, const std::string& where) {
  for (const Key& k : keys())
    if (k.name == name) return &k;
  if (is_model_key(name)) return nullptr;
  throw UsageError(
      fmt::format("{}: unknown key '{}' (the keys are those of models/*.toml)", where, name));
}

// The model keys as TOML literals, in the model's key order.
std::vector<std::pair<std::string, std::string>> model_items(const ModelConfig& m) {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  const std::map<std::string, std::string> value = {
      {"vocab_size", std::to_string(m.vocab_size)},
      {"d_model", std::to_string(m.d_model)},
      {"n_layers", std::to_string(m.n_layers)},
      {"n_heads", std::to_string(m.n_heads)},
      {"seq_len", std::to_string(m.seq_len)},
      {"pos", toml_string(to_string(m.pos))},
      {"norm", toml_string(to_string(m.norm))},
      {"tied_head", b(m.tied_head)},
      {"bias", b(m.bias)},
      {"attn_rule", toml_string(to_string(m.attn_rule))},
      {"ffn", toml_string(to_string(m.ffn))},
      {"activation", toml_string(to_string(m.activation))},
      {"ffn_mult", std::to_string(m.ffn_mult)},
      {"ffn_slots", std::to_string(m.ffn_slots)},
      {"attn_mem_kv", std::to_string(m.attn_mem_kv)},
      {"attn_scale", toml_real(m.attn_scale)},
      {"attn_conv", std::to_string(m.attn_conv)}};
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& key : model_config_keys()) items.emplace_back(key, value.at(key));
  return items;
}

// "key=value" -> (key, node). The value is a TOML literal; when it is not one (an unquoted word
// such as task=mqar) it is taken as a string, so that the shell needs no quotes.
std::pair<std::string, toml::table> parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("--set {}: write key=value", text));
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  const std::string key = trim(text.substr(0, eq)), value = trim(text.substr(eq + 1));
  toml::table t;
  try {
    t = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    t.insert_or_assign("v", value);
  }
  return {key, std::move(t)};
}

}  // namespace

std::string to_string(TaskKind v) {
  switch (v) {
    case TaskKind::kMqar:
      return "mqar";
    case TaskKind::kFacts:
      return "facts";
    case TaskKind::kText:
      return "text";
  }
  return "mqar";
}

std::string to_string(TextUnits v) {
  return v == TextUnits::kByte ? "byte" : "codepoint";
}

std::vector<std::pair<std::string, std::string>> config_items(const TrainConfig& config) {
  auto items = model_items(config.model);
  for (const Key& k : keys()) items.emplace_back(k.name, k.get(config));
  return items;
}

std::string TrainConfig::to_toml() const {
  std::string out;
  for (const auto& [name, value] : config_items(*this)) out += name + " = " + value + "\n";
  return out;
}

void TrainConfig::validate() const {
  model.validate();
  // the model's reader checks lower bounds; these keep a typo from asking for terabytes
  const std::pair<const char*, std::pair<int64_t, int64_t>> sizes[] = {
      {"vocab_size", {model.vocab_size, 1 << 20}}, {"d_model", {model.d_model, 1 << 16}},
      {"n_layers", {model.n_layers, 1024}},        {"n_heads", {model.n_heads, 1024}},
      {"seq_len", {model.seq_len, 1 << 20}},       {"ffn_mult", {model.ffn_mult, 64}},
      {"ffn_slots", {model.ffn_slots, 1 << 20}},   {"attn_mem_kv", {model.attn_mem_kv, 1 << 20}}};
  for (const auto& [key, vm] : sizes)
    check_arg(vm.first <= vm.second,
              fmt::format("{} = {}: must be <= {}", key, vm.first, vm.second));
  const auto& t = trainer;
  check_arg(
      t.min_lr <= t.lr,
      fmt::format("min_lr = {}: must be <= lr = {} (the cosine decays to it)", t.min_lr, t.lr));
  check_arg(t.warmup_steps <= t.steps,
            fmt::format("warmup_steps = {}: must be <= steps = {}", t.warmup_steps, t.steps));
  switch (task.kind) {
    case TaskKind::kMqar: {
      // token 0 fills the query region; keys and values take the two halves of the rest
      const int64_t need_vocab = 2 * task.mqar_pairs + 1, need_len = 4 * task.mqar_pairs;
      check_arg(model.vocab_size >= need_vocab,
                fmt::format("vocab_size = {}: mqar with mqar_pairs = {} needs >= {} (2 pairs + 1)",
                            model.vocab_size, task.mqar_pairs, need_vocab));
      check_arg(model.seq_len >= need_len,
                fmt::format("seq_len = {}: mqar with mqar_pairs = {} needs >= {} (4 pairs)",
                            model.seq_len, task.mqar_pairs, need_len));
      break;
    }
    case TaskKind::kFacts: {
      const int64_t grid = task.facts_subjects * task.facts_relations;
      check_arg(task.facts_n <= grid,
                fmt::format("facts_n = {}: must be <= facts_subjects * facts_relations = {}",
                            task.facts_n, grid));
      const int64_t vocab = task.facts_subjects + task.facts_relations + task.facts_objects;
      check_arg(model.vocab_size == vocab,
                fmt::format("vocab_size = {}: task facts needs facts_subjects + facts_relations + "
                            "facts_objects = {}",
                            model.vocab_size, vocab));
      break;
    }
    case TaskKind::kText:  // an empty text_file is the default corpus
      break;
  }
}

TrainConfig train_config_from_toml(std::string_view text, const std::string& source,
                                   const std::vector<std::string>& overrides,
                                   const std::string& base_dir) {
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UsageError(
        fmt::format("{}:{}:{}: {}", source, where.line, where.column, e.description()));
  }
  for (const auto& [name, node] : table) find_key(std::string(name.str()), source);
  // a relative corpus path in a file is relative to the file; one given by --set, to the shell
  namespace fs = std::filesystem;
  if (auto file = table["text_file"].value<std::string>();
      file && !file->empty() && !base_dir.empty() && fs::path(*file).is_relative())
    table.insert_or_assign("text_file", (fs::path(base_dir) / *file).lexically_normal().string());
  for (const std::string& o : overrides) {
    auto [key, t] = parse_override(o);
    find_key(key, "--set " + o);
    table.insert_or_assign(key, *t.get("v"));
  }
  TrainConfig config;
  for (const auto& [name, node] : table)
    if (const Key* key = find_key(std::string(name.str()), source)) key->set(config, node);
  // facts fixes vocab_size from the task; a file may leave the key out
  if (config.task.kind == TaskKind::kFacts && !table.contains("vocab_size"))
    table.insert("vocab_size", config.task.facts_subjects + config.task.facts_relations +
                                   config.task.facts_objects);
  config.model = model_config_from_toml(table);
  config.validate();
  return config;
}

TrainConfig train_config_from_file(const std::string& path,
                                   const std::vector<std::string>& overrides) {
  if (const auto preset = preset_for_config(path); preset)
    return train_config_from_toml(*preset, "preset " + path, overrides, ".");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw UsageError(fmt::format("--config {}: no such file; give a TOML file or a preset ({})",
                                 path, fmt::join(preset_names(), ", ")));
  const std::string text = read_file("--config", path);
  const auto dir = std::filesystem::path(path).parent_path().string();
  return train_config_from_toml(text, path, overrides, dir.empty() ? "." : dir);
}

}  // namespace recall
