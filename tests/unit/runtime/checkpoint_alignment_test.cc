// Checkpoint mode's barrier alignment (afstream/runtime/worker_checkpoint.cc; DESIGN 6, checkpoint), through the
// in-process cluster with a custom topology: one Count-Min worker with two input channels, from two sources of
// different lengths, each starting its own barriers every 4000 of its items. The worker blocks the channel whose
// barrier position arrives first, holding its later items until the other channel reaches its position (or has
// ended); so every checkpoint is a consistent cut: for every channel, what the receiver's record reflects is
// exactly what the sender's record had emitted. Results equal mode none's, with and without failures.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "afstream/ft/records.h"
#include "afstream/store/checkpoint_ledger.h"
#include "afstream/store/memory_store.h"
#include "tests/property/hh_harness.h"

namespace afs::testing {
namespace {

struct TwoInputRun {
  RunResult result;
  std::vector<std::int64_t> counters;
  std::unordered_map<std::uint64_t, std::int64_t> reported;
};

Topology two_input_topology() {
  Params a, b, cm;
  a.set("items", 600000).set("keys", 5000).set("skew", 1.0).set("seed", 3).set("weights", "unit");
  b.set("items", 200000).set("keys", 5000).set("skew", 0.8).set("seed", 4).set("weights", "unit");
  cm.set("width", 2000).set("depth", 4).set("phi", 500).set("seed", 9).set("max-weight", 1);
  TopologyBuilder t;
  t.source("a", "zipf", a);
  t.source("b", "zipf", b);
  return t.stage("hh", "count-min-hh", cm)
      .forward()
      .from("a")
      .forward()
      .from("b")
      .stage("sink", "hh-merge", Params())
      .forward()
      .from("hh")
      .build();
}

TwoInputRun run_two_inputs(RunConfig config, std::shared_ptr<BackupStore> store) {
  Registry registry;
  register_builtin_sources(registry);
  hh::register_heavy_hitters(registry);
  const Topology topology = two_input_topology();
  LocalCluster cluster(topology, registry, std::move(config), std::move(store));
  TwoInputRun out;
  out.result = cluster.run();
  auto& op = dynamic_cast<hh::CountMinHeavyHitters&>(*cluster.final_operator(2));
  const auto counters = op.counters();
  out.counters.assign(counters.begin(), counters.end());
  out.reported = dynamic_cast<hh::HeavyHitterMerge&>(*cluster.final_operator(3)).results();
  return out;
}

RunConfig checkpoint_config() {
  RunConfig c;
  c.mode = FtMode::Checkpoint;
  c.checkpoint_items = 4000;
  c.batch_items = 256;
  return c;
}

TEST(CheckpointAlignment, TwoInputsAreAlignedIntoConsistentCuts) {
  RunConfig none;
  none.mode = FtMode::None;
  const auto reference = run_two_inputs(none, nullptr);
  // A channel is blocked only when its barrier arrives before the other channel's: the scheduler decides that, and on
  // a loaded machine both may come in the same receive for every checkpoint of a run (4% of runs beside a busy job).
  // So up to five runs, each checked in full, until one has held items.
  std::shared_ptr<MemoryStore> store;
  TwoInputRun run;
  for (int attempt = 0; attempt < 5; ++attempt) {
    store = std::make_shared<MemoryStore>();
    run = run_two_inputs(checkpoint_config(), store);
    EXPECT_EQ(run.counters, reference.counters) << "run " << attempt;
    EXPECT_EQ(run.reported, reference.reported) << "run " << attempt;
    EXPECT_GE(run.result.checkpoints, 10u) << "run " << attempt;  // sources a and b each see theirs complete
    EXPECT_EQ(run.result.checkpoints_abandoned, 0u) << "run " << attempt;
    if (run.result.items_held > 0) break;
  }
  EXPECT_GT(run.result.items_held, 0u) << "no channel was ever blocked at a barrier in five runs";

  // Every worker's records by checkpoint (no failure: each chain holds all of them).
  const Topology t = two_input_topology();
  std::vector<std::map<std::uint64_t, StateRecord>> by_id(4);
  for (int w = 0; w < 4; ++w) {
    for (const auto& b : store->state_chain(w)) {
      auto rec = StateRecord::decode(b);
      by_id[w][rec.checkpoint] = std::move(rec);
    }
  }
  // Source b ends early: after its final checkpoint it takes part in no other, and later ones still complete.
  const std::uint64_t b_final = by_id[1].rbegin()->first;
  EXPECT_TRUE(by_id[1].rbegin()->second.finished);
  EXPECT_LT(b_final, by_id[0].rbegin()->first);
  int cuts = 0;
  for (const auto& [id, hh_rec] : by_id[2]) {
    for (const auto& ch : t.channels()) {
      const auto& to = by_id[ch.to_worker];
      const auto& from = by_id[ch.from_worker];
      const auto r = to.find(id);
      // A sender that finished before checkpoint id: its final record is its part of the cut.
      auto s = from.upper_bound(id);
      if (r == to.end() || s == from.begin()) continue;
      --s;
      if (s->first != id && !s->second.finished) continue;
      const auto c = static_cast<std::uint32_t>(ch.id);
      const auto& recv = r->second;
      const std::uint64_t ended = std::count(recv.ended_inputs.begin(), recv.ended_inputs.end(), c) ? 1 : 0;
      EXPECT_EQ(recv.inputs.at(c), s->second.outputs.at(c) + ended)
          << "checkpoint " << (id & 0xffffffff) << ", channel " << c << " (worker " << ch.from_worker << " -> "
          << ch.to_worker << ")";
      ++cuts;
    }
  }
  EXPECT_GE(cuts, 15);  // three channels in each of at least five checkpoints
}

TEST(CheckpointAlignment, FailuresOfTheTwoInputWorkerLeaveTheFailureFreeResults) {
  RunConfig none;
  none.mode = FtMode::None;
  const auto reference = run_two_inputs(none, nullptr);
  for (int seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    auto cfg = checkpoint_config();
    cfg.failures = random_failures(rng, 3, 800000, 4);
    const auto run = run_two_inputs(cfg, nullptr);
    EXPECT_FALSE(run.result.failures.empty()) << "seed " << seed;
    EXPECT_EQ(run.counters, reference.counters) << "seed " << seed;
    EXPECT_EQ(run.reported, reference.reported) << "seed " << seed;
  }
}

}  // namespace
}  // namespace afs::testing
