// Google Benchmark of the engine-free NEXMark generator (algorithms/nexmark): events per second by random access
// (what a replayable source does at any position), the bid fast path the hot-items query uses, and the exact
// ground truth over a prefix.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "algorithms/nexmark/nexmark.h"

namespace {

using afs::nexmark::Generator;

void BM_NexmarkEventAt(benchmark::State& state) {
  const Generator gen({.events = 100'000'000, .seed = 7});
  std::uint64_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(gen.event_at(n));
    n = (n + 1) % gen.events();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NexmarkEventAt);

void BM_NexmarkBidAuctionAt(benchmark::State& state) {
  const Generator gen({.events = 100'000'000, .seed = 7});
  std::uint64_t b = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(gen.bid_auction_at(gen.bid_index(b)));
    ++b;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NexmarkBidAuctionAt);

void BM_NexmarkExactBidCounts(benchmark::State& state) {
  const Generator gen({.events = 1'000'000, .seed = 7});
  for (auto _ : state) benchmark::DoNotOptimize(gen.exact_bid_counts(gen.events()).size());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(gen.events()));
}
BENCHMARK(BM_NexmarkExactBidCounts)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
