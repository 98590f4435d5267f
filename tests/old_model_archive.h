// A model's torch archive as recall wrote it before the blocks were the list "blocks" and the
// attention's head_mask a buffer: block i as "block<i>" beside tok_emb, and no head_mask. Files
// written then must keep loading (TransformerImpl::load, AttentionImpl::load).
#pragma once
#include <sstream>
#include <string>

#include "recall/core/torch.h"

namespace recall::test {

inline void save_old_layout(const torch::nn::Module& m, torch::serialize::OutputArchive& out) {
  for (const auto& p : m.named_parameters(/*recurse=*/false)) out.write(p.key(), p.value());
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (b.key() != "head_mask") out.write(b.key(), b.value(), /*is_buffer=*/true);
  for (const auto& c : m.named_children()) {
    if (c.key() == "blocks") {
      const auto blocks = c.value()->children();
      for (size_t i = 0; i < blocks.size(); ++i) {
        torch::serialize::OutputArchive block;
        save_old_layout(*blocks[i], block);
        out.write("block" + std::to_string(i), block);
      }
      continue;
    }
    torch::serialize::OutputArchive sub;
    save_old_layout(*c.value(), sub);
    out.write(c.key(), sub);
  }
}

// The bytes checkpoint.h's module_bytes wrote for `model` in the old layout.
inline std::string old_layout_bytes(const torch::nn::Module& model) {
  torch::serialize::OutputArchive archive;
  save_old_layout(model, archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

}  // namespace recall::test
