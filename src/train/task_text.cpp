// Character-level language modelling. The vocabulary is what the file contains, so a checkpoint
// must carry it: ids mean nothing without the table that maps them back to bytes or codepoints.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "recall/core/error.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"
#include "recall/train/task.h"

namespace recall {

std::vector<int64_t> utf8_decode(const std::string& bytes, const std::string& source) {
  std::vector<int64_t> out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    int64_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // overlong forms, surrogates and values past U+10FFFF are not UTF-8
    static const int64_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok)
      throw std::invalid_argument(
          fmt::format("{}: invalid UTF-8 at byte {}; use text_units = \"byte\"", source, i));
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string utf8_encode(const std::vector<int64_t>& codepoints) {
  std::string out;
  for (int64_t cp : codepoints) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

namespace {

std::vector<int64_t> to_units(const std::string& bytes, TextUnits kind, const std::string& source) {
  if (kind == TextUnits::kCodepoint) return utf8_decode(bytes, source);
  std::vector<int64_t> units(bytes.size());
  std::transform(bytes.begin(), bytes.end(), units.begin(),
                 [](char c) { return static_cast<int64_t>(static_cast<unsigned char>(c)); });
  return units;
}

// One file of a folder, normalised so that the corpus is the same bytes on every machine and
// carries no file-format markup: line endings become \n; a line that is exactly "%" (the fortune
// separator) becomes a blank line; other control bytes except tab are dropped (the backspace
// overstrikes and bells of old terminals); the text ends with \n.
std::string normalise(const std::string& raw) {
  std::string out;
  out.reserve(raw.size() + 1);
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\r') {
      if (i + 1 < raw.size() && raw[i + 1] == '\n') continue;
      out += '\n';
    } else if (c == '\n' || c == '\t' || static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  std::string text;
  text.reserve(out.size() + 1);
  size_t begin = 0;
  while (begin < out.size()) {
    size_t end = out.find('\n', begin);
    if (end == std::string::npos) end = out.size();
    const std::string_view line(out.data() + begin, end - begin);
    if (line != "%") text += line;
    text += '\n';
    begin = end + 1;
  }
  return text;
}

// The corpus is held as bytes, then as 8-byte ids (and a sorted copy for the vocabulary): a file
// larger than RAM allows is refused before it is read, not met with bad_alloc minutes later.
void check_corpus_ram(const std::string& name, uintmax_t bytes, int64_t max_ram) {
  check_ram("text_file " + name, 26.0 * static_cast<double>(bytes),
            fmt::format("{} of text, about 26 bytes a character as text and ids",
                        format_bytes(static_cast<double>(bytes))),
            max_ram);
}

// Text holds no NUL byte; a binary file would train on bytes that mean nothing.
void check_not_binary(const std::string& name, const std::string& text) {
  if (const auto at = text.find('\0'); at != std::string::npos)
    throw UsageError(fmt::format(
        "text_file {}: byte {} is a NUL; this is a binary file, not text: give a text file", name,
        at));
}

std::string describe(int64_t unit, TextUnits kind) {
  return kind == TextUnits::kByte ? fmt::format("byte 0x{:02x}", unit)
                                  : fmt::format("U+{:04X}", unit);
}

}  // namespace

TextSource read_text_source(const std::string& path, int64_t max_ram) {
  namespace fs = std::filesystem;
  const std::string name = path.empty() ? std::string(kDefaultTextCorpus) : path;
  std::error_code ec;
  if (path.empty() && !fs::is_directory(name, ec))
    throw std::invalid_argument(fmt::format(
        "text_file is not set and the default corpus {} is missing: install Debian's fortunes "
        "package (scripts/setup.sh) or set text_file to a UTF-8 file or folder",
        name));
  TextSource source;
  source.name = name;
  if (!fs::is_directory(name, ec)) {
    check_corpus_ram(name, fs::file_size(name, ec), max_ram);
    source.text = read_file("text_file", name);
    check_not_binary(name, source.text);
    source.files = 1;
    return source;
  }
  // Regular files only (a symbolic link repeats a file; a subfolder holds other languages in
  // Debian's fortunes), without the .dat indexes, in byte order of their names.
  std::vector<std::string> files;
  uintmax_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(name, ec))
    if (entry.is_regular_file(ec) && !entry.is_symlink(ec) && entry.path().extension() != ".dat") {
      files.push_back(entry.path().filename().string());
      bytes += entry.file_size(ec);
    }
  check_arg(!ec, fmt::format("text_file {}: cannot list the folder: {}", name, ec.message()));
  check_corpus_ram(name, bytes, max_ram);
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string file = (fs::path(name) / f).string();
    const std::string text = read_file("text_file", file);
    check_not_binary(file, text);
    source.text += normalise(text);
  }
  source.files = static_cast<int64_t>(files.size());
  check_arg(!files.empty(),
            fmt::format("text_file {}: the folder holds no text files; name a file or a folder "
                        "of text files",
                        name));
  return source;
}

TextTask::TextTask(TextUnits units, std::vector<int64_t> vocabulary)
    : unit_kind_(units), units_(std::move(vocabulary)) {}

TextTask::TextTask(const TaskConfig& config, std::vector<int64_t> vocabulary, int64_t max_ram)
    : unit_kind_(config.text_units), units_(std::move(vocabulary)) {
  const TextSource source = read_text_source(config.text_file, max_ram);
  const auto units = to_units(source.text, unit_kind_, "text_file " + source.name);
  check_arg(units.size() >= 2, fmt::format("text_file {}: holds {} characters; it needs at least 2",
                                           source.name, units.size()));
  if (units_.empty()) {
    units_ = units;
    std::sort(units_.begin(), units_.end());
    units_.erase(std::unique(units_.begin(), units_.end()), units_.end());
  }
  std::unordered_map<int64_t, int64_t> id;
  for (size_t i = 0; i < units_.size(); ++i) id[units_[i]] = static_cast<int64_t>(i);
  std::vector<int64_t> ids(units.size());
  for (size_t i = 0; i < units.size(); ++i) {
    auto it = id.find(units[i]);
    check_arg(it != id.end(),
              fmt::format("text_file {}: contains {}, which the checkpoint's vocabulary lacks",
                          source.name, describe(units[i], unit_kind_)));
    ids[i] = it->second;
  }
  const auto n_val = std::max<size_t>(
      1, static_cast<size_t>(std::floor(config.val_fraction * static_cast<double>(ids.size()))));
  train_.assign(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(n_val));
  val_.assign(ids.end() - static_cast<std::ptrdiff_t>(n_val), ids.end());
  description_ = fmt::format(
      "text: {} ({} {}, {} {}s, vocabulary {}): training on the first {}, validation on the last "
      "{} ({} of the text)",
      source.name, source.files, source.files == 1 ? "file" : "files", units.size(),
      to_string(unit_kind_), units_.size(), train_.size(), val_.size(), config.val_fraction);
}

Batch TextTask::windows(const std::vector<int64_t>& data, int64_t batch, int64_t seq_len,
                        Rng& rng) const {
  const auto n = static_cast<int64_t>(data.size());
  check_arg(n >= seq_len + 1,
            fmt::format("seq_len = {}: the text's {} part has {} characters; it needs seq_len + 1 "
                        "(use a longer file or a shorter seq_len)",
                        seq_len, &data == &train_ ? "training" : "held-out", n));
  std::uniform_int_distribution<int64_t> start(0, n - seq_len - 1);
  auto x = torch::empty({batch, seq_len}, torch::kInt64), y = torch::empty_like(x);
  auto xa = x.accessor<int64_t, 2>(), ya = y.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = start(rng);
    for (int64_t t = 0; t < seq_len; ++t) {
      xa[b][t] = data[s + t];
      ya[b][t] = data[s + t + 1];
    }
  }
  return {x, y, torch::ones({batch, seq_len}, torch::kBool)};
}

Batch TextTask::sample(int64_t batch, int64_t seq_len, Rng& rng) const {
  return windows(train_, batch, seq_len, rng);
}

std::vector<Batch> TextTask::eval_set(int64_t batches, int64_t batch, int64_t seq_len,
                                      Rng& rng) const {
  std::vector<Batch> set;
  for (int64_t i = 0; i < batches; ++i) set.push_back(windows(val_, batch, seq_len, rng));
  return set;
}

std::map<std::string, double> TextTask::summarise(double ce_nats, double accuracy, int64_t n_scored,
                                                  int64_t n_params) const {
  auto out = Task::summarise(ce_nats, accuracy, n_scored, n_params);
  out["bits_per_char"] = ce_nats / std::log(2.0);
  return out;
}

std::vector<int64_t> TextTask::encode(const std::string& text) const {
  std::unordered_map<int64_t, int64_t> id;
  for (size_t i = 0; i < units_.size(); ++i) id[units_[i]] = static_cast<int64_t>(i);
  std::vector<int64_t> ids;
  for (int64_t u : to_units(text, unit_kind_, "--prompt")) {
    auto it = id.find(u);
    check_arg(it != id.end(), fmt::format("--prompt: {} is not in the model's vocabulary",
                                          describe(u, unit_kind_)));
    ids.push_back(it->second);
  }
  return ids;
}

std::string TextTask::decode(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> units;
  for (int64_t i : ids) units.push_back(units_.at(static_cast<size_t>(i)));
  if (unit_kind_ == TextUnits::kCodepoint) return utf8_encode(units);
  return std::string(units.begin(), units.end());
}

}  // namespace recall
