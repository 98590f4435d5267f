// --precision, for the commands that run the model (train, bench train, eval, sample).
#include "commands.h"

namespace recall::cli {

void add_precision_option(CLI::App* cmd, std::string& precision) {
  cmd->add_option("--precision", precision,
                  "the matrix products' precision: fp32 (the default), or bf16 operands with fp32 "
                  "accumulation on a CPU with bf16 instructions (AMX, AVX512-BF16) or a GPU; "
                  "weights, norms, softmax and loss stay fp32")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

Precision checked_precision(const std::string& precision, const torch::Device& device) {
  const Precision p = precision.empty() ? Precision::kFp32 : precision_from_string(precision);
  check_precision(p, device, "--precision");
  return p;
}

}  // namespace recall::cli
