// Checkpoints: everything needed to continue a run exactly, in one file that is written atomically
// and verified when read.
//
// File layout (little-endian): "RECALLCK", u32 format version, u64 payload size, u64 FNV-1a 64 of
// the payload, payload. The payload is a sequence of named sections (u32 name size, name, u64 size,
// bytes). A truncated file, a flipped byte, an unknown version or a missing section is refused with
// UsageError naming the file and what is wrong.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  std::string config_toml;          // the resolved TrainConfig
  int64_t step = 0;                 // optimizer steps taken
  std::string task_rng;             // the task generator's state as text
  std::string torch_rng;            // torch's default CPU generator state (bytes)
  std::vector<int64_t> vocabulary;  // text: id -> byte or codepoint
  std::string model;                // torch archive of the module's parameters and buffers
  std::string optimizer;            // torch archive of the optimizer state
  int64_t world_size = 1;           // processes that trained it (a section only when > 1)
};

uint64_t fnv1a64(std::string_view bytes);

std::string encode_checkpoint(const Checkpoint& ckpt);
// `source` names the bytes in messages (a path).
Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source);

// The checkpoint files inside a run folder: the last (what a folder path loads, and what --resume
// continues) and the one of lowest validation loss (load it by naming the file).
std::string checkpoint_path(const std::string& run_dir);
std::string best_checkpoint_path(const std::string& run_dir);
// Encodes, checks that the bytes decode, and writes atomically: the previous file stays until the
// new one is complete on disk.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
// `path` is a checkpoint file (RUN/best.bin for the best) or a run folder (its last checkpoint).
Checkpoint load_checkpoint(const std::string& path);

// Module and optimizer state to and from torch archive bytes. Loading puts the tensors on the
// device of the parameters they replace, whatever device wrote them, and refuses an archive whose
// parameter names or shapes differ from the module's.
std::string module_bytes(const torch::nn::Module& module);
void load_module_bytes(torch::nn::Module& module, const std::string& bytes);
std::string optimizer_bytes(const torch::optim::Optimizer& optimizer);
void load_optimizer_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes);

// torch's default CPU generator.
std::string torch_rng_state();
void set_torch_rng_state(const std::string& bytes);

}  // namespace recall
