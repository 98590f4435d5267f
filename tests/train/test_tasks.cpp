#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "recall/train/task.h"
#include "train_test_util.h"

namespace recall {
namespace {

TEST(MqarTask, KeysDistinctValuesDisjointAndOnlyQueriesScored) {
  const int64_t vocab = 41, pairs = 6, T = 40, B = 64;
  MqarTask task(vocab, pairs);
  Rng rng(3);
  const Batch b = task.sample(B, T, rng);
  ASSERT_EQ(b.x.sizes(), (std::vector<int64_t>{B, T}));
  auto x = b.x.accessor<int64_t, 2>(), y = b.y.accessor<int64_t, 2>();
  auto m = b.mask.accessor<bool, 2>();
  const int64_t vb = task.value_begin();
  EXPECT_EQ(vb, 21);
  for (int64_t r = 0; r < B; ++r) {
    std::map<int64_t, int64_t> kv;
    std::set<int64_t> values;
    for (int64_t i = 0; i < pairs; ++i) {
      const int64_t k = x[r][2 * i], v = x[r][2 * i + 1];
      EXPECT_TRUE(k >= 1 && k < vb) << k;
      EXPECT_TRUE(v >= vb && v < vocab) << v;
      EXPECT_TRUE(kv.emplace(k, v).second) << "repeated key " << k;
      values.insert(v);
    }
    EXPECT_EQ(values.size(), static_cast<size_t>(pairs));
    int64_t scored = 0;
    std::set<int64_t> queried;
    for (int64_t t = 0; t < T; ++t) {
      if (!m[r][t]) {
        if (t >= 2 * pairs) {
          EXPECT_EQ(x[r][t], 0) << "filler expected at " << t;
        }
        continue;
      }
      ++scored;
      EXPECT_GE(t, 2 * pairs) << "scored inside the context";
      ASSERT_TRUE(kv.count(x[r][t])) << "query is not a context key";
      EXPECT_EQ(y[r][t], kv[x[r][t]]) << "target is not the key's value";
      queried.insert(x[r][t]);
    }
    EXPECT_EQ(scored, pairs);
    EXPECT_EQ(queried.size(), static_cast<size_t>(pairs));  // every key asked once
  }
}

TEST(MqarTask, ManyKeysFewValues) {
  // 50 keys [1, 51), 4 values [51, 55): values repeat once the pairs outnumber them, keys never
  const int64_t vocab = 55, values = 4;
  for (int64_t pairs : {3, 12}) {
    MqarTask task(vocab, pairs, values);
    EXPECT_EQ(task.value_begin(), 51);
    EXPECT_EQ(task.keys(), 50);
    Rng rng(5);
    const Batch b = task.sample(16, 4 * pairs, rng);
    auto x = b.x.accessor<int64_t, 2>(), y = b.y.accessor<int64_t, 2>();
    auto m = b.mask.accessor<bool, 2>();
    std::set<int64_t> seen_values;
    for (int64_t r = 0; r < 16; ++r) {
      std::map<int64_t, int64_t> kv;
      std::set<int64_t> row_values;
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t k = x[r][2 * i], v = x[r][2 * i + 1];
        EXPECT_TRUE(k >= 1 && k < 51) << k;
        EXPECT_TRUE(v >= 51 && v < vocab) << v;
        EXPECT_TRUE(kv.emplace(k, v).second) << "repeated key " << k;
        row_values.insert(v);
        seen_values.insert(v);
      }
      if (pairs <= values) {
        EXPECT_EQ(row_values.size(), static_cast<size_t>(pairs));
      }
      for (int64_t t = 2 * pairs; t < 4 * pairs; ++t)
        if (m[r][t]) {
          EXPECT_EQ(y[r][t], kv.at(x[r][t]));
        }
    }
    EXPECT_EQ(seen_values.size(), static_cast<size_t>(values));
  }
  EXPECT_THROW(MqarTask(55, 51, 4), std::invalid_argument);  // 51 keys needed, 50 there
  EXPECT_THROW(MqarTask(55, 3, -1), std::invalid_argument);
  // the default split is unchanged: the same prompts as before the key existed
  MqarTask halves(33, 4), zero(33, 4, 0);
  Rng a(9), b(9);
  EXPECT_TRUE(halves.sample(4, 32, a).x.equal(zero.sample(4, 32, b).x));
}

TEST(MqarTask, SeededAndLengthFree) {
  MqarTask task(33, 4);
  Rng a(11), b(11), c(12);
  EXPECT_TRUE(task.sample(4, 32, a).x.equal(task.sample(4, 32, b).x));
  EXPECT_FALSE(task.sample(4, 32, a).x.equal(task.sample(4, 32, c).x));
  EXPECT_EQ(task.sample(2, 128, a).mask.sum().item<int64_t>(), 8);  // longer eval lengths work
  EXPECT_THROW(task.sample(2, 15, a), std::invalid_argument);
}

TEST(FactsTask, DistinctQuestionsAndBitsFormula) {
  TaskConfig tc;
  tc.facts_n = 50;
  tc.facts_subjects = 10;
  tc.facts_relations = 5;
  tc.facts_objects = 16;
  FactsTask task(tc, 1);
  EXPECT_EQ(task.vocab_size(), 31);
  Rng rng(0);
  const auto set = task.eval_set(1, 16, 2, rng);
  ASSERT_EQ(set.size(), 4u);  // 50 facts in batches of 16
  std::set<std::pair<int64_t, int64_t>> questions;
  for (const auto& b : set)
    for (int64_t i = 0; i < b.x.size(0); ++i) {
      const int64_t s = b.x[i][0].item<int64_t>(), r = b.x[i][1].item<int64_t>();
      const int64_t o = b.y[i][1].item<int64_t>();
      EXPECT_TRUE(s >= 0 && s < 10 && r >= 10 && r < 15 && o >= 15 && o < 31);
      questions.emplace(s, r);
      EXPECT_FALSE(b.mask[i][0].item<bool>());
      EXPECT_TRUE(b.mask[i][1].item<bool>());
    }
  EXPECT_EQ(questions.size(), 50u);
  // perfect recall: 50 facts * 4 bits; chance (CE = ln 16): 0 bits
  EXPECT_DOUBLE_EQ(task.summarise(0.0, 1.0, 50, 100).at("bits"), 200.0);
  EXPECT_DOUBLE_EQ(task.summarise(0.0, 1.0, 50, 100).at("bits_per_param"), 2.0);
  EXPECT_NEAR(task.summarise(std::log(16.0), 0.1, 50, 100).at("bits"), 0.0, 1e-9);
}

TEST(TextTask, CodepointVocabularyRoundTrip) {
  test::TempDir dir;
  const std::string text = "héllo wörld, héllo ∑ wörld! ";
  test::write_text(dir / "t.txt", text + text + text);
  TaskConfig tc;
  tc.text_file = dir / "t.txt";
  tc.text_units = TextUnits::kCodepoint;
  TextTask task(tc);
  EXPECT_EQ(task.vocab_size(), 12);  // distinct characters of the text
  EXPECT_EQ(task.decode(task.encode("wörld ∑")), "wörld ∑");
  EXPECT_THROW(task.encode("z"), std::invalid_argument);
  Rng rng(0);
  const Batch b = task.sample(3, 8, rng);
  EXPECT_TRUE(b.x.slice(1, 1).equal(b.y.slice(1, 0, 7)));  // targets are the next character
  tc.text_units = TextUnits::kByte;
  EXPECT_EQ(TextTask(tc).vocab_size(), 15);  // 9 ASCII + 6 distinct bytes of é, ö, ∑
}

// A folder is its regular files in name order, each normalised; links, .dat indexes and subfolders
// are left out (Debian's fortunes keeps symlinked duplicates and other languages there).
TEST(TextTask, FolderIsItsFilesInNameOrderNormalised) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "corpus/de");
  test::write_text(dir / "corpus/b", "x\r\n%\r\ny\rz");
  test::write_text(dir / "corpus/a", "he\bhello\n%\nworld\a\tend\n%\n");
  test::write_text(dir / "corpus/a.dat", "index");
  test::write_text(dir / "corpus/de/c", "hallo");
  std::filesystem::create_symlink("a", dir / "corpus/a.u8");
  const TextSource s = read_text_source(dir / "corpus");
  EXPECT_EQ(s.files, 2);
  EXPECT_EQ(s.text, "hehello\n\nworld\tend\n\nx\n\ny\nz\n");
  // a file is read as it is
  EXPECT_EQ(read_text_source(dir / "corpus/b").text, "x\r\n%\r\ny\rz");
  try {
    read_text_source(dir / "corpus/de/missing");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

// Validation is the contiguous tail: with the last tenth all 'b', every evaluation window is 'b'
// and no training window sees one.
TEST(TextTask, ValidationIsTheHeldOutTail) {
  test::TempDir dir;
  test::write_text(dir / "t.txt", std::string(90, 'a') + std::string(10, 'b'));
  TaskConfig tc;
  tc.kind = TaskKind::kText;
  tc.text_file = dir / "t.txt";
  tc.val_fraction = 0.1;
  TextTask task(tc);
  Rng rng(1);
  for (const Batch& b : task.eval_set(4, 8, 6, rng)) EXPECT_TRUE(b.x.eq(1).all().item<bool>());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(task.sample(8, 6, rng).y.eq(0).all().item<bool>());
  EXPECT_NE(task.description().find("training on the first 90, validation on the last 10"),
            std::string::npos)
      << task.description();
}

// The default corpus is what scripts/setup.sh installs: Debian's fortunes, over 1 MB once
// normalised, with no separator lines or carriage returns left.
TEST(TextTask, DefaultCorpusIsInstalledAndNormalised) {
  ASSERT_TRUE(std::filesystem::is_directory(kDefaultTextCorpus))
      << kDefaultTextCorpus << " is missing: install Debian's fortunes (scripts/setup.sh)";
  const TextSource s = read_text_source("");
  EXPECT_EQ(s.name, kDefaultTextCorpus);
  EXPECT_GE(s.text.size(), size_t{1} << 20);
  EXPECT_GE(s.files, 30);
  EXPECT_EQ(s.text.find("\n%\n"), std::string::npos);
  EXPECT_EQ(s.text.find('\r'), std::string::npos);
  EXPECT_EQ(s.text.find('\b'), std::string::npos);
  EXPECT_EQ(s.text.back(), '\n');
}

TEST(TextTask, InvalidUtf8NamesOffset) {
  try {
    utf8_decode(std::string("ab\xC3(", 4), "f.txt");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("f.txt: invalid UTF-8 at byte 2"), std::string::npos);
  }
  EXPECT_EQ(utf8_encode(utf8_decode("a\u00e9\u20ac\U0001F600", "s")), "a\u00e9\u20ac\U0001F600");
}

}  // namespace
}  // namespace recall
