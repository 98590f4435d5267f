// The pickle reader's values (recall/formats/torch_pickle.h).
#include "recall/formats/torch_objects.h"

namespace recall {

PickleRef make_pickle_value(PickleValue::Kind kind) {
  auto v = std::make_shared<PickleValue>();
  v->kind = kind;
  return v;
}

const PickleValue* PickleValue::get(const std::string& key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::kString && k->s == key) return v.get();
  return nullptr;
}

std::string PickleValue::describe() const {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kTensor:
      return "tensor";
    case Kind::kStorage:
      return "storage";
    case Kind::kGlobal:
      return "class " + s;
    case Kind::kOpaque:
      return s + " object";
  }
  return "value";
}

}  // namespace recall
