// Google Benchmark of the online join (algorithms/join): updates per second of the engine-free RippleJoin and of the
// ripple-join operator on tracked maps (what approximate fault tolerance costs per update), per sample rate, with the
// bytes of state in the label; and the cost of an estimate over all sampled keys.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/join/join_generator.h"
#include "algorithms/join/join_operators.h"
#include "algorithms/join/ripple_join.h"

namespace {

using namespace afs::join;

// 1e6 tuples (R and S halves) over 1e5 keys, Zipf 1.0: the job's default workload, pre-generated.
const std::vector<afs::Item>& workload() {
  static const std::vector<afs::Item> items = [] {
    const JoinGenerator g({.r_items = 500000, .s_items = 500000, .keys = 100000, .skew = 1.0, .seed = 1});
    std::vector<afs::Item> v(g.total_items());
    g.fill(0, v.data(), v.size());
    return v;
  }();
  return items;
}

double rate_of(const benchmark::State& state) { return static_cast<double>(state.range(0)) / 100; }

void BM_RippleJoinUpdate(benchmark::State& state) {
  const auto& items = workload();
  RippleJoin j(rate_of(state), 3);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& it = items[i];
    benchmark::DoNotOptimize(j.update(side_of(it), it.key, it.value, static_cast<std::uint64_t>(it.time)));
    if (++i == items.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(j.num_keys()) + " keys, " + std::to_string(j.state_bytes()) + " bytes of state");
}
BENCHMARK(BM_RippleJoinUpdate)->Arg(1)->Arg(10)->Arg(100);

struct Discard final : afs::Emitter {
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
};

// The operator: the same sampling into four TrackedMaps whose divergence (unbacked samples) is kept per update.
void BM_RippleJoinOperatorProcess(benchmark::State& state) {
  const auto& items = workload();
  RippleJoinOperator op(afs::Params().set("rate", rate_of(state)).set("seed", 3), afs::InstanceInfo{0, 1});
  Discard out;
  std::size_t i = 0;
  for (auto _ : state) {
    op.process(items[i], out);
    if (++i == items.size()) i = 0;
  }
  benchmark::DoNotOptimize(op.divergence());
  afs::ByteWriter w;
  op.snapshot_full(w);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(w.size()) + " bytes of full snapshot");
}
BENCHMARK(BM_RippleJoinOperatorProcess)->Arg(1)->Arg(10)->Arg(100);

void BM_RippleJoinEstimate(benchmark::State& state) {
  const auto& items = workload();
  RippleJoin j(rate_of(state), 3);
  for (const auto& it : items) j.update(side_of(it), it.key, it.value, static_cast<std::uint64_t>(it.time));
  for (auto _ : state) benchmark::DoNotOptimize(j.get_interval(0.95));
  state.SetLabel(std::to_string(j.num_keys()) + " sampled keys");
}
BENCHMARK(BM_RippleJoinEstimate)->Arg(10)->Arg(100);

}  // namespace

BENCHMARK_MAIN();
