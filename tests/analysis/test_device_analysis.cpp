// The probe and fit on RECALL_TEST_DEVICE against the same runs on the CPU. They have no CPU fast
// path of their own, so the comparison only means something on another device: with the default
// (cpu) they are skipped, saying so.
#include <gtest/gtest.h>

#include <cmath>

#include "device_test_util.h"
#include "recall/analysis/fit.h"
#include "recall/analysis/probe.h"

namespace recall {
namespace {

#define RECALL_OTHER_THAN_CPU_OR_SKIP(device) \
  RECALL_TEST_DEVICE_OR_SKIP(device);         \
  if (device.is_cpu())                        \
  GTEST_SKIP() << "compares a device with the CPU; set RECALL_TEST_DEVICE=cuda to run it"

// The same memories (drawn on the CPU) give the same ISR curves, to float32 rounding.
TEST(DeviceAnalysis, ProbeOnTheTestDeviceMatchesTheCpu) {
  RECALL_OTHER_THAN_CPU_OR_SKIP(device);
  ProbeConfig c;
  c.stores = {"outer_product", "relu2", "exp3", "softmax", "least_squares"};
  c.d_k = c.d_v = 16;
  c.queries = 24;
  c.trials = 2;
  c.m = {8, 20, 64, 300};
  c.chunk = 50;
  c.rules = {BetaRule::kNone, BetaRule::kQwen};
  c.ref_len = 64;
  c.rule_m_max = 256;
  const auto cpu = run_probe(c);
  c.device = device;
  const auto there = run_probe(c);
  ASSERT_EQ(cpu.stores.size(), there.stores.size());
  for (size_t s = 0; s < cpu.stores.size(); ++s)
    for (size_t g = 0; g < c.m.size(); ++g) {
      const auto &a = there.stores[s].curve[g].isr, &b = cpu.stores[s].curve[g].isr;
      EXPECT_EQ(a.count, b.count);
      EXPECT_NEAR(a.median, b.median, 1e-4 * std::abs(b.median)) << cpu.stores[s].store;
      EXPECT_NEAR(a.p90, b.p90, 1e-4 * std::abs(b.p90)) << cpu.stores[s].store;
    }
  ASSERT_EQ(cpu.rules.size(), there.rules.size());
  for (size_t r = 0; r < cpu.rules.size(); ++r)
    for (size_t g = 0; g < cpu.rules[r].curve.size(); ++g)
      EXPECT_NEAR(there.rules[r].curve[g].isr.median, cpu.rules[r].curve[g].isr.median,
                  1e-4 * cpu.rules[r].curve[g].isr.median);
}

// A store trained from the same start on the same memories recalls the same ones.
TEST(DeviceAnalysis, FitOnTheTestDeviceMatchesTheCpu) {
  RECALL_OTHER_THAN_CPU_OR_SKIP(device);
  FitConfig c;
  c.kind = fit_kind_from_string("mlp-relu2");
  c.width = 8;
  c.d_k = 16;
  c.steps = 200;
  c.lr = 3e-2;
  const FitTrial cpu = fit_memories(c, 12);
  c.device = device;
  const FitTrial there = fit_memories(c, 12);
  EXPECT_NEAR(there.recalled, cpu.recalled, 1.0 / 12 + 1e-9);  // one memory may flip
  EXPECT_NEAR(there.loss, cpu.loss, 1e-3 + 1e-2 * cpu.loss);
}

}  // namespace
}  // namespace recall
