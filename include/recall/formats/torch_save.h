// The writer beside the reader (torch_pickle.h): torch.save's format, a zip of data.pkl (the
// pickle) and data/KEY (each tensor's storage), as LibTorch's own pickler writes it but untagged,
// so that torch.load accepts it with its defaults (weights_only) under torch 1.13 and every 2.x.
#pragma once
#include <string>

#include "recall/core/torch.h"
#include "recall/formats/safetensors.h"

namespace recall {

// A torch.save-format zip of the dict name -> tensor: torch.load reads it with its defaults
// (weights_only) under torch 1.13 and every 2.x.
std::string state_dict_pickle(const NamedTensors& tensors);
// `value` (dicts, lists, tuples, strings, numbers, tensors) in torch.save's format, untagged.
std::string torch_save_bytes(const c10::IValue& value);

}  // namespace recall
