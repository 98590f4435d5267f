// A reader of torch.save files that runs no code: torch.save writes a zip (data.pkl, data/KEY, ...)
// whose pickle this reader interprets with a fixed vocabulary. Plain values (None, bools, ints,
// floats, strings, bytes, lists, tuples, dicts and OrderedDicts) and tensors
// (torch._utils._rebuild_tensor_v2 / _rebuild_parameter over a typed storage) become values; any
// other class becomes an opaque value that names it, which is an error only where it is used.
// LibTorch's own reader (torch::pickle_load) cannot serve: it turns every OrderedDict, so every
// state dict, into None.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recall/core/torch.h"

namespace recall {

struct PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kList,
    kTuple,
    kDict,
    kTensor,
    kStorage,
    kGlobal,
    kOpaque
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;                 // bool, int
  double f = 0;                  // float
  std::string s;                 // string, bytes; global and opaque: "module.name"
  std::vector<PickleRef> items;  // list, tuple
  std::vector<std::pair<PickleRef, PickleRef>> entries;  // dict, in insertion order
  torch::Tensor tensor;                                  // tensor; storage: its elements (1-D)
  // The dict entry under a string key, or nullptr (also when this is not a dict).
  const PickleValue* get(const std::string& key) const;
  // What the value is, for messages ("int", "dict", "torch.optim.Adam object"...).
  std::string describe() const;
};

// A storage: its key (data/KEY in the archive), its element type and its element count -> the
// storage as a 1-D tensor of that many elements. Throws UsageError when it cannot.
using StorageLoader =
    std::function<torch::Tensor(const std::string& key, torch::ScalarType dtype, int64_t numel)>;

// Interprets pickle bytes (protocols 2 to 5). Malformed bytes (an unknown opcode, a truncated
// argument, a stack or memo out of range, a tensor view outside its storage) are refused with
// UsageError naming `source`; the reader never reads outside `bytes`.
PickleRef unpickle(std::string_view bytes, const StorageLoader& storage, const std::string& source);

// Reads the torch.save file at `path` (the zip format of torch >= 1.6); tensors come back on the
// CPU, each view of a storage copied out of it. Refused with UsageError naming the path when it is
// not such a file or is damaged.
PickleRef read_torch_file(const std::string& path);

}  // namespace recall
