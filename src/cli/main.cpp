// recall: memory stores, their capacity, and a transformer built from them.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "recall/core/allocator.h"
#include "recall/core/blas.h"
#include "recall/core/error.h"
#include "recall/core/kernels.h"
#include "recall/core/threads.h"
#include "recall/train/distributed.h"

int main(int argc, char** argv) {
  recall::ensure_fast_blas(argv);
  recall::keep_freed_memory();
  CLI::App app{"recall: transformer layers as associative memory stores"};
  app.require_subcommand(1);
  app.fallthrough();  // --threads may come after the subcommand
  int threads = 0;
  app.add_option("--threads", threads, "intra-op threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);

  recall::cli::Action action;
  recall::cli::add_theory(app, action);
  recall::cli::add_probe(app, action);
  recall::cli::add_bench(app, action);
  recall::cli::add_train(app, action);
  recall::cli::add_eval(app, action);
  recall::cli::add_sample(app, action);
  recall::cli::add_fit(app, action);
  recall::cli::add_inspect(app, action);
  recall::cli::add_extrapolate(app, action);
  recall::cli::add_report(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see recall --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  try {
    recall::kernels_from_environment();  // a bad RECALL_KERNELS is refused before any work
    // one process among several on this host: its share of the cores
    recall::set_threads(threads > 0 ? threads : recall::threads_per_local_rank());
    return action ? action() : 0;
  } catch (const std::invalid_argument& e) {  // bad input found while running: a flag, file, config
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);  // torch adds a trace
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    return 1;
  }
}
