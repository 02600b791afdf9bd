// Google Benchmark of the engine-free text core (algorithms/text): tokenizing (words found, and words hashed with
// XXH3) and grep (substring over the whole text, regex per line) on 1 MB of synthetic text, in bytes/s (and words or
// lines per second as items); and cutting a 64 MB corpus into chunks, as a text source does at every start and restart.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "algorithms/text/corpus.h"
#include "algorithms/text/matcher.h"
#include "algorithms/text/synthetic.h"
#include "algorithms/text/tokenizer.h"

namespace {

using namespace afs::text;

const std::string& text() {
  static const std::string t =
      synthetic_file({.bytes = 1'000'000, .files = 1, .vocabulary = 50'000, .skew = 1.0, .seed = 1}, 0);
  return t;
}

void BM_CountWords(benchmark::State& state) {
  const auto& t = text();
  std::size_t words = 0;
  for (auto _ : state) {
    words = count_words(t);
    benchmark::DoNotOptimize(words);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * t.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * words));
}
BENCHMARK(BM_CountWords);

void BM_TokenizeAndHash(benchmark::State& state) {
  const auto& t = text();
  std::string buf;
  std::size_t words = 0;
  for (auto _ : state) {
    std::uint64_t x = 0;
    words = 0;
    for_each_word_hash(t, 1, buf, [&](std::uint64_t h) {
      x ^= h;
      ++words;
    });
    benchmark::DoNotOptimize(x);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * t.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * words));
}
BENCHMARK(BM_TokenizeAndHash);

// Arg 0: a frequent pattern (about one line in ten matches), 1: a rare one.
void BM_GrepSubstring(benchmark::State& state) {
  const auto& t = text();
  const LineMatcher m(state.range(0) == 0 ? "ab" : "qqqz", LineMatcher::Kind::Substring);
  const auto lines = text_totals(t).lines;
  std::size_t n = 0;
  for (auto _ : state) {
    n = m.count_matches(t);
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * t.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * lines));
  state.SetLabel(std::to_string(n) + " matching lines");
}
BENCHMARK(BM_GrepSubstring)->Arg(0)->Arg(1);

void BM_GrepRegex(benchmark::State& state) {
  const auto& t = text();
  const LineMatcher m("ab[a-z]*c", LineMatcher::Kind::Regex);
  const auto lines = text_totals(t).lines;
  std::size_t n = 0;
  for (auto _ : state) {
    n = m.count_matches(t);
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * t.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * lines));
  state.SetLabel(std::to_string(n) + " matching lines");
}
BENCHMARK(BM_GrepRegex);

}  // namespace

// Corpus::chunks over a 64 MB synthetic corpus of 8 files (written once under TMPDIR, reused), 16 KB chunks: what
// every text source does when it starts or restarts (items: chunks).
void BM_CorpusChunks(benchmark::State& state) {
  const SyntheticCorpusParams p{.bytes = 64'000'000, .files = 8, .vocabulary = 50'000, .skew = 1.0, .seed = 1};
  const auto dir = (std::filesystem::temp_directory_path() / synthetic_corpus_name(p)).string();
  ensure_synthetic_corpus(dir, p);
  const auto corpus = Corpus::list(dir);
  std::size_t chunks = 0;
  for (auto _ : state) {
    chunks = corpus.chunks({.chunk_bytes = 16384}).size();
    benchmark::DoNotOptimize(chunks);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * corpus.total_bytes()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * chunks));
}
BENCHMARK(BM_CorpusChunks)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
