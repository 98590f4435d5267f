// Every size read from the file is checked against the bytes at hand, with overflow-checked
// arithmetic, before anything is copied: a header that lies cannot make the reader leave `bytes`.
#include "recall/formats/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>

#include "recall/core/error.h"

namespace recall {
namespace {

struct Dtype {
  const char* name;
  torch::ScalarType type;
  uint64_t bytes;
};

constexpr std::array<Dtype, 10> kDtypes = {{{"F32", torch::kFloat32, 4},
                                            {"F16", torch::kFloat16, 2},
                                            {"BF16", torch::kBFloat16, 2},
                                            {"F64", torch::kFloat64, 8},
                                            {"I64", torch::kInt64, 8},
                                            {"I32", torch::kInt32, 4},
                                            {"I16", torch::kInt16, 2},
                                            {"I8", torch::kInt8, 1},
                                            {"U8", torch::kUInt8, 1},
                                            {"BOOL", torch::kBool, 1}}};

// The format's limit on the header (the reference implementation refuses larger ones).
constexpr uint64_t kMaxHeader = 100'000'000;

const Dtype* dtype_of(torch::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return &d;
  return nullptr;
}

const Dtype* dtype_named(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace

std::string safetensors_bytes(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    const Dtype* d = dtype_of(t.scalar_type());
    check_arg(d != nullptr, fmt::format("safetensors: tensor {} has dtype {}, which the format "
                                        "does not hold here",
                                        name, c10::toString(t.scalar_type())));
    check_arg(name != "__metadata__" && !header.contains(name),
              fmt::format("safetensors: tensor name {} is reserved or repeated", name));
    data.push_back(t.detach().to(torch::kCPU).contiguous());
    const uint64_t n = static_cast<uint64_t>(data.back().numel()) * d->bytes;
    header[name] = {{"dtype", d->name}, {"shape", t.sizes().vec()}, {"data_offsets", {at, at + n}}};
    at += n;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  out.reserve(8 + json.size() + at);
  out += json;
  for (const auto& t : data)
    out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return out;
}

SafetensorsFile read_safetensors(std::string_view bytes, const std::string& source) {
  auto refuse = [&](const std::string& why) {
    return UsageError(fmt::format("safetensors file {}: {}; it is refused", source, why));
  };
  if (bytes.size() < 8) throw refuse("is truncated (shorter than its 8-byte header length)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    throw refuse(fmt::format("its header length {} runs past the end of the file ({} bytes)", n,
                             bytes.size()));
  const auto header = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
  if (header.is_discarded() || !header.is_object()) throw refuse("its header is not a JSON object");
  const std::string_view data = bytes.substr(8 + n);

  struct Entry {
    std::string name;
    const Dtype* dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  SafetensorsFile file;
  for (const auto& item : header.items()) {
    const std::string name = item.key();  // a copy: lambdas cannot capture structured bindings
    const auto& v = item.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw refuse("__metadata__ is not an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) throw refuse(fmt::format("__metadata__ key {} is not a string", k));
        file.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) {
      return refuse(fmt::format("tensor {}: {}", name, why));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    const auto& dt = v["dtype"];
    const Dtype* d = dt.is_string() ? dtype_named(dt.get<std::string>()) : nullptr;
    if (!d) throw bad(fmt::format("dtype {} is not one recall reads", dt.dump()));
    const auto& shape = v["shape"];
    const auto& offsets = v["data_offsets"];
    if (!shape.is_array()) throw bad("shape is not a list");
    uint64_t numel = 1;
    std::vector<int64_t> dims;
    for (const auto& s : shape) {
      if (!s.is_number_unsigned()) throw bad("shape holds a value that is not a size");
      const uint64_t dim = s.get<uint64_t>();
      if (dim > (uint64_t{1} << 62) || __builtin_mul_overflow(numel, dim, &numel))
        throw bad("its shape overflows");
      dims.push_back(static_cast<int64_t>(dim));
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw bad("data_offsets is not [begin, end]");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data.size())
      throw bad(fmt::format("data_offsets [{}, {}] lie outside the data section of {} bytes", begin,
                            end, data.size()));
    uint64_t size = 0;
    if (__builtin_mul_overflow(numel, d->bytes, &size) || size != end - begin)
      throw bad(fmt::format("data_offsets [{}, {}] hold {} bytes, its shape and dtype need {}",
                            begin, end, end - begin, size));
    entries.push_back({name, d, std::move(dims), begin, end});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t covered = 0;
  for (const auto& e : entries) {
    if (e.begin != covered)
      throw refuse(fmt::format("tensor {} starts at {}, where {} ", e.name, e.begin,
                               e.begin < covered ? "another tensor's data lies (overlap)"
                                                 : "the data section has a hole"));
    covered = e.end;
  }
  if (covered != data.size())
    throw refuse(fmt::format("its tensors cover {} of the {} bytes of its data section", covered,
                             data.size()));
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype->type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data.data() + e.begin, e.end - e.begin);
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

}  // namespace recall
