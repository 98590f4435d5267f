#include "recall/formats/torch_save.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace recall {

std::string state_dict_pickle(const NamedTensors& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, t);
  return torch_save_bytes(dict);
}

std::string torch_save_bytes(const c10::IValue& value) {
  // torch::pickle_save wraps a typed dict in torch.jit._pickle.restore_type_tag, a global that
  // torch.load refuses under weights_only (its default since torch 2.6); untagged, the pickle holds
  // only what every torch.load accepts: a dict of _rebuild_tensor_v2 over FloatStorage records.
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* buf, size_t n) { pickle.append(buf, n); }, nullptr,
                              nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* buf, size_t n) {
    out.append(static_cast<const char*>(buf), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return out;
}

}  // namespace recall
