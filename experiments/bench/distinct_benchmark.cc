// Google Benchmark of the engine-free HyperLogLog (algorithms/distinct): update and estimate per precision, and the
// bytes of state (2^p registers), in the label.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "algorithms/distinct/hyperloglog.h"

namespace {

using afs::distinct::HyperLogLog;

void BM_HyperLogLogUpdate(benchmark::State& state) {
  HyperLogLog h(static_cast<int>(state.range(0)));
  std::uint64_t k = 0;
  for (auto _ : state) h.update(k++);
  benchmark::DoNotOptimize(h.registers().data());
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(h.size()) + " bytes of registers");
}
BENCHMARK(BM_HyperLogLogUpdate)->Arg(10)->Arg(14)->Arg(18);

void BM_HyperLogLogEstimate(benchmark::State& state) {
  HyperLogLog h(static_cast<int>(state.range(0)));
  for (std::uint64_t k = 0; k < 1000000; ++k) h.update(k);
  for (auto _ : state) benchmark::DoNotOptimize(h.estimate());
  state.SetLabel(std::to_string(h.size()) + " registers");
}
BENCHMARK(BM_HyperLogLogEstimate)->Arg(10)->Arg(14)->Arg(18);

}  // namespace

BENCHMARK_MAIN();
