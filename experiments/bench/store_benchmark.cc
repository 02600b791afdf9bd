// Benchmarks of the backup store backends (afstream/store): put_state of 32 KB deltas (a full backup every 64
// puts, which drops the chain before it), MemoryStore vs RocksDbStore without and with fsync. Reports bytes/s and
// puts/s (items_per_second), both per wall-clock second (an fsync waits without using CPU); compare the backends within
// one run (DESIGN.md section 9: absolute numbers on shared machines are noise, ratios are the result).
// BM_PutState_RocksDbCpu/SIZE/FILES: the CPU time of the whole process (RocksDB's flush threads included) per put of
// SIZE bytes, with every record inside RocksDB (FILES 0) or in value files (FILES 1; rocksdb_store.h).
// BM_Crc32c_*/SIZE: RocksDB's checksum (afstream/store/crc32c.h) on the crc32 instruction, from crc32c.cc's byte-wise
// table, and by librocksdb's own function.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <system_error>

#include "afstream/store/crc32c.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/rocksdb_store.h"

namespace {

constexpr int kFullEvery = 64;

// Random bytes, so that RocksDB's block compression does not flatter it.
afs::Bytes random_record(std::size_t n) {
  std::mt19937_64 rng(42);
  afs::Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

// A unique directory under /tmp, removed at the end of the benchmark run.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/afs_store_bench.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void put_states(benchmark::State& state, afs::BackupStore& store) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const afs::Bytes record = random_record(size);
  const afs::SeqByChannel covered = {{0, 0}};
  std::int64_t i = 0;
  for (auto _ : state) {
    store.put_state(0, i % kFullEvery == 0, record, covered);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());  // puts/s
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(size));
}

void BM_PutState_Memory(benchmark::State& state) {
  afs::MemoryStore store;
  put_states(state, store);
}

template <bool Sync>
void BM_PutState_RocksDb(benchmark::State& state) {
  TempDir dir;
  if (dir.path().empty()) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  afs::RocksDbStore store(dir.path() + "/db", afs::RocksDbStoreOptions{Sync});
  put_states(state, store);
}

void BM_PutState_RocksDbCpu(benchmark::State& state) {
  TempDir dir;
  if (dir.path().empty()) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  afs::RocksDbStore store(dir.path() + "/db", afs::RocksDbStoreOptions{false, state.range(1) != 0 ? 1u : 0u});
  put_states(state, store);
}

template <bool Hardware>
void BM_Crc32c(benchmark::State& state) {
  const afs::Bytes data = random_record(static_cast<std::size_t>(state.range(0)));
  std::uint32_t crc = 0;
  for (auto _ : state) {
    crc = Hardware ? afs::crc32c_extend(crc, data.data(), data.size())
                   : afs::crc32c_extend_portable(crc, data.data(), data.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_PutState_Memory)->Arg(32 << 10)->UseRealTime();
BENCHMARK(BM_PutState_RocksDbCpu)
    ->ArgsProduct({{4 << 10, 16 << 10, 32 << 10, 310 << 10}, {0, 1}})
    ->MeasureProcessCPUTime();
BENCHMARK(BM_Crc32c<true>)->Name("BM_Crc32c_Hardware")->Arg(310 << 10);
BENCHMARK(BM_Crc32c<false>)->Name("BM_Crc32c_Tables")->Arg(310 << 10);

// librocksdb's own rocksdb::crc32c::Extend (found in the library with dlsym: the program's definition replaces it for
// every call by name), what Debian's portable build computes.
void BM_Crc32c_Librocksdb(benchmark::State& state) {
  using Extend = std::uint32_t (*)(std::uint32_t, const char*, std::size_t);
  void* lib = dlopen("librocksdb.so.7.8", RTLD_NOW | RTLD_NOLOAD);
  auto* extend = lib ? reinterpret_cast<Extend>(dlsym(lib, "_ZN7rocksdb6crc32c6ExtendEjPKcm")) : nullptr;
  if (extend == nullptr) {
    state.SkipWithError("librocksdb.so.7.8 or its rocksdb::crc32c::Extend not found");
    return;
  }
  const afs::Bytes data = random_record(static_cast<std::size_t>(state.range(0)));
  std::uint32_t crc = 0;
  for (auto _ : state) {
    crc = extend(crc, reinterpret_cast<const char*>(data.data()), data.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  dlclose(lib);
}
BENCHMARK(BM_Crc32c_Librocksdb)->Arg(310 << 10);
BENCHMARK(BM_PutState_RocksDb<false>)->Name("BM_PutState_RocksDb")->Arg(32 << 10)->UseRealTime();
BENCHMARK(BM_PutState_RocksDb<true>)->Name("BM_PutState_RocksDbSync")->Arg(32 << 10)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
