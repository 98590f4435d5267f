// The task and trainer keys: one table with each key's type, range and place in TrainConfig, used
// for parsing, printing and comparing. The model keys are the models layer's (model_config.h),
// read from the same flat table; a recipe's `model = "<shape>"` supplies the model keys it does
// not set itself.
#include "recall/train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>

#include "recall/core/config_keys.h"
#include "recall/core/enum_names.h"
#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/models/model_config.h"
#include "recall/train/recipes.h"

namespace recall {
namespace {

using Key = ConfigKey<TrainConfig>;

constexpr std::array<const char*, 3> kTaskNames = {"mqar", "facts", "text"};
constexpr std::array<const char*, 2> kTextUnitNames = {"byte", "codepoint"};

TaskKind task_kind_from_string(const std::string& s) {
  return enum_from_name<TaskKind>(kTaskNames, s, "task");
}

TextUnits text_units_from_string(const std::string& s) {
  return enum_from_name<TextUnits>(kTextUnitNames, s, "text_units");
}

constexpr int64_t kBig = int64_t{1} << 30;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Lambdas without captures convert to the accessor pointers; one line per key keeps the table
// whole.
#define RECALL_REF(type, member) RECALL_CONFIG_FIELD(TrainConfig, type, member)

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      // task
      enum_key<TrainConfig>("task", RECALL_REF(TaskKind, c.task.kind), task_kind_from_string,
                            to_string),
      int_key<TrainConfig>("mqar_pairs", RECALL_REF(int64_t, c.task.mqar_pairs), 1, 1 << 16),
      int_key<TrainConfig>("mqar_values", RECALL_REF(int64_t, c.task.mqar_values), 0, 1 << 20),
      int_key<TrainConfig>("facts_n", RECALL_REF(int64_t, c.task.facts_n), 1, 1 << 24),
      int_key<TrainConfig>("facts_subjects", RECALL_REF(int64_t, c.task.facts_subjects), 1,
                           1 << 20),
      int_key<TrainConfig>("facts_relations", RECALL_REF(int64_t, c.task.facts_relations), 1,
                           1 << 20),
      int_key<TrainConfig>("facts_objects", RECALL_REF(int64_t, c.task.facts_objects), 2, 1 << 20),
      string_key<TrainConfig>("text_file", RECALL_REF(std::string, c.task.text_file)),
      enum_key<TrainConfig>("text_units", RECALL_REF(TextUnits, c.task.text_units),
                            text_units_from_string, to_string),
      real_key<TrainConfig>("val_fraction", RECALL_REF(double, c.task.val_fraction), 0, true, 0.5),
      // trainer
      int_key<TrainConfig>("steps", RECALL_REF(int64_t, c.trainer.steps), 1, kBig),
      int_key<TrainConfig>("batch_size", RECALL_REF(int64_t, c.trainer.batch_size), 1, 1 << 16),
      real_key<TrainConfig>("lr", RECALL_REF(double, c.trainer.lr), 0, true, kInf),
      real_key<TrainConfig>("min_lr", RECALL_REF(double, c.trainer.min_lr), 0, false, kInf),
      int_key<TrainConfig>("warmup_steps", RECALL_REF(int64_t, c.trainer.warmup_steps), 0, kBig),
      real_key<TrainConfig>("weight_decay", RECALL_REF(double, c.trainer.weight_decay), 0, false,
                            10),
      real_key<TrainConfig>("beta1", RECALL_REF(double, c.trainer.beta1), 0, false, 0.9999),
      real_key<TrainConfig>("beta2", RECALL_REF(double, c.trainer.beta2), 0, false, 0.99999),
      real_key<TrainConfig>("grad_clip", RECALL_REF(double, c.trainer.grad_clip), 0, false, kInf),
      int_key<TrainConfig>("eval_every", RECALL_REF(int64_t, c.trainer.eval_every), 0, kBig),
      int_key<TrainConfig>("eval_batches", RECALL_REF(int64_t, c.trainer.eval_batches), 1, 1 << 16),
      int_key<TrainConfig>("log_every", RECALL_REF(int64_t, c.trainer.log_every), 1, kBig),
      int_key<TrainConfig>("checkpoint_every", RECALL_REF(int64_t, c.trainer.checkpoint_every), 0,
                           kBig),
      int_key<TrainConfig>("seed", RECALL_REF(int64_t, c.trainer.seed), 0,
                           std::numeric_limits<int64_t>::max()),
      real_key<TrainConfig>("peak_flops", RECALL_REF(double, c.trainer.peak_flops), 0, false, kInf),
      enum_key<TrainConfig>("precision", RECALL_REF(Precision, c.trainer.precision),
                            precision_from_string, to_string),
  };
  return table;
}
#undef RECALL_REF

bool is_model_key(const std::string& name) {
  const auto& m = model_config_keys();
  return std::find(m.begin(), m.end(), name) != m.end();
}

// The recipe's model shape, a key of no struct: it names where the model keys come from.
constexpr const char* kShapeKey = "model";

// The trainer or task key `name`, or nullptr for a model key or the shape; anything else is
// unknown.
const Key* find_key(const std::string& name, const std::string& where) {
  for (const Key& k : keys())
    if (k.name == name) return &k;
  if (is_model_key(name) || name == kShapeKey) return nullptr;
  throw UsageError(
      fmt::format("{}: unknown key '{}' (model keys: those of models/*.toml; task "
                  "and trainer keys: those of train/*.toml)",
                  where, name));
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
  return enum_name(kTaskNames, v);
}

std::string to_string(TextUnits v) {
  return enum_name(kTextUnitNames, v);
}

std::vector<std::pair<std::string, std::string>> config_items(const TrainConfig& config) {
  auto items = model_config_items(config.model);
  for (auto& item : config_key_items(keys(), config)) items.push_back(std::move(item));
  return items;
}

std::string TrainConfig::to_toml() const {
  std::string out;
  for (const auto& [name, value] : config_items(*this)) out += name + " = " + value + "\n";
  return out;
}

void TrainConfig::validate(ModelCheck check) const {
  if (check == ModelCheck::kChecked) model.validate();
  const auto& t = trainer;
  check_arg(
      t.min_lr <= t.lr,
      fmt::format("min_lr = {}: must be <= lr = {} (the cosine decays to it)", t.min_lr, t.lr));
  check_arg(t.warmup_steps <= t.steps,
            fmt::format("warmup_steps = {}: must be <= steps = {}", t.warmup_steps, t.steps));
  if (task.kind == TaskKind::kFacts) {
    const int64_t grid = task.facts_subjects * task.facts_relations;
    check_arg(task.facts_n <= grid,
              fmt::format("facts_n = {}: must be <= facts_subjects * facts_relations = {}",
                          task.facts_n, grid));
  }
  if (check == ModelCheck::kReplacedLater) return;
  switch (task.kind) {
    case TaskKind::kMqar: {
      // token 0 fills the query region; keys and values take the two halves of the rest, or the
      // values the last mqar_values tokens
      const int64_t v = task.mqar_values, need_len = 4 * task.mqar_pairs;
      const int64_t need_vocab = v > 0 ? task.mqar_pairs + v + 1 : 2 * task.mqar_pairs + 1;
      check_arg(model.vocab_size >= need_vocab,
                fmt::format("vocab_size = {}: mqar with mqar_pairs = {}{} needs >= {}",
                            model.vocab_size, task.mqar_pairs,
                            v > 0 ? fmt::format(" and mqar_values = {}", v) : " (2 pairs + 1)",
                            need_vocab));
      check_arg(model.seq_len >= need_len,
                fmt::format("seq_len = {}: mqar with mqar_pairs = {} needs >= {} (4 pairs)",
                            model.seq_len, task.mqar_pairs, need_len));
      break;
    }
    case TaskKind::kFacts: {
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
                                   const std::string& base_dir, ModelCheck check) {
  toml::table table = parse_config_toml(text, source);
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
  // facts fixes vocab_size from the task, unless the file or --set gives it
  if (config.task.kind == TaskKind::kFacts && !table.contains("vocab_size"))
    table.insert("vocab_size", config.task.facts_subjects + config.task.facts_relations +
                                   config.task.facts_objects);
  // the shape's model keys, under those of the file and --set
  if (const toml::node* shape = table.get(kShapeKey)) {
    const auto name = shape->value_exact<std::string>();
    if (!name) bad_config_value(kShapeKey, *shape, "a model shape: a name in models/ or a file");
    for (auto&& [key, node] : read_model_shape(*name, base_dir.empty() ? "." : base_dir))
      if (!table.contains(key.str())) table.insert(key, node);
    table.erase(kShapeKey);
  }
  config.model = model_config_from_toml(table);
  config.validate(check);
  return config;
}

TrainConfig train_config_from_file(const std::string& path,
                                   const std::vector<std::string>& overrides, ModelCheck check) {
  std::error_code ec;
  const bool file = std::filesystem::exists(path, ec);  // a file wins over a recipe's name
  if (!file) {
    if (const auto recipe = train_recipe_toml(path))
      return train_config_from_toml(*recipe, "recipe " + path, overrides, ".", check);
    throw UsageError(
        fmt::format("--config {}: no such file; give a TOML file or a recipe of train/ ({})", path,
                    fmt::join(train_recipe_names(), ", ")));
  }
  const std::string text = read_file("--config", path);
  const auto dir = std::filesystem::path(path).parent_path().string();
  return train_config_from_toml(text, path, overrides, dir.empty() ? "." : dir, check);
}

}  // namespace recall
