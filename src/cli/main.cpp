// recall: memory stores, their capacity, and a transformer built from them.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "output.h"
#include "recall/core/allocator.h"
#include "recall/core/error.h"
#include "recall/core/machine.h"
#include "recall/core/signals.h"
#include "recall/core/threads.h"
#include "recall/ops/blas.h"
#include "recall/ops/kernels.h"
#include "recall/train/distributed.h"

namespace {

// The first word that is not an option (nor the value of one) when it names no command: CLI11
// would report it as an unexpected argument, or ask for a subcommand, without naming it.
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("-", 0) == 0) {
      const CLI::Option* opt = app.get_option_no_throw(word);
      if (opt && opt->get_expected_min() > 0 && word.find('=') == std::string::npos) ++i;
      continue;
    }
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (sub->check_name(word)) return "";
    return word;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  recall::ensure_fast_blas(argv);
  recall::keep_freed_heap();
  recall::start_signal_thread();  // before any other thread: none of them ever takes a signal
  CLI::App app{"recall: transformer layers as associative memory stores"};
  int threads = 0;
  recall::cli::Action action;
  recall::cli::add_commands(app, action, threads);
  app.set_version_flag("--version", [] {
    return fmt::format("recall {} (default threads here: {})\n{}", RECALL_VERSION,
                       recall::default_threads(), recall::kernel_report());
  });

  if (const std::string word = unknown_command(app, argc, argv); !word.empty()) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "error: unknown command '%s': the commands are %s (see recall --help)\n",
                 word.c_str(), names.c_str());
    return 2;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
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
