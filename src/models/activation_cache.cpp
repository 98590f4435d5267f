#include "recall/models/activation_cache.h"

#include <fmt/format.h>

#include "recall/core/error.h"

namespace recall {

const torch::Tensor& ActivationCache::at(const std::string& name) const {
  auto it = tensors.find(name);
  check_arg(it != tensors.end(),
            fmt::format("activation '{}' is not in the cache ({} recorded)", name, tensors.size()));
  return it->second;
}

std::vector<std::string> ActivationCache::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors) out.push_back(name);
  return out;
}

}  // namespace recall
