// The metrics log's one reader and writer: the line format the trainer has always written, a
// round trip, and a torn last line skipped.
#include <gtest/gtest.h>

#include "recall/core/io.h"
#include "recall/train/metrics.h"
#include "train_test_util.h"

namespace recall {

TEST(Metrics, LineFormat) {
  EXPECT_EQ(metrics_line({250, true, {{"loss", 1.5}, {"accuracy", 0.5}}}),
            R"({"eval":{"accuracy":0.5,"loss":1.5},"step":250})");
  EXPECT_EQ(metrics_line({10, false, {{"loss", 2.0}, {"lr", 0.001}}}),
            R"({"loss":2.0,"lr":0.001,"step":10})");
}

TEST(Metrics, RoundTripSkipsATornLine) {
  test::TempDir dir;
  const std::string run = dir.path().string();
  EXPECT_TRUE(read_metrics(run).empty());  // no log yet
  const std::vector<MetricsRecord> written = {
      {10, false, {{"loss", 2.25}, {"tokens_per_s", 1e5}}},
      {20, true, {{"loss", 1.75}, {"bits_per_char", 2.5}}},
      {20, true, {{"loss", 1.5}, {"bits_per_char", 2.125}}}};
  std::string text;
  for (const auto& r : written) text += metrics_line(r) + "\n";
  write_file_atomic(metrics_path(run), text + R"({"step": 30, "loss": 1.)");
  const auto read = read_metrics(run);
  ASSERT_EQ(read.size(), written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].step, written[i].step);
    EXPECT_EQ(read[i].eval, written[i].eval);
    EXPECT_EQ(read[i].values, written[i].values);
  }
  EXPECT_EQ(read[0].get("tokens_per_s"), std::optional<double>(1e5));
  EXPECT_FALSE(read[0].get("accuracy").has_value());
  // a resumed run logs step 20 again: the last one counts
  ASSERT_TRUE(eval_at(read, 20).has_value());
  EXPECT_EQ(eval_at(read, 20)->get("bits_per_char"), std::optional<double>(2.125));
  EXPECT_FALSE(eval_at(read, 10).has_value());
}

}  // namespace recall
