#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "recall/analysis/probe_output.h"
#include "recall/core/io.h"

namespace recall::cli {

void add_theory(CLI::App& root, Action& action) {
  struct Opts {
    int64_t d_k = 64;
    double beta = 8;
    std::string json;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand("theory", "exact theory capacity of every store");
  cmd->add_option("--dk", o->d_k, "key dimension")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--beta", o->beta, "sharpness of exp<n> and softmax")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--json", o->json,
                  "also write the table as JSON to FILE; alone or -: JSON on stdout")
      ->expected(0, 1)
      ->default_str("-");
  cmd->callback([o, &action] {
    const bool to_stdout = o->json == "-";
    if (!o->json.empty() && !to_stdout) check_output_path("--json", o->json);
    action = [o, to_stdout] {
      if (to_stdout) {
        std::fputs(theory_json(o->d_k, o->beta).c_str(), stdout);
        return 0;
      }
      std::fputs(theory_table(o->d_k, o->beta).c_str(), stdout);
      if (!o->json.empty()) write_file_atomic(o->json, theory_json(o->d_k, o->beta));
      return 0;
    };
  });
}

}  // namespace recall::cli
