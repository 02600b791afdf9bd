// Unit tests of the word-count and grep operators (algorithms/text/text_operators.h): the conformance kit on the
// stateful ones (wc-count, wc-merge, grep-collect) and on the stateless readers, the source's descriptors covering
// the corpus, and the operators chained by hand (source -> tokenize -> parallel wc-count -> merge; source ->
// grep-match -> collect) equal to the direct scans.
#include "algorithms/text/text_operators.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"
#include "afstream/testing/conformance.h"
#include "algorithms/text/scan.h"
#include "algorithms/text/synthetic.h"
#include "algorithms/text/text_jobs.h"
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

// A chunk descriptor names a file by its index in the listing and a source position is a chunk's index, so a worker
// that lists the directory again after it changed (a restarted one) would read other files' bytes or replay other
// chunks. With the run's digest in its parameters (TextJob::corpus_params sets it) it refuses instead. Before, a
// file added during a run of word count with one failure made the restarted tokenizers read the new file for the
// first file's chunks ("'000new.txt' is shorter than when it was listed"), and a file grown during it gave 17,048
// wrong counts and exit status 0.
TEST(TextOperators, AWorkerRefusesACorpusThatChangedSinceTheRunListedIt) {
  SmallCorpus c;
  Params p = c.params;
  p.set("corpus-digest", corpus_of(c.params).digest());
  Params tok = p;
  tok.set("seed", std::uint64_t{1});
  Params grep = p;
  grep.set("pattern", "k").set("kind", "substring");
  EXPECT_NO_THROW(TextSource(p, {0, 1}));
  EXPECT_NO_THROW(TextTokenize{tok});
  EXPECT_NO_THROW(GrepMatch{grep});
  const auto dir = fs::path(c.params.get_string("dir", ""));
  auto expect_refused = [&](const std::string& change) {
    for (int op = 0; op < 3; ++op) {
      try {
        if (op == 0) TextSource(p, {0, 1});
        if (op == 1) TextTokenize{tok};
        if (op == 2) GrepMatch{grep};
        ADD_FAILURE() << "operator " << op << " accepted the corpus after " << change;
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("changed since the run listed them"), std::string::npos) << e.what();
      }
    }
  };
  { std::ofstream(dir / "000-first.txt") << "a file sorted first\n"; }
  expect_refused("a file was added");
  fs::remove(dir / "000-first.txt");
  EXPECT_NO_THROW(TextSource(p, {0, 1}));  // the same listing again
  const auto first = corpus_of(c.params).path_of(0);
  { std::ofstream(first, std::ios::app) << "grown\n"; }
  expect_refused("a file grew");
  // Without a digest (operators built by hand, as in the tests above) nothing is checked.
  EXPECT_NO_THROW(TextSource(c.params, {0, 1}));
}

// The jobs score the run, and grep writes grep.txt, against the corpus as the run listed it: a file added while the
// job ran (here: after the run, before evaluate) changes neither. Before, evaluate listed the directory again, and
// a file sorted first shifted every file index: grep.txt gave every match the path and line of the file before it
// (81,593 of 81,648 lines wrong in a probe), and the scores called the stream's exact results missing and extra.
TEST(TextOperators, TheJobsScoreTheCorpusAsTheRunListedIt) {
  namespace po = boost::program_options;
  for (const bool grep : {true, false}) {
    SmallCorpus c;
    const auto dir = c.params.get_string("dir", "");
    TempDir out;
    auto job = grep ? make_grep_job() : make_wordcount_job();
    po::options_description o;
    job->add_options(o);
    o.add_options()("seed", po::value<std::uint64_t>()->default_value(1), "");
    po::variables_map vm;
    std::vector<std::string> args = {"--text.dir", dir, "--text.chunk-bytes", "512"};
    if (grep) args.insert(args.end(), {"--grep.pattern", "k"});
    po::store(po::command_line_parser(args).options(o).run(), vm);
    po::notify(vm);
    RunConfig config;
    config.mode = FtMode::None;
    const Topology t = job->topology(vm, config);
    Registry r;
    register_text(r);
    LocalCluster cluster(t, r, config);
    cluster.run();
    { std::ofstream(fs::path(dir) / "000-first.txt") << "k k k added after the run listed the corpus\n"; }
    const auto scores = job->evaluate(cluster, t, out.path().string());
    std::map<std::string, double> s(scores.begin(), scores.end());
    if (grep) {
      EXPECT_EQ(s.at("missing"), 0);
      EXPECT_EQ(s.at("extra"), 0);
      EXPECT_GT(s.at("matches"), 10);
      std::ifstream f(out.path() / "grep.txt", std::ios::binary);
      std::stringstream text;
      text << f.rdbuf();
      EXPECT_EQ(text.str().find("000-first.txt"), std::string::npos);
      // Every line written is path:line:text of a line that holds the pattern.
      std::string line;
      int lines = 0;
      while (std::getline(text, line)) {
        ++lines;
        const auto a = line.find(':');
        const auto b = line.find(':', a + 1);
        ASSERT_NE(b, std::string::npos) << line;
        EXPECT_NE(line.substr(b + 1).find('k'), std::string::npos) << line;
      }
      EXPECT_EQ(lines, static_cast<int>(s.at("matches")));
    } else {
      EXPECT_EQ(s.at("words_wrong"), 0);
      EXPECT_EQ(s.at("unknown_words"), 0);
    }
  }
}

}  // namespace
}  // namespace afs::text
