// Updates per second of the online learners (issue 5 "Measurements"): learn() (predict, gradient, step, apply) for
// each learner and optimizer on dense 28-feature examples (HIGGS-like) and on sparse examples with 40 active features
// hashed into 2^18 weights. Examples are pre-generated so only the learner is timed. BM_SgdLearnerProcess times the
// `sgd-learner` operator as the learn job runs it (the example fetched from its dataset by index, the step clipped,
// the weights tracked for backups), with BM_ExampleFetch the fetch alone. BM_RestoreSgdLearner times a learner's
// restore from a chain as the learn job writes it (a full snapshot, then a delta every 4,096 examples, a trace point
// every 5,000): the failure-time cost that the convergence delay of issue 5 pays once per failure.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "experiments/bench/turns.h"
#include "ml/generators.h"
#include "ml/learner.h"
#include "ml/learner_operator.h"

namespace {

using afs::ml::Example;
using afs::ml::OptimizerKind;
using afs::ml::SyntheticDataset;
using afs::ml::SyntheticModel;
using afs::ml::SyntheticParams;
using afs::ml::Task;

constexpr std::uint64_t kExamples = 1 << 14;
constexpr int kClasses = 10;

std::vector<Example> examples(Task task, bool sparse) {
  SyntheticParams p{.num_examples = kExamples, .seed = 1};
  p.model = task == Task::kLinear    ? SyntheticModel::kLinear
            : task == Task::kSoftmax ? SyntheticModel::kMulticlass
                                     : SyntheticModel::kLogistic;
  p.num_classes = kClasses;
  if (sparse) {
    p.num_features = 4'000'000;
    p.sparse = true;
    p.active = 40;
    p.skew = 1;
    p.hash_bits = 18;
  } else {
    p.num_features = 28;
    p.noise = 1;
  }
  SyntheticDataset d(p);
  std::vector<Example> out(kExamples);
  for (std::uint64_t n = 0; n < kExamples; ++n) d.example(n, out[n]);
  return out;
}

// Arguments: task, sparse (0/1), optimizer.
void BM_Learn(benchmark::State& state) {
  const auto task = static_cast<Task>(state.range(0));
  const bool sparse = state.range(1) != 0;
  const auto opt = static_cast<OptimizerKind>(state.range(2));
  const std::vector<Example> data = examples(task, sparse);
  afs::ml::Learner l = afs::ml::make_learner({.task = task,
                                              .num_features = sparse ? std::size_t{1} << 18 : 28,
                                              .num_classes = kClasses,
                                              .l2 = 1e-6,
                                              .optimizer = opt,
                                              .eta0 = 0.1});
  std::size_t i = 0;
  double sink = 0;
  for (auto _ : state) {
    sink += afs::ml::learn(l, data[i]).loss;
    i = (i + 1) & (kExamples - 1);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(afs::ml::to_string(task) + (sparse ? " sparse-2^18x40" : " dense-28") + " " + afs::ml::to_string(opt));
}

void Args(benchmark::internal::Benchmark* b) {
  for (const Task t : {Task::kLogistic, Task::kLinear, Task::kHinge, Task::kSoftmax}) {
    for (const int sparse : {0, 1}) {
      for (const OptimizerKind o : {OptimizerKind::kSgd, OptimizerKind::kAdaGrad}) {
        b->Args({static_cast<int>(t), sparse, static_cast<int>(o)});
      }
    }
  }
}
BENCHMARK(BM_Learn)->Apply(Args);

// Prediction only (the held-out prediction rate path).
void BM_Predict(benchmark::State& state) {
  const bool sparse = state.range(0) != 0;
  const std::vector<Example> data = examples(Task::kLogistic, sparse);
  afs::ml::Learner l =
      afs::ml::make_learner({.task = Task::kLogistic, .num_features = sparse ? std::size_t{1} << 18 : 28});
  for (std::uint64_t n = 0; n < kExamples; ++n) afs::ml::learn(l, data[n]);
  std::size_t i = 0;
  double sink = 0;
  for (auto _ : state) {
    sink += afs::ml::predict(l, data[i]).score;
    i = (i + 1) & (kExamples - 1);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(sparse ? "logistic sparse-2^18x40" : "logistic dense-28");
}
BENCHMARK(BM_Predict)->Arg(0)->Arg(1);

class DiscardingEmitter final : public afs::Emitter {
 public:
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
};

// The learn job's datasets and learner (learn.data higgs | kdd, SGD, eta0 0.5, clip 10), one copy.
afs::Params learn_job_params(bool kdd) {
  afs::Params p;
  p.set("data", kdd ? "kdd" : "higgs").set("examples", std::uint64_t{1} << 20).set("seed", std::uint64_t{1});
  p.set("task", "logistic").set("optimizer", "sgd").set("eta0", 0.5).set("l2", 1e-6).set("clip", 10.0);
  return p;
}

// Arguments: kdd (0: HIGGS-like dense 28, 1: KDD-like 2^18 hashed, 11 active); mode (0: as in mode none, the
// operator told to stop tracking; 1: as in approx, tracked, a delta written and marked backed up every 4,096
// examples, the learn job's ft.replay-items-max). Both with the job's trace (a point every 5,000 examples), so the
// two differ by what approximate fault tolerance costs the learner's own thread.
void BM_SgdLearnerProcess(benchmark::State& state) {
  const bool kdd = state.range(0) != 0;
  const bool approx = state.range(1) != 0;
  afs::Params p = learn_job_params(kdd);
  p.set("trace-every", std::int64_t{5000}).set("trace-clock", "off");
  afs::ml::SgdLearnerOperator op(p, {});
  if (!approx) op.stop_tracking();
  DiscardingEmitter out;
  afs::ByteWriter w;
  std::uint64_t n = 0;
  for (auto _ : state) {
    op.process(afs::Item{n, static_cast<std::int64_t>(n), 0, 0}, out);
    n = (n + 1) & ((std::uint64_t{1} << 20) - 1);
    if (approx && n % 4096 == 0) {
      w.buffer().clear();
      op.backup_delta(w);
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(kdd ? "kdd-like sparse 2^18" : "higgs-like dense 28") + (approx ? ", approx" : ", none"));
}
BENCHMARK(BM_SgdLearnerProcess)->ArgsProduct({{0, 1}, {0, 1}});

// The same two learners as BM_SgdLearnerProcess/K/0 and /K/1 (first argument: kdd 0/1) in one process, taking
// turns on the same blocks of 4,096 examples, each block timed on its own: the host's noise (a shared 2-core VM,
// whose neighbours' load moves separate runs by 30%) then falls on both alike, and the counter approx_over_none is
// the ratio of their total times. Counters none_ns and approx_ns: per example. Second argument: when approx backs
// up. 0: a whole delta after every block, as the learn job's ft.replay-items-max 4096 makes it; else the Theta rule
// alone (the paper's setting, ft.replay-items-max 0): a delta whenever the divergence passes this theta in
// thousandths after an example (2500: the runtime theta of each of the job's two copies at Theta 10, 10 / (2 x 2)).
// Counter backups: per block.
void BM_SgdLearnerApproxOverNone(benchmark::State& state) {
  const bool kdd = state.range(0) != 0;
  const double theta = static_cast<double>(state.range(1)) / 1000;
  afs::Params p = learn_job_params(kdd);
  p.set("trace-every", std::int64_t{5000}).set("trace-clock", "off");
  afs::ml::SgdLearnerOperator none(p, {}), approx(p, {});
  none.stop_tracking();
  DiscardingEmitter out;
  afs::ByteWriter w;
  constexpr std::uint64_t kBlock = 4096;
  std::uint64_t first = 0, backups = 0;
  const auto backup = [&] {
    w.buffer().clear();
    approx.backup_delta(w);  // as the runtime takes a whole delta
    ++backups;
  };
  // One loop for both learners (the same code around each), checking the divergence only for approx's Theta rule.
  const auto feed = [&](afs::ml::SgdLearnerOperator& op, bool theta_rule) {
    for (std::uint64_t n = first; n < first + kBlock; ++n) {
      op.process(afs::Item{n, static_cast<std::int64_t>(n), 0, 0}, out);
      if (theta_rule && op.divergence() > theta) backup();
    }
  };
  afs::bench::TurnTimer timer;
  for (auto _ : state) {
    timer.turn([&] { feed(none, false); },
               [&] {
                 feed(approx, theta > 0);
                 if (theta == 0) backup();
               });
    first = (first + kBlock) & ((std::uint64_t{1} << 20) - 1);
  }
  timer.report(state, kBlock);
  state.counters["backups"] = static_cast<double>(backups) / static_cast<double>(state.iterations());
  state.SetLabel(std::string(kdd ? "kdd-like sparse 2^18" : "higgs-like dense 28") +
                 (theta > 0 ? ", Theta rule alone" : ", a delta every 4096"));
}
BENCHMARK(BM_SgdLearnerApproxOverNone)->ArgsProduct({{0, 1}, {0, 2500}})->Unit(benchmark::kMillisecond);

// Arguments: kdd (0/1), deltas after the full snapshot. The learn job's copy of 1e6 examples: trace-every 5000,
// ft.replay-items-max 4096, a full snapshot once the deltas weigh 4 times one (12-16 records on the KDD-like set).
void BM_RestoreSgdLearner(benchmark::State& state) {
  const bool kdd = state.range(0) != 0;
  const auto deltas = static_cast<int>(state.range(1));
  afs::Params p = learn_job_params(kdd);
  p.set("trace-every", std::int64_t{5000}).set("trace-clock", "off");
  afs::ml::SgdLearnerOperator op(p, {});
  DiscardingEmitter out;
  std::uint64_t n = 0;
  auto feed = [&](std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i, ++n) op.process(afs::Item{n, static_cast<std::int64_t>(n), 0, 0}, out);
  };
  auto record = [&](bool full) {
    afs::ByteWriter w;
    full ? op.snapshot_full(w) : op.snapshot_delta(w);
    op.mark_backed_up();
    return w.take();
  };
  feed(100000);
  std::vector<std::vector<std::uint8_t>> chain{record(true)};
  std::size_t bytes = chain[0].size();
  for (int d = 0; d < deltas; ++d) {
    feed(4096);
    chain.push_back(record(false));
    bytes += chain.back().size();
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto restored = std::make_unique<afs::ml::SgdLearnerOperator>(p, afs::InstanceInfo{});
    state.ResumeTiming();
    for (std::size_t i = 0; i < chain.size(); ++i) {
      afs::ByteReader r(chain[i]);
      i == 0 ? restored->restore_full(r) : restored->apply_delta(r);
    }
    benchmark::DoNotOptimize(restored.get());
    state.PauseTiming();
    restored.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
  state.SetLabel(std::to_string(chain.size()) + " records, " + std::to_string(bytes >> 20) + " MB");
}
BENCHMARK(BM_RestoreSgdLearner)->Args({0, 12})->Args({1, 0})->Args({1, 12})->Unit(benchmark::kMillisecond);

// What a restarted learner pays before its restore: constructing the operator (its dataset and its weights).
void BM_ConstructSgdLearner(benchmark::State& state) {
  afs::Params p = learn_job_params(state.range(0) != 0);
  p.set("trace-every", std::int64_t{5000}).set("trace-clock", "off");
  for (auto _ : state) {
    afs::ml::SgdLearnerOperator op(p, {});
    benchmark::DoNotOptimize(&op);
  }
}
BENCHMARK(BM_ConstructSgdLearner)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ExampleFetch(benchmark::State& state) {
  const bool kdd = state.range(0) != 0;
  const auto data = afs::ml::dataset_from(learn_job_params(kdd));
  Example x;
  std::uint64_t n = 0;
  for (auto _ : state) {
    data->example(n, x);
    benchmark::DoNotOptimize(x);
    n = (n + 1) & ((std::uint64_t{1} << 20) - 1);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(kdd ? "kdd-like sparse 2^18" : "higgs-like dense 28");
}
BENCHMARK(BM_ExampleFetch)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
