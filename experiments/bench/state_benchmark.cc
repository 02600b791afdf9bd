// Benchmarks of the state layer (afstream/state): the cost of O(1) divergence tracking on the hot path
// (DESIGN.md section 3: divergence is maintained incrementally on every state update) and of delta backups.
// Each "plain" benchmark is the untracked reference for the tracked one below it; compare per_update within one
// run (DESIGN.md section 9: absolute numbers on shared machines are noise, ratios are the result).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/state/block_tracked_array.h"
#include "afstream/state/tracked_array.h"
#include "afstream/state/tracked_map.h"
#include "afstream/state/tracked_vector.h"

namespace {

constexpr std::size_t kBatch = 1 << 16;  // updates per benchmark iteration

std::vector<std::uint32_t> random_indices(std::size_t n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> idx(kBatch);
  for (auto& i : idx) i = static_cast<std::uint32_t>(rng() % n);
  return idx;
}

void report(benchmark::State& state, std::size_t updates_per_iteration) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * updates_per_iteration));
  // Shown as time per update (e.g. "2.5ns").
  state.counters["per_update"] = benchmark::Counter(static_cast<double>(state.iterations() * updates_per_iteration),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// --- counters: std::vector<int64_t> vs TrackedArray<int64_t> ------------------------------------------------------

void BM_PlainArrayAdd(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::int64_t> v(n, 0);
  const auto idx = random_indices(n);
  for (auto _ : state) {
    for (const std::uint32_t i : idx) v[i] += 1;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(v.data());
  report(state, kBatch);
}

// Random +1 updates to the counter array make(n) returns.
template <typename Make>
void run_array_adds(benchmark::State& state, Make make) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto a = make(n);
  const auto idx = random_indices(n);
  for (auto _ : state) {
    for (const std::uint32_t i : idx) a.add(i, 1);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(a.divergence());
  report(state, kBatch);
}

template <afs::Metric M>
void BM_TrackedArrayAdd(benchmark::State& state) {
  run_array_adds(state, [](std::size_t n) { return afs::TrackedArray<std::int64_t>(n, M); });
}

// As above, but backed up (delta written, mark_backed_up) every 10,000 updates: the amortised cost of a Theta-driven
// run, in which the dirty set stays small.
template <afs::Metric M>
void BM_TrackedArrayAddWithBackups(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  afs::TrackedArray<std::int64_t> a(n, M);
  const auto idx = random_indices(n);
  std::size_t since_backup = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    for (const std::uint32_t i : idx) {
      a.add(i, 1);
      if (++since_backup == 10000) [[unlikely]] {
        afs::ByteWriter w;
        a.write_delta(w);
        bytes += w.size();
        a.mark_backed_up();
        since_backup = 0;
      }
    }
  }
  benchmark::DoNotOptimize(bytes);
  report(state, kBatch);
}

// Max-abs counter arrays as the benchmarks below build them: TrackedArray, or BlockTrackedArray in blocks of Block.
template <std::size_t Block>
auto make_max_abs_array(std::size_t n) {
  if constexpr (Block == 0) {
    return afs::TrackedArray<std::int64_t>(n, afs::Metric::MaxAbs);
  } else {
    return afs::BlockTrackedArray<std::int64_t>(n, Block);
  }
}

// BlockTrackedArray's update (per-block bound) against TrackedArray<MaxAbs>'s above.
template <std::size_t Block>
void BM_BlockTrackedArrayAdd(benchmark::State& state) {
  run_array_adds(state, [](std::size_t n) { return make_max_abs_array<Block>(n); });
}

// As above with max-abs and partial deltas (proofs/general-bounds.md section 3.6): every 10,000 updates only the
// slots past a residual of 1,000 are written (here none, as in a Count-Min job whose Theta is far above its counts).
// Block 0: TrackedArray; else BlockTrackedArray with that block.
template <std::size_t Block>
void BM_ArrayAddWithPartialBackups(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto a = make_max_abs_array<Block>(n);
  const auto idx = random_indices(n);
  std::size_t since_backup = 0;
  std::size_t bytes = 0;
  double left = 0;
  for (auto _ : state) {
    for (const std::uint32_t i : idx) {
      a.add(i, 1);
      if (++since_backup == 10000) [[unlikely]] {
        afs::ByteWriter w;
        left += a.backup_partial_delta(w, 1000);
        bytes += w.size();
        since_backup = 0;
      }
    }
  }
  benchmark::DoNotOptimize(bytes);
  benchmark::DoNotOptimize(left);
  report(state, kBatch);
}

#define STATE_ARRAY_SIZES Arg(32768)->Arg(1000000)
BENCHMARK(BM_PlainArrayAdd)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAdd<afs::Metric::MaxAbs>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAdd<afs::Metric::L1>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAdd<afs::Metric::L2>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAddWithBackups<afs::Metric::MaxAbs>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAddWithBackups<afs::Metric::L1>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_TrackedArrayAddWithBackups<afs::Metric::L2>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_ArrayAddWithPartialBackups<0>)->Name("BM_TrackedArrayAddWithPartialBackups")->STATE_ARRAY_SIZES;
BENCHMARK(BM_BlockTrackedArrayAdd<1>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_BlockTrackedArrayAdd<8>)->STATE_ARRAY_SIZES;
BENCHMARK(BM_ArrayAddWithPartialBackups<8>)->Name("BM_BlockTrackedArrayAddWithPartialBackups/8")->STATE_ARRAY_SIZES;

// --- keyed counters: std::unordered_map vs TrackedMap -------------------------------------------------------------
// The argument is the key range; each iteration adds to 65,536 random keys from it.

void BM_PlainUnorderedMapAdd(benchmark::State& state) {
  const auto keys = random_indices(static_cast<std::size_t>(state.range(0)), 2);
  std::unordered_map<std::uint64_t, std::int64_t> m;
  for (auto _ : state) {
    for (const std::uint32_t k : keys) m[k] += 1;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(m.size());
  report(state, kBatch);
}

template <afs::Metric M>
void BM_TrackedMapAdd(benchmark::State& state) {
  const auto keys = random_indices(static_cast<std::size_t>(state.range(0)), 2);
  afs::TrackedMap<std::int64_t> m(M);
  for (auto _ : state) {
    for (const std::uint32_t k : keys) m.add(k, 1);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(m.divergence());
  report(state, kBatch);
}

BENCHMARK(BM_PlainUnorderedMapAdd)->Arg(10000)->Arg(1000000);
BENCHMARK(BM_TrackedMapAdd<afs::Metric::L1>)->Arg(10000)->Arg(1000000);
BENCHMARK(BM_TrackedMapAdd<afs::Metric::NewKeys>)->Arg(10000);

// --- model weights: Eigen::VectorXd vs TrackedVector --------------------------------------------------------------

void BM_PlainVectorSparseAdd(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(n));
  const auto idx = random_indices(n, 3);
  for (auto _ : state) {
    for (const std::uint32_t i : idx) w[i] += 0.01;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(w.data());
  report(state, kBatch);
}

void BM_TrackedVectorSparseAdd(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  afs::TrackedVector w(n);
  const auto idx = random_indices(n, 3);
  for (auto _ : state) {
    for (const std::uint32_t i : idx) w.add(i, 0.01);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(w.divergence());
  report(state, kBatch);
}

void BM_PlainVectorDenseAdd(benchmark::State& state) {
  const auto n = static_cast<Eigen::Index>(state.range(0));
  Eigen::VectorXd w = Eigen::VectorXd::Zero(n);
  const Eigen::VectorXd g = Eigen::VectorXd::Constant(n, 1e-3);
  for (auto _ : state) {
    w += g;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(w.data());
  report(state, static_cast<std::size_t>(n));
}

void BM_TrackedVectorDenseAdd(benchmark::State& state) {
  const auto n = static_cast<Eigen::Index>(state.range(0));
  afs::TrackedVector w(static_cast<std::size_t>(n));
  const Eigen::VectorXd g = Eigen::VectorXd::Constant(n, 1e-3);
  for (auto _ : state) {
    w.add_dense(g);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(w.divergence());
  report(state, static_cast<std::size_t>(n));
}

BENCHMARK(BM_PlainVectorSparseAdd)->Arg(32768)->Arg(1 << 20);
BENCHMARK(BM_TrackedVectorSparseAdd)->Arg(32768)->Arg(1 << 20);
BENCHMARK(BM_PlainVectorDenseAdd)->Arg(100000);
BENCHMARK(BM_TrackedVectorDenseAdd)->Arg(100000);

// --- delta backup: write_delta + mark_backed_up of 10,000 dirty counters out of 1e6 --------------------------------

void BM_ArrayWriteDeltaAndBackup(benchmark::State& state) {
  const std::size_t n = 1000000, dirty = static_cast<std::size_t>(state.range(0));
  afs::TrackedArray<std::int64_t> a(n, afs::Metric::L1);
  std::mt19937_64 rng(4);
  std::size_t bytes = 0;
  afs::ByteWriter w;  // reused, as a backup writer would: measures the container, not the allocator
  for (auto _ : state) {
    state.PauseTiming();
    while (a.dirty_count() < dirty) a.add(rng() % n, 1);
    w.buffer().clear();
    state.ResumeTiming();
    a.write_delta(w);
    a.mark_backed_up();
    bytes = w.size();
  }
  state.counters["delta_bytes"] = static_cast<double>(bytes);
  report(state, dirty);
}

void BM_MapWriteDeltaAndBackup(benchmark::State& state) {
  const std::size_t dirty = static_cast<std::size_t>(state.range(0));
  afs::TrackedMap<std::int64_t> m(afs::Metric::L1);
  std::mt19937_64 rng(5);
  for (std::size_t k = 0; k < 1000000; ++k) m.add(k, 1);
  m.mark_backed_up();
  std::size_t bytes = 0;
  afs::ByteWriter w;
  for (auto _ : state) {
    state.PauseTiming();
    while (m.dirty_count() < dirty) m.add(rng() % 1000000, 1);
    w.buffer().clear();
    state.ResumeTiming();
    m.write_delta(w);
    m.mark_backed_up();
    bytes = w.size();
  }
  state.counters["delta_bytes"] = static_cast<double>(bytes);
  report(state, dirty);
}

BENCHMARK(BM_ArrayWriteDeltaAndBackup)->Arg(10000);
BENCHMARK(BM_MapWriteDeltaAndBackup)->Arg(10000);

// --- how cheap can max-abs tracking of Count-Min counters be? ---------------------------------------------------
// Four rows of 8,000 int64 counters fed skewed keys (Zipf-like over 1e6 keys), four updates per item as a Count-Min
// sketch makes them, under four bookkeeping schemes, none backed up (the tracking alone):
//   0 plain: no tracking (mode none);
//   1 separate: TrackedArray's scheme, the values, a backed-up value per slot captured at its first change, a dirty
//     bitmap and its list of non-zero words, the max-abs high-water mark;
//   2 interleaved: the same with each backed-up value next to its value (one cache line for both);
//   3 copy: a backed-up copy of every slot kept up to date at each backup, so an update only reads it and sets a dirty
//     bit (the backup then copies the dirty slots).
// Reported per item. Schemes 2 and 3 are not in the library: they bound what a faster container could save.
template <int Scheme>
void BM_CountMinTrackingSchemes(benchmark::State& state) {
  constexpr std::size_t kWidth = 8000, kRows = 4, kSlots = kWidth * kRows, kItems = 1 << 18;
  static const std::vector<std::uint64_t> keys = [] {
    std::mt19937_64 rng(1);
    std::vector<double> cdf(1'000'000);
    double sum = 0;
    for (std::size_t k = 0; k < cdf.size(); ++k) cdf[k] = sum += 1.0 / std::pow(static_cast<double>(k + 1), 0.9);
    std::uniform_real_distribution<double> u(0, sum);
    std::vector<std::uint64_t> v(kItems);
    for (auto& k : v) {
      k = static_cast<std::uint64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()) *
          0x9E3779B97F4A7C15ull;
    }
    return v;
  }();
  struct Slot {
    std::int64_t value, base;
  };
  std::vector<std::int64_t> values(kSlots), base(kSlots);
  std::vector<Slot> slots(kSlots);
  std::vector<std::uint64_t> dirty((kSlots + 63) / 64);
  std::vector<std::uint32_t> dirty_words;
  std::int64_t high = 0;
  auto update = [&](std::size_t i, std::int64_t w) {
    if constexpr (Scheme == 0) {
      values[i] += w;
    } else if constexpr (Scheme == 3) {
      const std::int64_t now = values[i] + w;
      values[i] = now;
      dirty[i >> 6] |= std::uint64_t{1} << (i & 63);
      high = std::max(high, now - base[i]);
    } else {
      std::int64_t& value = Scheme == 1 ? values[i] : slots[i].value;
      std::int64_t& b = Scheme == 1 ? base[i] : slots[i].base;
      const std::int64_t old = value, now = old + w;
      value = now;
      std::uint64_t& word = dirty[i >> 6];
      if (word == 0) dirty_words.push_back(static_cast<std::uint32_t>(i >> 6));
      const std::uint64_t bit = std::uint64_t{1} << (i & 63);
      const std::int64_t was = (word & bit) ? b : old;
      b = was;
      word |= bit;
      high = std::max(high, now - was);
    }
  };
  std::size_t n = 0;
  for (auto _ : state) {
    for (std::size_t k = 0; k < 1024; ++k, ++n) {
      std::uint64_t h = keys[n & (kItems - 1)];
      for (std::size_t r = 0; r < kRows; ++r) {
        h = h * 0xff51afd7ed558ccdull + r;
        update(r * kWidth + (h >> 33) % kWidth, 100);
      }
    }
  }
  benchmark::DoNotOptimize(high);
  benchmark::DoNotOptimize(values.data());
  benchmark::DoNotOptimize(slots.data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 1024);
  state.counters["per_item"] = benchmark::Counter(static_cast<double>(state.iterations()) * 1024,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CountMinTrackingSchemes<0>)->Name("BM_CountMinTrackingSchemes/plain");
BENCHMARK(BM_CountMinTrackingSchemes<1>)->Name("BM_CountMinTrackingSchemes/separate");
BENCHMARK(BM_CountMinTrackingSchemes<2>)->Name("BM_CountMinTrackingSchemes/interleaved");
BENCHMARK(BM_CountMinTrackingSchemes<3>)->Name("BM_CountMinTrackingSchemes/copy");

}  // namespace

BENCHMARK_MAIN();
