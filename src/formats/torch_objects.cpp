// What torch.save's pickles build beyond plain values (recall/formats/torch_objects.h).
#include "recall/formats/torch_objects.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

namespace recall {
namespace {

using Kind = PickleValue::Kind;

struct StorageType {
  const char* name;
  torch::ScalarType dtype;
};

constexpr std::array<StorageType, 10> kStorageTypes = {{{"torch.FloatStorage", torch::kFloat32},
                                                        {"torch.DoubleStorage", torch::kFloat64},
                                                        {"torch.HalfStorage", torch::kFloat16},
                                                        {"torch.BFloat16Storage", torch::kBFloat16},
                                                        {"torch.LongStorage", torch::kInt64},
                                                        {"torch.IntStorage", torch::kInt32},
                                                        {"torch.ShortStorage", torch::kInt16},
                                                        {"torch.CharStorage", torch::kInt8},
                                                        {"torch.ByteStorage", torch::kUInt8},
                                                        {"torch.BoolStorage", torch::kBool}}};

}  // namespace

TorchObjects::TorchObjects(const StorageLoader& storage, const std::string& source, Refuse refuse)
    : storage_(storage), source_(source), refuse_(std::move(refuse)) {}

int64_t TorchObjects::as_int(const PickleRef& v, const char* what) const {
  if (v->kind != Kind::kInt && v->kind != Kind::kBool)
    throw refuse_(fmt::format("{} is a {}, not an int", what, v->describe()));
  return v->i;
}
std::vector<int64_t> TorchObjects::as_sizes(const PickleRef& v, const char* what) const {
  if (v->kind != Kind::kTuple && v->kind != Kind::kList)
    throw refuse_(fmt::format("{} is a {}, not a tuple", what, v->describe()));
  std::vector<int64_t> out;
  for (const auto& x : v->items) {
    out.push_back(as_int(x, what));
    if (out.back() < 0 || out.back() > (int64_t{1} << 48))
      throw refuse_(fmt::format("{} out of range", what));
  }
  return out;
}

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, ...)
PickleRef TorchObjects::rebuild_tensor(const std::vector<PickleRef>& args) {
  if (args.size() < 4 || args[0]->kind != Kind::kStorage)
    throw refuse_("_rebuild_tensor_v2 without a storage, offset, size and stride");
  const torch::Tensor& storage = args[0]->tensor;
  const int64_t offset = as_int(args[1], "a tensor's offset");
  const auto size = as_sizes(args[2], "a tensor's size");
  const auto stride = as_sizes(args[3], "a tensor's stride");
  if (size.size() != stride.size() || size.size() > 16)
    throw refuse_("a tensor's size and stride differ in length");
  // The last element the view reaches must lie in the storage.
  int64_t last = offset, numel = 1;
  bool overflow = offset < 0;
  for (size_t d = 0; d < size.size(); ++d) {
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(numel, size[d], &numel);
    if (size[d] > 0) overflow |= __builtin_mul_overflow(size[d] - 1, stride[d], &reach);
    overflow |= __builtin_add_overflow(last, reach, &last);
  }
  if (overflow || (numel > 0 && last >= storage.numel()))
    throw refuse_(fmt::format("a tensor of size [{}] reaches past its storage of {} elements",
                              fmt::join(size, ", "), storage.numel()));
  auto v = make_pickle_value(Kind::kTensor);
  v->tensor = numel == 0 ? torch::empty(size, storage.options())
                         : storage.as_strided(size, stride, offset).clone();
  return v;
}

PickleRef TorchObjects::call(const PickleRef& callable, const std::vector<PickleRef>& args) {
  const std::string name = callable->kind == Kind::kGlobal ? callable->s : "";
  if (name == "collections.OrderedDict" || name == "builtins.dict") {
    auto d = make_pickle_value(Kind::kDict);
    if (!args.empty() && args[0]->kind == Kind::kList)
      for (const auto& pair : args[0]->items)
        if (pair->kind == Kind::kTuple && pair->items.size() == 2)
          d->entries.emplace_back(pair->items[0], pair->items[1]);
    return d;
  }
  if (name == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(args);
  if (name == "torch._utils._rebuild_parameter" ||
      name == "torch._utils._rebuild_parameter_with_state") {
    if (args.empty() || args[0]->kind != Kind::kTensor)
      throw refuse_("_rebuild_parameter without a tensor");
    return args[0];
  }
  if (name == "builtins.set" || name == "builtins.frozenset" || name == "builtins.list") {
    auto l = make_pickle_value(Kind::kList);
    if (!args.empty() && (args[0]->kind == Kind::kList || args[0]->kind == Kind::kTuple))
      l->items = args[0]->items;
    return l;
  }
  auto o =
      make_pickle_value(Kind::kOpaque);  // built by no code: it names its class, and that is all
  o->s =
      callable->kind == Kind::kGlobal || callable->kind == Kind::kOpaque ? callable->s : "a call";
  return o;
}

// BINPERSID of torch.save: ('storage', storage class, key, location, numel)
PickleRef TorchObjects::persistent(const PickleRef& pid) {
  if (pid->kind != Kind::kTuple || pid->items.size() < 5 || pid->items[0]->kind != Kind::kString ||
      pid->items[0]->s != "storage" || pid->items[1]->kind != Kind::kGlobal ||
      pid->items[2]->kind != Kind::kString)
    throw refuse_("a persistent id that is not a torch storage");
  const StorageType* type = nullptr;
  for (const auto& t : kStorageTypes)
    if (pid->items[1]->s == t.name) type = &t;
  if (!type)
    throw UsageError(fmt::format("{}: holds a storage of type {}, which recall does not read",
                                 source_, pid->items[1]->s));
  const int64_t numel = as_int(pid->items[4], "a storage's size");
  if (numel < 0) throw refuse_("a storage of negative size");
  const std::string& key = pid->items[2]->s;
  auto v = make_pickle_value(Kind::kStorage);
  auto it = storages_.find(key);
  if (it != storages_.end()) {
    if (it->second.scalar_type() != type->dtype || it->second.numel() != numel)
      throw refuse_(fmt::format("storage {} is named twice with different types", key));
    v->tensor = it->second;
  } else {
    v->tensor = storage_(key, type->dtype, numel);
    if (v->tensor.numel() != numel || v->tensor.scalar_type() != type->dtype)
      throw refuse_(fmt::format("storage {} does not hold {} elements", key, numel));
    storages_[key] = v->tensor;
  }
  return v;
}

}  // namespace recall
