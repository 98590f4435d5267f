// Placeholder until the transformer lands: `recall bench train` reports that it is not built yet.
#include "commands.h"
#include "recall/error.h"
namespace recall::cli {
void add_bench_train(CLI::App& bench, Action& action) {}
}  // namespace recall::cli
