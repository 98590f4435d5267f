// The safetensors format (the one models are exchanged in), written and read by its own rules:
//   u64 little-endian N, then N bytes of JSON header, then the data section.
//   header: {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "string", ...}}   (optional metadata: strings only)
// Offsets are relative to the data section; the tensors cover it without holes or overlaps. The
// writer pads the header with spaces so that the data section starts 8-byte aligned.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The bytes of a safetensors file holding `tensors` (CPU, contiguous copies are taken; float32,
// float16, bfloat16, float64, int64, int32, int8, uint8 or bool) in the order given.
std::string safetensors_bytes(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their data offsets; each owns its memory
  std::map<std::string, std::string> metadata;
};

// Parses safetensors bytes. Anything the format forbids (a header length past the end, JSON that
// is not an object, an unknown dtype, offsets out of the data section, overlapping, leaving a hole
// or disagreeing with the shape) is refused with UsageError naming `source` and what is wrong; the
// reader never reads outside `bytes`.
SafetensorsFile read_safetensors(std::string_view bytes, const std::string& source);

}  // namespace recall
