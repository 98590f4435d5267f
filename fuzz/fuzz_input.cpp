// libFuzzer target for what a user types: the first input byte chooses
//  - text (even): UTF-8 decoding of a corpus or prompt, and encoding then decoding with a text
//    task's vocabulary, byte or codepoint units; bad UTF-8 must be refused with
//    std::invalid_argument, and good text must come back unchanged;
//  - a command line (odd): the rest, split at NUL bytes, is the argument list after `recall`,
//    parsed by the CLI's own parser (the command's work is not run); bad arguments must be
//    refused with CLI11's ParseError or std::invalid_argument (exit 2), never a crash.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "recall/cli/app.h"
#include "recall/train/task.h"

namespace {

void text(const std::string& bytes) {
  // bytes: every byte is a unit, and every text over those bytes comes back
  std::vector<int64_t> byte_vocab(bytes.begin(), bytes.end());
  for (auto& b : byte_vocab) b = static_cast<unsigned char>(b);
  std::sort(byte_vocab.begin(), byte_vocab.end());
  byte_vocab.erase(std::unique(byte_vocab.begin(), byte_vocab.end()), byte_vocab.end());
  const recall::TextTask by_byte(recall::TextUnits::kByte, byte_vocab);
  if (by_byte.decode(by_byte.encode(bytes)) != bytes) std::abort();

  std::vector<int64_t> codepoints;
  try {
    codepoints = recall::utf8_decode(bytes, "fuzz");
  } catch (const std::invalid_argument&) {
    return;
  }
  if (recall::utf8_encode(codepoints) != bytes) std::abort();
  std::sort(codepoints.begin(), codepoints.end());
  codepoints.erase(std::unique(codepoints.begin(), codepoints.end()), codepoints.end());
  const recall::TextTask by_codepoint(recall::TextUnits::kCodepoint, codepoints);
  if (by_codepoint.decode(by_codepoint.encode(bytes)) != bytes) std::abort();
  if (codepoints.size() > 1) {  // a prompt with a unit outside the vocabulary is refused
    const recall::TextTask smaller(recall::TextUnits::kCodepoint,
                                   {codepoints.begin() + 1, codepoints.end()});
    try {
      smaller.encode(bytes);
      std::abort();
    } catch (const std::invalid_argument&) {
    }
  }
}

void command_line(const std::string& bytes) {
  std::vector<std::string> args{"recall"};
  size_t start = 0;
  for (size_t i = 0; i <= bytes.size(); ++i)
    if (i == bytes.size() || bytes[i] == '\0') {
      args.push_back(bytes.substr(start, i - start));
      start = i + 1;
    }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CLI::App app{"recall"};
  int threads = 0;
  recall::cli::Action action;
  recall::cli::add_commands(app, action, threads);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    command_line(rest);
  else
    text(rest);
  return 0;
}
