// recall fit: the empirical capacity of a trained store of a given width (recall/analysis/fit.h).
#include <cstdio>

#include "commands.h"
#include "output.h"
#include "recall/analysis/fit.h"
#include "recall/core/io.h"
#include "recall/core/machine.h"

namespace recall::cli {

void add_fit(CLI::App& root, Action& action) {
  struct Opts {
    std::string kind = "mlp-relu2", json, device = "cpu";
    FitConfig config;
    int64_t max_ram = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = root.add_subcommand("fit", "empirical capacity of a trained store");
  cmd->add_option("--kind", o->kind,
                  "linear, mlp-relu, mlp-relu2, mlp-relu3, mlp-gelu, glu-silu (or swiglu), "
                  "glu-relu, glu-relu2, glu-gelu or learned_kv")
      ->capture_default_str();
  cmd->add_option("--width", o->config.width, "hidden units or slots N")->capture_default_str();
  cmd->add_option("--dk", o->config.d_k, "key and value dimension")->capture_default_str();
  cmd->add_option("--steps", o->config.steps, "Adam steps per M")->capture_default_str();
  cmd->add_option("--lr", o->config.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--target", o->config.target, "fraction recalled")->capture_default_str();
  cmd->add_option("--m-max", o->config.m_max, "largest M tried (0: 4 x parameters)")
      ->capture_default_str();
  cmd->add_option("--seed", o->config.seed, "seed of memories and initialisation")
      ->capture_default_str()
      ->check(non_negative());  // an unsigned option takes -1 as 2^64 - 1
  cmd->add_option("--json", o->json, "also write the result as JSON to this file (- : stdout)");
  add_device_option(cmd, o->device);
  add_max_ram(cmd, o->max_ram);
  cmd->callback([o, &action] {
    o->config.kind = fit_kind_from_string(o->kind);
    o->config.device = parse_device(o->device);
    o->config.validate();
    check_output("--json", o->json);
    action = [o] {
      std::string parts;
      const double bytes = o->config.estimate_ram(&parts);
      check_ram("fit", bytes, parts, o->max_ram);
      const FitResult r = fit_capacity(o->config);
      if (!is_stdout(o->json)) std::fputs(fit_table(r).c_str(), stdout);
      write_output(o->json, fit_json(r));
      return 0;
    };
  });
}

}  // namespace recall::cli
