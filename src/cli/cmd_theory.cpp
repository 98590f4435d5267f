#include "commands.h"
namespace recall::cli {
void add_theory(CLI::App& root, Action& action) {}
void add_probe(CLI::App& root, Action& action) {}
void add_bench(CLI::App& root, Action& action) {}
}  // namespace recall::cli
