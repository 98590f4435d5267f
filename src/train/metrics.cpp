#include "recall/train/metrics.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace recall {

std::optional<double> MetricsRecord::get(const std::string& key) const {
  const auto it = values.find(key);
  return it == values.end() ? std::nullopt : std::optional<double>(it->second);
}

std::string metrics_path(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "metrics.jsonl").string();
}

std::string metrics_line(const MetricsRecord& record) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [k, v] : record.values) values[k] = v;
  nlohmann::json j{{"step", record.step}};
  if (record.eval)
    j["eval"] = values;
  else
    j.update(values);
  return j.dump();
}

std::vector<MetricsRecord> read_metrics(const std::string& run_dir) {
  std::vector<MetricsRecord> records;
  std::ifstream in(metrics_path(run_dir));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
      continue;
    MetricsRecord r;
    r.step = j["step"].get<int64_t>();
    r.eval = j.contains("eval") && j["eval"].is_object();
    for (const auto& [k, v] : (r.eval ? j["eval"] : j).items())
      if (k != "step" && v.is_number()) r.values[k] = v.get<double>();
    records.push_back(std::move(r));
  }
  return records;
}

std::optional<MetricsRecord> eval_at(const std::vector<MetricsRecord>& records, int64_t step) {
  std::optional<MetricsRecord> found;
  for (const auto& r : records)
    if (r.eval && r.step == step) found = r;
  return found;
}

}  // namespace recall
