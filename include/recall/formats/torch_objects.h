// What torch.save's pickles build beyond plain values: the objects REDUCE and NEWOBJ make from a
// class name (dicts and OrderedDicts, sets and lists, tensors and parameters; any other class an
// opaque value naming it) and the typed storages its persistent ids name. Internal to the pickle
// reader (torch_pickle.cpp), whose machine knows the opcodes and this class the objects.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "recall/core/error.h"
#include "recall/core/torch.h"
#include "recall/formats/torch_pickle.h"

namespace recall {

// A value of the given kind, empty.
PickleRef make_pickle_value(PickleValue::Kind kind);

class TorchObjects {
 public:
  // The error for a damaged pickle, saying where the machine is.
  using Refuse = std::function<UsageError(const std::string& why)>;
  TorchObjects(const StorageLoader& storage, const std::string& source, Refuse refuse);

  // callable(*args) for REDUCE and NEWOBJ.
  PickleRef call(const PickleRef& callable, const std::vector<PickleRef>& args);
  // BINPERSID of torch.save: ('storage', storage class, key, location, numel); a storage named
  // twice is loaded once.
  PickleRef persistent(const PickleRef& pid);

 private:
  int64_t as_int(const PickleRef& v, const char* what) const;
  std::vector<int64_t> as_sizes(const PickleRef& v, const char* what) const;
  PickleRef rebuild_tensor(const std::vector<PickleRef>& args);

  const StorageLoader& storage_;
  const std::string& source_;
  Refuse refuse_;
  std::map<std::string, torch::Tensor> storages_;
};

}  // namespace recall
