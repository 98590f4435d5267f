// The checkpoint container. The checksum covers the whole payload so that a flipped byte anywhere
// is caught before any section is trusted; sizes are checked against the bytes at hand before every
// read, so a truncated or hostile file cannot make the reader run past its end.
#include "recall/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "recall/core/error.h"
#include "recall/core/io.h"

namespace recall {
namespace {

constexpr char kMagic[8] = {'R', 'E', 'C', 'A', 'L', 'L', 'C', 'K'};
constexpr size_t kHeader = 8 + 4 + 8 + 8;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out.append(b, sizeof(T));
}

template <class T>
T get(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void put_section(std::string& out, const std::string& name, std::string_view bytes) {
  put<uint32_t>(out, static_cast<uint32_t>(name.size()));
  out += name;
  put<uint64_t>(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

std::string int64s_bytes(const std::vector<int64_t>& v) {
  std::string out;
  for (int64_t x : v) put<uint64_t>(out, static_cast<uint64_t>(x));
  return out;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string encode_checkpoint(const Checkpoint& c) {
  // One buffer, the header patched once the payload is in place: a model's bytes are copied once
  // (a GPT-2-small import writes 500 MB of them).
  const std::string step = int64s_bytes({c.step}), vocabulary = int64s_bytes(c.vocabulary),
                    world = int64s_bytes({c.world_size});
  std::vector<std::pair<std::string, std::string_view>> sections = {
      {"config", c.config_toml},  {"step", step},
      {"task_rng", c.task_rng},   {"torch_rng", c.torch_rng},
      {"vocabulary", vocabulary}, {"model", c.model},
      {"optimizer", c.optimizer}};
  if (c.world_size != 1) sections.emplace_back("world_size", world);
  size_t size = kHeader;
  for (const auto& s : sections) size += 4 + s.first.size() + 8 + s.second.size();
  std::string out;
  out.reserve(size);
  out.append(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kCheckpointVersion);
  put<uint64_t>(out, 0);  // payload size and checksum, patched below
  put<uint64_t>(out, 0);
  for (const auto& s : sections) put_section(out, s.first, s.second);
  const std::string_view payload = std::string_view(out).substr(kHeader);
  std::string patch;
  put<uint64_t>(patch, payload.size());
  put<uint64_t>(patch, fnv1a64(payload));
  out.replace(12, patch.size(), patch);
  return out;
}

namespace {

UsageError refused(const std::string& source, const std::string& why) {
  return UsageError(fmt::format("checkpoint {}: {}; it is refused", source, why));
}

// The sections of a checkpoint's bytes, as views into them, after every check of the container.
std::map<std::string, std::string_view> checkpoint_sections(std::string_view bytes,
                                                            const std::string& source) {
  auto refuse = [&](const std::string& why) { return refused(source, why); };
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw refuse(bytes.size() < kHeader ? "is truncated (shorter than its header)"
                                        : "is not a recall checkpoint (bad magic)");
  const auto version = get<uint32_t>(bytes.data() + 8);
  if (version != kCheckpointVersion)
    throw refuse(fmt::format("has format version {}, this build reads version {}", version,
                             kCheckpointVersion));
  const auto size = get<uint64_t>(bytes.data() + 12);
  const std::string_view payload = bytes.substr(kHeader);
  if (payload.size() != size)
    throw refuse(fmt::format("is {} (payload of {} bytes, {} expected)",
                             payload.size() < size ? "truncated" : "longer than written",
                             payload.size(), size));
  if (fnv1a64(payload) != get<uint64_t>(bytes.data() + 20))
    throw refuse("fails its checksum (the file is corrupted)");

  std::map<std::string, std::string_view> sections;
  for (size_t at = 0; at < payload.size();) {
    if (payload.size() - at < 4) throw refuse("has a broken section header");
    const auto name_size = get<uint32_t>(payload.data() + at);
    at += 4;
    if (payload.size() - at < name_size + uint64_t{8}) throw refuse("has a broken section header");
    std::string name(payload.substr(at, name_size));
    at += name_size;
    const auto n = get<uint64_t>(payload.data() + at);
    at += 8;
    if (payload.size() - at < n) throw refuse(fmt::format("section '{}' overruns the file", name));
    sections[name] = payload.substr(at, n);
    at += n;
  }
  return sections;
}

}  // namespace

Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source) {
  auto refuse = [&](const std::string& why) { return refused(source, why); };
  const auto sections = checkpoint_sections(bytes, source);
  auto section = [&](const std::string& name) {
    auto it = sections.find(name);
    if (it == sections.end()) throw refuse(fmt::format("lacks section '{}'", name));
    return it->second;
  };
  auto int64s = [&](const std::string& name) {
    auto s = section(name);
    if (s.size() % 8 != 0) throw refuse(fmt::format("section '{}' has a broken size", name));
    std::vector<int64_t> v;
    for (size_t i = 0; i < s.size(); i += 8)
      v.push_back(static_cast<int64_t>(get<uint64_t>(s.data() + i)));
    return v;
  };
  Checkpoint c;
  c.config_toml = std::string(section("config"));
  const auto step = int64s("step");
  if (step.size() != 1 || step[0] < 0) throw refuse("section 'step' is not one step count");
  c.step = step[0];
  c.task_rng = std::string(section("task_rng"));
  c.torch_rng = std::string(section("torch_rng"));
  c.vocabulary = int64s("vocabulary");
  c.model = std::string(section("model"));
  c.optimizer = std::string(section("optimizer"));
  if (sections.count("world_size")) {
    const auto w = int64s("world_size");
    if (w.size() != 1 || w[0] < 1) throw refuse("section 'world_size' is not one process count");
    c.world_size = w[0];
  }
  return c;
}

std::string checkpoint_path(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "checkpoint.bin").string();
}

std::string best_checkpoint_path(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "best.bin").string();
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  const std::string bytes = encode_checkpoint(ckpt);
  // never let a file that would be refused replace a good one: decode's checks of the container,
  // without its copies of the sections
  checkpoint_sections(bytes, path);
  write_file_atomic(path, bytes);
}

Checkpoint load_checkpoint(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? checkpoint_path(path) : path;
  return decode_checkpoint(read_file("--checkpoint", file), file);
}

namespace {

// Where loaded tensors go: the device of the parameters they replace (CPU when there are none), so
// that a checkpoint written on any device loads on any other.
torch::Device device_of(const std::vector<torch::Tensor>& params) {
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

// Appended to one string as torch writes it: a stream's buffer and its copy would be two.
std::string archive_bytes(torch::serialize::OutputArchive& archive) {
  std::string out;
  archive.save_to([&out](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  return out;
}

}  // namespace

std::string module_bytes(const torch::nn::Module& module) {
  torch::serialize::OutputArchive archive;
  module.save(archive);
  return archive_bytes(archive);
}

void load_module_bytes(torch::nn::Module& module, const std::string& bytes) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& p : module.named_parameters())
    shapes.emplace_back(p.key(), p.value().sizes().vec());
  for (const auto& b : module.named_buffers())
    shapes.emplace_back(b.key(), b.value().sizes().vec());
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size(), device_of(module.parameters()));
  module.load(archive);
  // torch's reader replaces each tensor whatever its shape; a different model must not pass
  size_t i = 0;
  for (const auto& p : module.named_parameters()) {
    if (p.value().sizes().vec() != shapes[i].second)
      throw UsageError(fmt::format("checkpoint: parameter {} has shape [{}], the model needs [{}]",
                                   p.key(), fmt::join(p.value().sizes(), ", "),
                                   fmt::join(shapes[i].second, ", ")));
    ++i;
  }
}

std::string optimizer_bytes(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  return archive_bytes(archive);
}

void load_optimizer_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  std::vector<torch::Tensor> params;
  for (const auto& group : optimizer.param_groups())
    params.insert(params.end(), group.params().begin(), group.params().end());
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size(), device_of(params));
  optimizer.load(archive);
}

std::string torch_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const auto state = gen.get_state().contiguous();
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

void set_torch_rng_state(const std::string& bytes) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  gen.set_state(state);
}

}  // namespace recall
