// Google Benchmark of the steps of a restore (issue 3's recovery target): fetching a state chain from a backup
// server over ipc:// (memory and RocksDB stores), decoding its records, checking the sealed snapshot, and restoring
// a Count-Min of 1e6 counters (4 x 250000, the recovery table's middle size) from it. The chain is a full record and
// `deltas` partial deltas, as a worker writes them.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/operator.h"
#include "afstream/ft/records.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/state/snapshot.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/remote_store.h"
#include "afstream/store/rocksdb_store.h"
#include "algorithms/heavy_hitters/hh_operators.h"

namespace {

using namespace afs;

struct NullEmitter final : Emitter {
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
};

Params sketch_params() {
  return Params().set("width", 250000).set("depth", 4).set("seed", 7).set("phi", 1e12).set("max-weight", 1500);
}

// A full record and `deltas` delta records of a Count-Min fed with random packets, as a worker seals them.
std::vector<Bytes> make_chain(int deltas) {
  hh::CountMinHeavyHitters op(sketch_params());
  NullEmitter out;
  std::mt19937_64 rng(1);
  auto feed = [&](int n) {
    for (int i = 0; i < n; ++i) op.process(Item{rng(), static_cast<std::int64_t>(40 + rng() % 1460), 0, 0}, out);
  };
  auto record = [&](bool full) {
    StateRecord rec;
    rec.full = full;
    ByteWriter w;
    w.buffer().resize(kSnapshotHeaderSize);
    full ? op.snapshot_full(w) : op.snapshot_delta(w);
    op.mark_backed_up();
    rec.snapshot = w.take();
    seal_snapshot_in_place(rec.snapshot, type_id_of("count-min-hh"), full ? SnapshotKind::Full : SnapshotKind::Delta);
    rec.inputs = {{0, 1000}};
    return rec.encode();
  };
  feed(200000);
  std::vector<Bytes> chain{record(true)};
  for (int d = 0; d < deltas; ++d) {
    feed(2000);
    chain.push_back(record(false));
  }
  return chain;
}

void restore(const std::vector<Bytes>& chain, hh::CountMinHeavyHitters& op) {
  for (const auto& b : chain) {
    const StateRecord rec = StateRecord::decode(b);
    const auto opened = open_snapshot(rec.snapshot, type_id_of("count-min-hh"));
    ByteReader r(opened.payload);
    rec.full ? op.restore_full(r) : op.apply_delta(r);
  }
}

// A backup server on a thread, serving `store`, holding `chain` for worker 1.
struct Served {
  std::atomic<bool> stop{false};
  std::unique_ptr<BackupServer> server;
  std::thread thread;
  Served(std::unique_ptr<BackupStore> store, const std::vector<Bytes>& chain, const std::string& endpoint) {
    for (std::size_t i = 0; i < chain.size(); ++i) store->put_state(1, i == 0, chain[i], {});
    server = std::make_unique<BackupServer>(endpoint, std::move(store));
    thread = std::thread([this] { server->run(stop); });
  }
  ~Served() {
    stop = true;
    thread.join();
  }
};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("afs-recovery-bench-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void BM_FetchChain(benchmark::State& state, bool rocksdb) {
  const auto chain = make_chain(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (const auto& b : chain) bytes += b.size();
  const std::string dir = scratch(rocksdb ? "db" : "mem");
  std::filesystem::remove_all(dir);
  std::unique_ptr<BackupStore> store;
  if (rocksdb) {
    store = std::make_unique<RocksDbStore>(dir);
  } else {
    store = std::make_unique<MemoryStore>();
  }
  {
    Served served(std::move(store), chain, "ipc://" + dir + ".sock");
    RemoteStore client(served.server->bound_endpoint());
    for (auto _ : state) benchmark::DoNotOptimize(client.state_chain(1).size());
  }
  std::filesystem::remove_all(dir);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
  state.SetLabel(std::to_string(chain.size()) + " records, " + std::to_string(bytes >> 20) + " MB");
}
BENCHMARK_CAPTURE(BM_FetchChain, memory, false)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FetchChain, rocksdb, true)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeRecords(benchmark::State& state) {
  const auto chain = make_chain(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    for (const auto& b : chain) benchmark::DoNotOptimize(StateRecord::decode(b).snapshot.size());
  }
}
BENCHMARK(BM_DecodeRecords)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond);

void BM_OpenSnapshot(benchmark::State& state) {
  const auto chain = make_chain(0);
  const StateRecord rec = StateRecord::decode(chain[0]);
  for (auto _ : state) benchmark::DoNotOptimize(open_snapshot(rec.snapshot, type_id_of("count-min-hh")).payload.size());
}
BENCHMARK(BM_OpenSnapshot)->Unit(benchmark::kMillisecond);

void BM_RestoreCountMin(benchmark::State& state) {
  const auto chain = make_chain(static_cast<int>(state.range(0)));
  hh::CountMinHeavyHitters op(sketch_params());
  for (auto _ : state) restore(chain, op);
}
BENCHMARK(BM_RestoreCountMin)->Arg(0)->Arg(16)->Unit(benchmark::kMillisecond);

void BM_ConstructCountMin(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::make_unique<hh::CountMinHeavyHitters>(sketch_params()));
}
BENCHMARK(BM_ConstructCountMin)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
