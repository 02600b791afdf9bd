// Micro-benchmarks of the engine-free heavy-hitter core: Count-Min update and point query (the 4 x 8000 sketch of
// the heavy-hitter workload of [J] and the eps = 1e-4, delta = 0.01 sizing) and per-item cost of the seekable Zipf
// generator (n = 1e6, s = 1.1). Keys come from the Zipf generator, as in the experiments.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "afstream/core/params.h"
#include "algorithms/heavy_hitters/count_min.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/space_saving.h"
#include "algorithms/heavy_hitters/space_saving_hh.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "experiments/bench/turns.h"

namespace {

using afs::hh::CountMin;
using afs::hh::ZipfGenerator;

constexpr std::size_t kKeys = 1 << 16;

const std::vector<std::uint64_t>& zipf_keys() {
  static const std::vector<std::uint64_t> keys = [] {
    const ZipfGenerator gen({.num_keys = 1'000'000, .skew = 1.1, .total_items = kKeys, .seed = 1});
    std::vector<afs::Item> items(kKeys);
    gen.fill(0, items);
    std::vector<std::uint64_t> k;
    for (const auto& it : items) k.push_back(it.key);
    return k;
  }();
  return keys;
}

CountMin make_sketch(const benchmark::State& state) {
  if (state.range(0) == 0) return CountMin::from_error(1e-4, 0.01, 42);
  return CountMin(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)), 42);
}

void set_label(benchmark::State& state, const CountMin& cm) {
  state.SetLabel(std::to_string(cm.depth()) + "x" + std::to_string(cm.width()));
}

// Args: (width, depth); (0, 0) = from_error(1e-4, 0.01) = 5 x 27183.
void BM_CountMinUpdate(benchmark::State& state) {
  CountMin cm = make_sketch(state);
  const auto& keys = zipf_keys();
  std::size_t i = 0;
  for (auto _ : state) {
    cm.update(keys[i++ & (kKeys - 1)]);
  }
  benchmark::DoNotOptimize(cm.counters().data());
  state.SetItemsProcessed(state.iterations());
  set_label(state, cm);
}
BENCHMARK(BM_CountMinUpdate)->Args({8000, 4})->Args({0, 0});

// Space-Saving with k counters on the same Zipf keys (most updates hit a monitored key; the rest replace the minimum).
void BM_SpaceSavingUpdate(benchmark::State& state) {
  afs::hh::SpaceSaving s(static_cast<std::size_t>(state.range(0)));
  const auto& keys = zipf_keys();
  std::size_t i = 0;
  for (auto _ : state) s.update(keys[i++ & (kKeys - 1)]);
  benchmark::DoNotOptimize(s.min_count());
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(s.capacity()) + " counters, ~" + std::to_string(s.capacity() * 56 / 1024) + " KiB");
}
BENCHMARK(BM_SpaceSavingUpdate)->Arg(100)->Arg(1000)->Arg(10000);

// A full summary of k entries filled from 1e6 Zipf keys: what the operator's full snapshots write.
afs::hh::SpaceSaving full_summary(std::size_t k) {
  afs::hh::SpaceSaving s(k);
  const ZipfGenerator gen({.num_keys = 1'000'000, .skew = 0.9, .total_items = 1'000'000, .seed = 3});
  std::vector<afs::Item> items(1'000'000);
  gen.fill(0, items);
  for (const auto& it : items) s.update(it.key);
  return s;
}

// serialize: the entries in key order (a radix sort) plus the checksum, per full snapshot of k entries.
void BM_SpaceSavingSerialize(benchmark::State& state) {
  const auto s = full_summary(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    afs::ByteWriter w;
    s.serialize(w);
    benchmark::DoNotOptimize(w.buffer().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.size()));
}
BENCHMARK(BM_SpaceSavingSerialize)->Arg(8000);

// The reference it replaced: entries() (a copy sorted by count, then key) written a field at a time, no checksum.
void BM_SpaceSavingSortedByCountReference(benchmark::State& state) {
  const auto s = full_summary(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    afs::ByteWriter w;
    for (const auto& e : s.entries()) {
      w.put<std::uint64_t>(e.key);
      w.put<std::int64_t>(e.count);
      w.put<std::int64_t>(e.error);
    }
    benchmark::DoNotOptimize(w.buffer().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(s.size()));
}
BENCHMARK(BM_SpaceSavingSortedByCountReference)->Arg(8000);

// 2^20 items of the heavy-hitter job's stream: Zipf(1e6, 0.9) keys with packet weights (40..1500 bytes).
constexpr std::size_t kPacketItems = 1 << 20;
const std::vector<afs::Item>& packet_items() {
  static const std::vector<afs::Item> items = [] {
    const ZipfGenerator gen({.num_keys = 1'000'000, .skew = 0.9, .total_items = kPacketItems, .seed = 5});
    std::vector<afs::Item> v(kPacketItems);
    gen.fill(0, v);
    for (std::size_t p = 0; p < v.size(); ++p) v[p].value = afs::hh::packet_bytes(5, p);
    return v;
  }();
  return items;
}

// A worker's backup of a space-saving-hh copy without a compacting store: a delta, or a full snapshot once the deltas
// since the last weigh four times one. take() writes it into w (cleared first) and marks the copy backed up.
struct SpaceSavingBackups {
  std::size_t full_bytes = 0, delta_bytes = 0;
  void take(afs::hh::SpaceSavingHeavyHitters& op, afs::ByteWriter& w) {
    w.buffer().clear();
    if (delta_bytes >= 4 * full_bytes) {
      op.snapshot_full(w);
      full_bytes = w.size();
      delta_bytes = 0;
    } else {
      op.snapshot_delta(w);
      delta_bytes += w.size();
    }
    op.mark_backed_up();
  }
};

// The operator space-saving-hh as the heavy-hitter job runs it (capacity 8000, Zipf(1e6, 0.9) keys, packet weights),
// per item, with a delta written every range(0) items (0: never, as in mode none; 700: about what Theta 1e5 gives
// each of the job's two copies) and a full snapshot once the deltas since the last weigh four times one (the
// worker's rule without a compacting store). What approx mode adds to a Space-Saving item: the divergence tracking
// and the backups.
void BM_SpaceSavingHhProcess(benchmark::State& state) {
  const auto every = static_cast<std::size_t>(state.range(0));
  const auto& items = packet_items();
  afs::Params p;
  p.set("capacity", 8000).set("phi", 1e12).set("max-weight", afs::hh::max_weight(afs::hh::Weights::Packet));
  afs::hh::SpaceSavingHeavyHitters op(p);
  struct : afs::Emitter {
    void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
  } out;
  std::size_t i = 0, since = 0;
  std::uint64_t backup_bytes = 0;
  SpaceSavingBackups backups;
  afs::ByteWriter w;
  for (auto _ : state) {
    op.process(items[i++ & (kPacketItems - 1)], out);
    if (every != 0 && ++since == every) {
      since = 0;
      backups.take(op, w);
      backup_bytes += w.size();
      benchmark::DoNotOptimize(w.buffer().data());
    }
  }
  benchmark::DoNotOptimize(op.divergence());
  state.SetItemsProcessed(state.iterations());
  state.counters["backup_bytes_per_item"] =
      static_cast<double>(backup_bytes) / static_cast<double>(std::max<std::int64_t>(1, state.iterations()));
}
BENCHMARK(BM_SpaceSavingHhProcess)->Arg(0)->Arg(700);

// A none and an approx operator taking turns on the same blocks of 4,096 packet items, each block timed on its own
// (experiments/bench/turns.h: the host's noise, a shared 2-core VM, then falls on both alike); after each of
// approx's items, backup(approx) once its divergence passes trigger (a trigger below 0: after every item, divergence()
// not read). Counters: approx_over_none, the ratio of their
// total times; none_ns and approx_ns per item.
template <typename Op, typename Backup>
void approx_over_none(benchmark::State& state, Op& none, Op& approx, double trigger, Backup&& backup) {
  const auto& items = packet_items();
  struct : afs::Emitter {
    void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
  } out;
  constexpr std::size_t kBlock = 4096;
  std::size_t first = 0;
  afs::bench::TurnTimer timer;
  for (auto _ : state) {
    timer.turn(
        [&] {
          for (std::size_t i = first; i < first + kBlock; ++i) none.process(items[i & (kPacketItems - 1)], out);
        },
        [&] {
          for (std::size_t i = first; i < first + kBlock; ++i) {
            approx.process(items[i & (kPacketItems - 1)], out);
            if (trigger < 0 || approx.divergence() > trigger) backup(approx);
          }
        });
    first += kBlock;
  }
  timer.report(state, kBlock);
}

// BM_SpaceSavingHhProcess/0 and /700's operators taking turns (approx_over_none): approx backs up at the job's
// trigger (Theta 1e5 for two copies, 2.5e4 each), a full snapshot once the deltas weigh four times one.
void BM_SpaceSavingHhApproxOverNone(benchmark::State& state) {
  afs::Params p;
  p.set("capacity", 8000).set("phi", 1e12).set("max-weight", afs::hh::max_weight(afs::hh::Weights::Packet));
  afs::hh::SpaceSavingHeavyHitters none(p), approx(p);
  none.stop_tracking();
  afs::ByteWriter w;
  SpaceSavingBackups backups;
  approx_over_none(state, none, approx, 25000, [&](afs::hh::SpaceSavingHeavyHitters& op) { backups.take(op, w); });
}
BENCHMARK(BM_SpaceSavingHhApproxOverNone);

// The operator count-min-hh as the heavy-hitter job runs it (4 x 8000, the same Zipf keys and packet weights), per
// item. range(0) = 0: as in mode none, the operator told to stop tracking. Otherwise tracked, and backed up as an
// approx worker does it at that trigger (Theta 1e5 gives each of the job's two copies 5e4): once divergence() passes
// the trigger, a partial delta leaving min(trigger / 2, trigger - 4 alpha) unwritten (backup_partial_delta; its
// slots stay dirty until a whole delta). range(0) = 1e18: never backed up, the tracking alone. What approx mode adds
// to a Count-Min item on its own thread: the counters' tracking and the deltas.
void BM_CountMinHhProcess(benchmark::State& state) {
  const auto trigger = static_cast<double>(state.range(0));
  const auto& items = packet_items();
  const auto alpha = afs::hh::max_weight(afs::hh::Weights::Packet);
  afs::Params p;
  p.set("width", 8000).set("depth", 4).set("phi", 1e12).set("max-weight", alpha);
  p.set("divergence-block", static_cast<std::uint64_t>(state.range(1)));
  afs::hh::CountMinHeavyHitters op(p);
  if (trigger == 0) op.stop_tracking();
  const double residual = std::min(trigger / 2, trigger - 4 * static_cast<double>(alpha));
  struct : afs::Emitter {
    void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
  } out;
  afs::ByteWriter w;
  std::size_t i = 0;
  std::int64_t backups = 0, bytes = 0;
  for (auto _ : state) {
    op.process(items[i++ & (kPacketItems - 1)], out);
    if (trigger > 0 && op.divergence() > trigger) {
      w.buffer().clear();
      op.backup_partial_delta(w, residual);
      ++backups;
      bytes += static_cast<std::int64_t>(w.size());
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["items_per_backup"] =
      static_cast<double>(state.iterations()) / static_cast<double>(std::max<std::int64_t>(1, backups));
  state.counters["bytes_per_backup"] =
      static_cast<double>(bytes) / static_cast<double>(std::max<std::int64_t>(1, backups));
}
BENCHMARK(BM_CountMinHhProcess)->Args({0, 8})->ArgsProduct({{50000, 1'000'000'000'000'000'000}, {1, 2, 4, 8, 16}});

// The two count-min-hh operators of BM_CountMinHhProcess/0/B and /50000/B taking turns (approx_over_none; argument:
// B, the divergence block): approx writes the job's partial deltas at a trigger of 5e4.
void BM_CountMinHhApproxOverNone(benchmark::State& state) {
  const auto alpha = afs::hh::max_weight(afs::hh::Weights::Packet);
  afs::Params p;
  p.set("width", 8000).set("depth", 4).set("phi", 1e12).set("max-weight", alpha);
  p.set("divergence-block", static_cast<std::uint64_t>(state.range(0)));
  afs::hh::CountMinHeavyHitters none(p), approx(p);
  none.stop_tracking();
  constexpr double kTrigger = 50000;
  const double residual = std::min(kTrigger / 2, kTrigger - 4 * static_cast<double>(alpha));
  afs::ByteWriter w;
  approx_over_none(state, none, approx, kTrigger, [&](afs::hh::CountMinHeavyHitters& op) {
    w.buffer().clear();
    op.backup_partial_delta(w, residual);
  });
}
BENCHMARK(BM_CountMinHhApproxOverNone)->Arg(1)->Arg(8);

// The same two operators (blocks of one) with backups paced by item count instead of Theta, as on worker processes: a
// remote store's worker behind its sources backs up by the cost rule alone (afstream/runtime/README.md), every ~30,000
// items in the heavy-hitter job, long after the divergence passed the trigger. Arguments: items between backups, and
// the residual of each partial delta (the job's: half the trigger of 5e4; 0: whole deltas, after which every counter
// that moves is listed at its first move); third, 1: the counters measured at backups (what the worker asks of its
// operator there: Operator::measure_divergence_at_backups; no bound per counter, a pass over them at each delta), 0:
// tracked; fourth: the width (the heavy-hitter job's 8,000; NEXMark hot items' 65,536).
void BM_CountMinHhPacedDeltasOverNone(benchmark::State& state) {
  afs::Params p;
  p.set("width", static_cast<std::uint64_t>(state.range(3)))
      .set("depth", 4)
      .set("phi", 1e12)
      .set("max-weight", afs::hh::max_weight(afs::hh::Weights::Packet));
  afs::hh::CountMinHeavyHitters none(p), approx(p);
  none.stop_tracking();
  if (state.range(2) == 1) approx.measure_divergence_at_backups();
  const auto every = static_cast<std::uint64_t>(state.range(0));
  const auto residual = static_cast<double>(state.range(1));
  std::uint64_t items = 0;
  afs::ByteWriter w;
  // The trigger -1 calls backup after every item (divergence() not read, as the worker's cost rule does not); it
  // writes a delta every `every` of them.
  approx_over_none(state, none, approx, -1, [&](afs::hh::CountMinHeavyHitters& op) {
    if (++items % every != 0) return;
    w.buffer().clear();
    op.backup_partial_delta(w, residual);
  });
}
BENCHMARK(BM_CountMinHhPacedDeltasOverNone)
    ->ArgsProduct({{4096, 32768}, {0, 25000}, {0, 1}, {8000}})
    ->Args({32768, 25000, 0, 65536})
    ->Args({32768, 25000, 1, 65536})
    ->Args({100000, 25000, 0, 65536})
    ->Args({100000, 25000, 1, 65536});

void BM_CountMinEstimate(benchmark::State& state) {
  CountMin cm = make_sketch(state);
  const auto& keys = zipf_keys();
  for (auto k : keys) cm.update(k);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cm.estimate(keys[i++ & (kKeys - 1)]));
  }
  state.SetItemsProcessed(state.iterations());
  set_label(state, cm);
}
BENCHMARK(BM_CountMinEstimate)->Args({8000, 4})->Args({0, 0});

// Hashing alone: one counter index (one row) per iteration.
void BM_CountMinBucket(benchmark::State& state) {
  const CountMin cm(8000, 4, 42);
  const auto& keys = zipf_keys();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cm.bucket(static_cast<int>(i & 3), keys[i & (kKeys - 1)]));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CountMinBucket);

// Per-item cost of fill() in batches of range(0) items over range(1) keys (s = 1.1).
void BM_ZipfFill(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const ZipfGenerator gen({.num_keys = static_cast<std::uint64_t>(state.range(1)),
                           .skew = 1.1,
                           .total_items = std::uint64_t{1} << 62,
                           .seed = 7});
  std::vector<afs::Item> out(batch);
  std::uint64_t offset = 0;
  for (auto _ : state) {
    gen.fill(offset, out.data(), batch);
    offset += batch;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_ZipfFill)
    ->Args({1024, 1'000'000})
    ->Args({65536, 1'000'000})
    ->Args({65536, 1000})
    ->Args({65536, 10'000'000});

// One-off cost of building the alias table for n = 1e6.
void BM_ZipfConstruct(benchmark::State& state) {
  for (auto _ : state) {
    ZipfGenerator gen({.num_keys = static_cast<std::uint64_t>(state.range(0)), .skew = 1.1, .total_items = 1});
    benchmark::DoNotOptimize(gen.probability(0));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ZipfConstruct)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
