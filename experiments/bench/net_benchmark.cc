// Wire codec throughput (afstream/net/codec.h): encode and decode of item batches, per item.
// Baseline for ratios: BM_CopyItems, a plain copy of the same items (the floor for any codec).
// Run: build/experiments/bench/net_benchmark [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "afstream/net/codec.h"

namespace {

using afs::Item;

std::vector<Item> make_items(std::size_t n) {
  std::mt19937_64 rng(1);
  std::vector<Item> items(n);
  for (auto& item : items)
    item = Item{rng(), static_cast<std::int64_t>(rng() % 1000), static_cast<std::int64_t>(rng()), 0};
  return items;
}

void set_counters(benchmark::State& state, std::size_t items, std::size_t frame_bytes) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * items));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame_bytes));
  state.counters["ns_per_item"] = benchmark::Counter(static_cast<double>(state.iterations() * items),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_CopyItems(benchmark::State& state) {
  const auto items = make_items(static_cast<std::size_t>(state.range(0)));
  std::vector<Item> out(items.size());
  for (auto _ : state) {
    std::memcpy(out.data(), items.data(), items.size() * sizeof(Item));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, items.size(), items.size() * sizeof(Item));
}

void BM_EncodeBatch(benchmark::State& state) {
  const auto items = make_items(static_cast<std::size_t>(state.range(0)));
  afs::net::Encoder encoder;
  std::uint64_t seq = 0;
  std::size_t frame_bytes = 0;
  for (auto _ : state) {
    auto frame = encoder.encode_batch(1, 1, 0, seq, items, false);
    seq += items.size();
    frame_bytes = frame.size();
    benchmark::DoNotOptimize(frame.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, items.size(), frame_bytes);
}

void BM_DecodeBatchInto(benchmark::State& state) {
  const auto items = make_items(static_cast<std::size_t>(state.range(0)));
  const auto frame = afs::net::encode(afs::net::Message{1, 1, afs::net::BatchMsg{0, 0, items, false}});
  const afs::net::DecodeLimits limits;
  afs::net::BatchMsg batch;
  for (auto _ : state) {
    afs::net::decode_batch_into(frame, limits, batch);
    benchmark::DoNotOptimize(batch.items.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, items.size(), frame.size());
}

// The frame sits at an odd address, so every decode first copies it into an aligned buffer.
void BM_DecodeBatchIntoUnaligned(benchmark::State& state) {
  const auto items = make_items(static_cast<std::size_t>(state.range(0)));
  const auto frame = afs::net::encode(afs::net::Message{1, 1, afs::net::BatchMsg{0, 0, items, false}});
  std::vector<std::uint8_t> storage(frame.size() + 1);
  std::memcpy(storage.data() + 1, frame.data(), frame.size());
  const std::span<const std::uint8_t> view(storage.data() + 1, frame.size());
  const afs::net::DecodeLimits limits;
  afs::net::BatchMsg batch;
  for (auto _ : state) {
    afs::net::decode_batch_into(view, limits, batch);
    benchmark::DoNotOptimize(batch.items.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, items.size(), frame.size());
}

// The general decoder, allocating a fresh Message (and items vector) every time.
void BM_Decode(benchmark::State& state) {
  const auto items = make_items(static_cast<std::size_t>(state.range(0)));
  const auto frame = afs::net::encode(afs::net::Message{1, 1, afs::net::BatchMsg{0, 0, items, false}});
  for (auto _ : state) {
    auto message = afs::net::decode(frame);
    benchmark::DoNotOptimize(&message);
  }
  set_counters(state, items.size(), frame.size());
}

void BM_EncodeAck(benchmark::State& state) {
  afs::net::Encoder encoder;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    auto frame = encoder.encode_ack(1, 1, 0, ++seq);
    benchmark::DoNotOptimize(frame.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

BENCHMARK(BM_CopyItems)->Arg(256)->Arg(4096);
BENCHMARK(BM_EncodeBatch)->Arg(256)->Arg(4096);
BENCHMARK(BM_DecodeBatchInto)->Arg(256)->Arg(4096);
BENCHMARK(BM_DecodeBatchIntoUnaligned)->Arg(256)->Arg(4096);
BENCHMARK(BM_Decode)->Arg(256)->Arg(4096);
BENCHMARK(BM_EncodeAck);

}  // namespace

BENCHMARK_MAIN();
