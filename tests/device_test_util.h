// The device the device tests run on: RECALL_TEST_DEVICE (cpu, cuda or cuda:N; cpu when unset).
// A test that wants it starts with RECALL_TEST_DEVICE_OR_SKIP(device), which skips the test with
// the reason when that device is not here (cuda on a CPU-only build or machine).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "recall/core/device.h"

namespace recall::test {

inline std::optional<torch::Device> test_device(std::string& why) {
  const char* v = std::getenv("RECALL_TEST_DEVICE");
  try {
    return parse_device(v && *v ? v : "cpu");
  } catch (const std::invalid_argument& e) {
    why = std::string("RECALL_TEST_DEVICE: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace recall::test

#define RECALL_TEST_DEVICE_OR_SKIP(device)                           \
  std::string device##_why;                                          \
  const auto device##_opt = recall::test::test_device(device##_why); \
  if (!device##_opt) GTEST_SKIP() << device##_why;                   \
  const torch::Device device = *device##_opt
