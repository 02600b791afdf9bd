// What one effect costs in the exactly-once sink's RocksDB table (algorithms/sinks/effect_db.h): writes of batches of
// effects (one WriteBatch each, as the sink writes per state backup or per flush-every items), per effect.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "algorithms/sinks/effect_db.h"

namespace {

void BM_EffectDbWrite(benchmark::State& state) {
  std::string dir = (std::filesystem::temp_directory_path() / "afs-effect-bench.XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  {
    afs::sinks::EffectDb db(dir + "/db");
    std::vector<afs::sinks::Effect> batch(static_cast<std::size_t>(state.range(0)));
    std::uint64_t seq = 0;
    for (auto _ : state) {
      for (auto& e : batch) {
        ++seq;
        e.channel = 1;
        e.item = {seq * 0x9e3779b97f4a7c15ULL, 1, static_cast<std::int64_t>(seq), seq};
      }
      db.write(batch);
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_EffectDbWrite)->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
