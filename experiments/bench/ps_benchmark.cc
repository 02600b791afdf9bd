// Hot paths of parameter-server training (`afstream run --job ps`, ml/ps_operators.h; issue 5 "Measurements"),
// the real operators driven directly, without the engine:
//   BM_PsWorkerClock   one ps-worker mini-batch: learn.batch examples fetched from the dataset (generated per index,
//                      as in the job), predicted and differentiated, gradients accumulated, and the push of the
//                      clock's mean gradient (its nonzero coordinates) and the tick. Items = examples.
//   BM_PsServerClock   one ps-server shard clock under BSP: the gradients W workers pushed for one clock to this
//                      shard (recorded from real ps-workers), their W ticks, the W optimizer steps applied in
//                      (clock, worker) order and the feedback (changed weights, the whole shard every 64 clocks).
//                      Items = gradient coordinates applied.
//   BM_PsExampleFetch  fetching (generating) one example alone: the share of BM_PsWorkerClock that is the data's.
// Dense: the HIGGS-like data (28 features); sparse: the KDD-like data (11 hashed fields, 2^18 weights).
#include <benchmark/benchmark.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "ml/learner_operator.h"
#include "ml/ps_operators.h"

namespace {

using afs::Item;
using afs::Params;
using afs::ml::PsServerOperator;
using afs::ml::PsWorkerOperator;

constexpr std::uint64_t kExamples = 1 << 16;

// Discards what the operators emit, counting it (the engine's channels are not measured here).
class CountingEmitter final : public afs::Emitter {
 public:
  void emit(std::uint64_t, std::int64_t, std::int64_t) override { ++emitted; }
  void feed_back(std::uint64_t, std::int64_t, std::int64_t) override { ++fed_back; }
  std::uint64_t emitted = 0, fed_back = 0;
};

// Records the gradient items (not the ticks) a worker pushes.
class GradientRecorder final : public afs::Emitter {
 public:
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    if (!(key & afs::ml::kTickBit)) items.push_back({key, value, time, 0});
  }
  std::vector<Item> items;
};

Params params(bool sparse, std::int64_t batch, std::int64_t workers, std::int64_t servers, const char* consistency) {
  Params p;
  p.set("data", sparse ? "kdd" : "higgs").set("examples", kExamples).set("seed", std::uint64_t{1});
  p.set("task", "logistic").set("optimizer", "sgd").set("eta0", 0.5).set("l2", 1e-6).set("clip", 10.0);
  p.set("batch", batch).set("workers", workers).set("servers", servers).set("consistency", consistency);
  p.set("staleness", std::int64_t{5});
  return p;
}

// Parameters as a shard would feed them back: small random weights, so the predictions are not all 0.
void feed_parameters(PsWorkerOperator& w, std::size_t n) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> d(0, 0.1);
  std::vector<Item> items;
  items.reserve(n);
  for (std::size_t i = 0; i < n; ++i) items.push_back({i, std::bit_cast<std::int64_t>(d(rng)), 0, 0});
  CountingEmitter out;
  w.on_feedback(items, out);
}

// Arguments: sparse (0/1), batch.
void BM_PsWorkerClock(benchmark::State& state) {
  const bool sparse = state.range(0) != 0;
  const auto batch = state.range(1);
  const Params p = params(sparse, batch, 2, 2, "asp");  // ASP: the worker never waits for feedback
  auto worker = std::make_unique<PsWorkerOperator>(p, afs::InstanceInfo{0, 2});
  const auto weights = static_cast<std::size_t>(worker->parameters().size());
  feed_parameters(*worker, weights);
  CountingEmitter out;
  std::uint64_t n = 0;
  for (auto _ : state) {
    if (worker->clock() + 1 >= afs::ml::kMaxPsClock) {  // never in practice: 4 M clocks
      state.PauseTiming();
      worker = std::make_unique<PsWorkerOperator>(p, afs::InstanceInfo{0, 2});
      feed_parameters(*worker, weights);
      state.ResumeTiming();
    }
    for (std::int64_t k = 0; k < batch; ++k) {
      worker->process(Item{n, static_cast<std::int64_t>(n), 0, 0}, out);
      n = (n + 1) & (kExamples - 1);
    }
  }
  benchmark::DoNotOptimize(out.emitted);
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["clocks/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["pushed/clock"] =
      static_cast<double>(out.emitted) / static_cast<double>(std::max<std::int64_t>(1, state.iterations()));
  state.SetLabel(std::string(sparse ? "sparse-2^18 (kdd)" : "dense-28 (higgs)") + " batch " + std::to_string(batch));
}
BENCHMARK(BM_PsWorkerClock)->Args({0, 16})->Args({1, 16})->Args({0, 64})->Args({1, 64});

// Arguments: sparse (0/1), workers W, backups (0/1). Servers 2, batch 16, BSP; shard 0 is measured. With backups
// the shard's state is marked backed up every 64 clocks, timing paused (what approximate mode's state backups do to
// it, without writing them); without (mode none: no backups ever) the pending-gradient TrackedMap keeps a tombstone
// for every coordinate it applied, and the table grows without bound (ml/README.md, "Parameter server").
void BM_PsServerClock(benchmark::State& state) {
  const bool sparse = state.range(0) != 0;
  const int workers = static_cast<int>(state.range(1));
  const bool backups = state.range(2) != 0;
  constexpr int kServers = 2;
  constexpr std::int64_t kBatch = 16;
  constexpr std::int64_t kRecorded = 64;  // clocks recorded per worker, replayed in turn
  const Params p = params(sparse, kBatch, workers, kServers, "bsp");
  // What each worker pushes to shard 0 in each of kRecorded clocks, from real ps-workers on their own examples.
  std::vector<std::vector<std::vector<Item>>> pushes(workers, std::vector<std::vector<Item>>(kRecorded));
  std::uint64_t coordinates = 0;
  for (int w = 0; w < workers; ++w) {
    PsWorkerOperator worker(params(sparse, kBatch, workers, kServers, "asp"), afs::InstanceInfo{w, workers});
    feed_parameters(worker, static_cast<std::size_t>(worker.parameters().size()));
    GradientRecorder rec;
    const std::uint64_t begin = static_cast<std::uint64_t>(w) * (kExamples / static_cast<std::uint64_t>(workers));
    for (std::uint64_t n = begin; n < begin + kRecorded * kBatch; ++n) {
      worker.process(Item{n, static_cast<std::int64_t>(n), 0, 0}, rec);
    }
    for (const auto& it : rec.items) {
      if (afs::ml::shard_of(it.key, kServers) != 0) continue;
      pushes[w][static_cast<std::size_t>((it.time >> 10) - 1)].push_back(it);
      ++coordinates;
    }
  }
  auto server = std::make_unique<PsServerOperator>(p, afs::InstanceInfo{0, kServers});
  CountingEmitter out;
  std::int64_t clock = 0;
  std::uint64_t applied = 0;
  for (auto _ : state) {
    if (clock + 1 >= afs::ml::kMaxPsClock) {  // never in practice: 4 M clocks
      state.PauseTiming();
      server = std::make_unique<PsServerOperator>(p, afs::InstanceInfo{0, kServers});
      clock = 0;
      state.ResumeTiming();
    }
    if (backups && clock % kRecorded == 0) {
      state.PauseTiming();
      server->mark_backed_up();
      state.ResumeTiming();
    }
    ++clock;
    const auto r = static_cast<std::size_t>((clock - 1) % kRecorded);
    for (int w = 0; w < workers; ++w) {
      const std::int64_t time = clock << 10 | w;
      for (const auto& it : pushes[w][r]) server->process(Item{it.key, it.value, time, 0}, out);
      applied += pushes[w][r].size();
      server->process(Item{afs::ml::kTickBit | static_cast<std::uint64_t>(w), clock, 0, 0}, out);
    }
  }
  benchmark::DoNotOptimize(out.fed_back);
  state.SetItemsProcessed(static_cast<std::int64_t>(applied));
  state.counters["clocks/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["coords/clock"] = static_cast<double>(coordinates) / kRecorded;  // over the W workers
  state.SetLabel(std::string(sparse ? "sparse-2^18 (kdd)" : "dense-28 (higgs)") + " W " + std::to_string(workers) +
                 (backups ? "" : " no backups"));
}
BENCHMARK(BM_PsServerClock)->ArgsProduct({{0, 1}, {2, 4, 8}, {1}})->Args({0, 4, 0})->Args({1, 4, 0});

// Arguments: sparse (0/1).
void BM_PsExampleFetch(benchmark::State& state) {
  const bool sparse = state.range(0) != 0;
  const auto data = afs::ml::dataset_from(params(sparse, 16, 2, 2, "bsp"));
  afs::ml::Example x;
  std::uint64_t n = 0;
  for (auto _ : state) {
    data->example(n, x);
    benchmark::DoNotOptimize(x);
    n = (n + 1) & (kExamples - 1);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(sparse ? "sparse-2^18 (kdd)" : "dense-28 (higgs)");
}
BENCHMARK(BM_PsExampleFetch)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
