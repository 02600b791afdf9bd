// Unit tests of the word-count and grep operators (algorithms/text/text_operators.h): the conformance kit on the
// stateful ones (wc-count, wc-merge, grep-collect) and on the stateless readers, the source's descriptors covering
// the corpus, and the operators chained by hand (source -> tokenize -> parallel wc-count -> merge; source ->
// grep-match -> collect) equal to the direct scans.
#include "algorithms/text/text_operators.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "afstream/testing/conformance.h"
#include "algorithms/text/scan.h"
#include "algorithms/text/synthetic.h"
#include "tests/temp_dir.h"

namespace afs::text {
namespace {

namespace fs = std::filesystem;
using afs::testing::TempDir;

struct Collect final : Emitter {
  std::vector<Item> items;
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    items.push_back({.key = key, .value = value, .time = time});
  }
};

// A small synthetic corpus in a temp dir, and the operator parameters that read it.
struct SmallCorpus {
  TempDir dir;
  Params params;
  explicit SmallCorpus(std::uint64_t chunk_bytes = 512) {
    const SyntheticCorpusParams s{.bytes = 60000, .files = 3, .vocabulary = 500, .skew = 1.0, .seed = 4};
    ensure_synthetic_corpus((dir.path() / "c").string(), s);
    params.set("dir", (dir.path() / "c").string()).set("chunk-bytes", chunk_bytes).set("max-line", std::uint64_t{4096});
  }
  std::vector<Item> descriptors() const {
    TextSource src(params, {0, 1});
    std::vector<Item> v(src.size());
    EXPECT_EQ(src.read(0, v.data(), v.size()), v.size());
    return v;
  }
};

std::vector<Item> word_items(std::uint64_t seed, std::size_t n, std::uint64_t words) {
  std::mt19937_64 rng(seed);
  std::vector<Item> v(n);
  for (auto& it : v) {
    it.key = rng() % words * 0x9E3779B97F4A7C15ULL;
    it.value = 1;
  }
  return v;
}

TEST(TextOperators, WordCountConforms) {
  testing::ConformanceOptions o;  // canonical snapshots: TrackedMap::write_full sorts its keys
  EXPECT_TRUE(
      testing::OperatorConforms([] { return std::make_unique<WordCount>(Params()); }, word_items(1, 4000, 300), o));
}

TEST(TextOperators, WordCountMergeAndGrepCollectConform) {
  testing::ConformanceOptions o;
  o.exact_divergence = false;  // wc-merge: a set may lower a count; max-abs is then a high-water mark
  std::mt19937_64 rng(2);
  std::vector<Item> counts(3000);
  for (auto& it : counts) {
    it.key = rng() % 500;
    it.value = static_cast<std::int64_t>(rng() % 1000);
  }
  EXPECT_TRUE(testing::OperatorConforms(
      [] { return std::make_unique<WordCountMerge>(Params().set("max-count", std::uint64_t{1000})); }, counts, o));
  o.exact_divergence = true;
  std::vector<Item> lines(3000);
  for (auto& it : lines) {
    it.key = line_id(static_cast<std::uint32_t>(rng() % 4), rng() % 5000);
    it.value = 1;
  }
  EXPECT_TRUE(testing::OperatorConforms([] { return std::make_unique<GrepCollect>(Params()); }, lines, o));
}

TEST(TextOperators, ReadersConformAndStayWithinBeta) {
  SmallCorpus c;
  const auto items = c.descriptors();
  ASSERT_GT(items.size(), 100u);
  Params tok = c.params;
  tok.set("seed", std::uint64_t{5});
  EXPECT_TRUE(testing::OperatorConforms([&] { return std::make_unique<TextTokenize>(tok); }, items));
  Params grep = c.params;
  grep.set("pattern", "a").set("kind", "substring");
  EXPECT_TRUE(testing::OperatorConforms([&] { return std::make_unique<GrepMatch>(grep); }, items));
}

TEST(TextOperators, SourceInstancesSplitTheChunksAndDescribeThem) {
  SmallCorpus c;
  const auto all = c.descriptors();
  std::vector<Item> joined;
  for (int i = 0; i < 3; ++i) {
    TextSource src(c.params, {i, 3});
    std::vector<Item> v(src.size() + 5);
    v.resize(src.read(0, v.data(), v.size()));
    joined.insert(joined.end(), v.begin(), v.end());
  }
  EXPECT_EQ(joined, all);
  const auto corpus = corpus_of(c.params);
  const auto chunks = corpus.chunks(chunking_of(c.params));
  ASSERT_EQ(all.size(), chunks.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].key, i);
    EXPECT_EQ(chunk_of(all[i], 1u << 20), chunks[i]);
  }
  EXPECT_THROW(chunk_of({.key = 0, .value = -1, .time = 5}, 100), FormatError);
  EXPECT_THROW(chunk_of({.key = 0, .value = 0, .time = 101}, 100), FormatError);
  EXPECT_THROW(TextSource(Params().set("dir", (c.dir.path() / "missing").string()), {0, 1}), InputError);
  EXPECT_THROW(TextSource(Params(), {0, 1}), ConfigError);
}

// The operators chained by hand, with word-count copies partitioned by word hash as the runtime does: the merged
// counts and the collected lines equal the direct scans.
TEST(TextOperators, ChainedOperatorsEqualTheDirectScans) {
  SmallCorpus c(300);
  const auto items = c.descriptors();
  Params tok = c.params;
  tok.set("seed", std::uint64_t{11});
  TextTokenize tokenize(tok);
  std::vector<std::unique_ptr<WordCount>> counters;
  for (int i = 0; i < 3; ++i) counters.push_back(std::make_unique<WordCount>(Params()));
  WordCountMerge merge{Params()};
  Params gp = c.params;
  gp.set("pattern", "k").set("kind", "substring");
  GrepMatch match(gp);
  GrepCollect collect{Params()};
  for (const auto& it : items) {
    Collect words, lines;
    tokenize.process(it, words);
    for (const auto& w : words.items) counters[key_partition(w.key, 3)]->process(w, words);
    match.process(it, lines);
    for (const auto& l : lines.items) collect.process(l, lines);
  }
  for (auto& wc : counters) {
    Collect out;
    wc->finish(out);
    for (const auto& e : out.items) merge.process(e, out);
  }
  const auto corpus = corpus_of(c.params);
  const auto truth = scan_word_counts(corpus, 11);
  const auto got = merge.entries();
  ASSERT_EQ(got.size(), truth.words.size());
  for (const auto& [h, n] : got) EXPECT_EQ(n, truth.words.at(h).count);
  const auto g = scan_grep(corpus, LineMatcher("k", LineMatcher::Kind::Substring));
  ASSERT_GT(g.matches.size(), 10u);
  ASSERT_LT(g.matches.size(), g.totals.lines);  // a pattern that selects
  std::vector<std::uint64_t> want;
  for (const auto& m : g.matches) want.push_back(line_id(m.file, m.offset));
  std::vector<std::uint64_t> have;
  for (const auto& [id, v] : collect.entries()) have.push_back(id);
  EXPECT_EQ(have, want);
}

TEST(TextOperators, BadItemsAreFormatErrors) {
  WordCount wc{Params()};
  Collect out;
  EXPECT_THROW(wc.process({.key = 1, .value = 2}, out), FormatError);  // above max-weight 1
  EXPECT_THROW(wc.process({.key = 1, .value = 0}, out), FormatError);
  WordCountMerge merge{Params()};
  EXPECT_THROW(merge.process({.key = 1, .value = -3}, out), FormatError);
  EXPECT_THROW(WordCount(Params().set("max-weight", std::int64_t{0})), ConfigError);
}

}  // namespace
}  // namespace afs::text
