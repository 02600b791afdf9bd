// What one state backup of the heavy-hitter job's Count-Min worker costs in approximate mode, piece by piece, as the
// worker takes it (Worker::backup_state_now): the operator's partial delta, the snapshot's seal, the state record's
// encoding and the in-process store's put. The job (3e7 Zipf(1e6, 0.9) items with packet weights, Theta 1e5 bytes,
// two copies) backs each copy up about every 690 items with a delta of about 2.5 KB (experiments/results/README.md,
// "The work each mode adds", put most of approx's cost there; a perf record of 2026-12-03 put most of it in the
// counters' tracking instead: experiments/results/approx-cost-anatomy).
//
// Each iteration processes 690 items (untimed) and then takes the backup up to the stage range(0) names: 0 none (the
// timer's own pause and resume), 1 the operator's delta, 2 and its seal, 3 and the record, 4 and the store's put. A
// stage's cost is its time per iteration less the previous stage's; compare them within one run:
//   ./build/experiments/bench/backup_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/params.h"
#include "afstream/ft/records.h"
#include "afstream/state/snapshot.h"
#include "afstream/store/memory_store.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/zipf.h"

namespace {

constexpr std::size_t kItems = 1 << 20;
constexpr std::size_t kItemsPerBackup = 690;
constexpr double kResidual = 2.5e4;  // the worker's: ft.delta-residual 0.5 of theta 5e4
constexpr int kFullEvery = 1024;     // ft.full-backup-every

const std::vector<afs::Item>& packet_items() {
  static const std::vector<afs::Item> items = [] {
    const afs::hh::ZipfGenerator gen({.num_keys = 1'000'000, .skew = 0.9, .total_items = kItems, .seed = 3});
    std::vector<afs::Item> v(kItems);
    gen.fill(0, v);
    for (std::size_t p = 0; p < v.size(); ++p) v[p].value = afs::hh::packet_bytes(3, p);
    return v;
  }();
  return items;
}

void BM_CountMinBackup(benchmark::State& state) {
  const int stage = static_cast<int>(state.range(0));
  const auto& items = packet_items();
  afs::Params p;
  p.set("width", 8000).set("depth", 4).set("phi", 1e12);
  p.set("max-weight", afs::hh::max_weight(afs::hh::Weights::Packet));
  afs::hh::CountMinHeavyHitters op(p);
  struct : afs::Emitter {
    void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
  } out;
  const std::uint32_t type = afs::type_id_of("count-min-hh");
  afs::MemoryStore store;
  std::size_t i = 0;
  std::uint64_t backups = 0, bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();  // the items' processing is the same at every stage: left out of the time
    for (std::size_t k = 0; k < kItemsPerBackup; ++k) {
      afs::Item it = items[i++ & (kItems - 1)];
      it.seq = i;
      op.process(it, out);
    }
    state.ResumeTiming();
    if (stage == 0) continue;
    const bool full = backups % kFullEvery == 0;
    afs::ByteWriter w;
    w.buffer().reserve(4096);
    w.buffer().resize(afs::kSnapshotHeaderSize);
    if (full) {
      op.snapshot_full(w);
      op.mark_backed_up();
    } else {
      (void)op.backup_partial_delta(w, kResidual);
    }
    ++backups;
    bytes += w.size();
    if (stage == 1) {
      benchmark::DoNotOptimize(w.buffer().data());
      continue;
    }
    afs::StateRecord rec;
    rec.full = full;
    rec.snapshot = w.take();
    afs::seal_snapshot_in_place(rec.snapshot, type, full ? afs::SnapshotKind::Full : afs::SnapshotKind::Delta);
    if (stage == 2) {
      benchmark::DoNotOptimize(rec.snapshot.data());
      continue;
    }
    rec.inputs[0] = i;
    rec.outputs[1] = 0;
    afs::Bytes record = rec.encode();
    if (stage == 3) {
      benchmark::DoNotOptimize(record.data());
      continue;
    }
    benchmark::DoNotOptimize(store.put_state(0, full, std::move(record), rec.inputs));
  }
  state.counters["delta_bytes"] = backups > 0 ? static_cast<double>(bytes) / static_cast<double>(backups) : 0;
}
BENCHMARK(BM_CountMinBackup)->DenseRange(0, 4)->ArgName("stage");

}  // namespace

BENCHMARK_MAIN();
