#include <fmt/format.h>

#include "recall/core/error.h"
#include "recall/train/checkpoint.h"
#include "recall/train/trainer.h"

namespace recall {

Restored restore(const std::string& path, const torch::Device& device) {
  const Checkpoint ckpt = load_checkpoint(path);
  Restored r;
  try {
    r.config = train_config_from_toml(ckpt.config_toml, path + " (stored config)");
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("checkpoint {}: its config is not readable: {}", path, e.what()));
  }
  r.step = ckpt.step;
  r.vocabulary = ckpt.vocabulary;
  r.model = Transformer(r.config.model);
  load_module_bytes(*r.model, ckpt.model);  // on the CPU, whatever device wrote it
  r.model->to(device);
  r.model->eval();
  return r;
}

}  // namespace recall
