// Integration tests of the exactly-once sink on the in-process runtime (algorithms/sinks): a Zipf stream through
// pass-through relays into exactly-once-sink, with the sink and its upstream workers killed several times while it
// writes. In exact mode the database afterwards holds every source item's effect exactly once, and the sink's
// restored state agrees with it; in mode none the same failures lose effects (so the check can fail).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "afstream/runtime/local_cluster.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "algorithms/sinks/effect_db.h"
#include "algorithms/sinks/sink_operators.h"
#include "tests/temp_dir.h"

namespace afs::sinks {
namespace {

using afs::testing::TempDir;

constexpr std::uint64_t kItems = 100000;

Params source_params(std::uint64_t seed) {
  return Params().set("items", kItems).set("keys", 5000).set("skew", 0.9).set("seed", seed).set("weights", "unit");
}

// source (worker 0) -> pass-through x2 (workers 1, 2) -> exactly-once-sink (worker 3)
Topology copy_topology(const std::string& db, std::uint64_t seed) {
  return TopologyBuilder()
      .source("source", "zipf", source_params(seed))
      .stage("relay", "pass-through", Params())
      .parallelism(2)
      .key_by()
      .from("source")
      .stage("sink", "exactly-once-sink", Params().set("path", db).set("flush-every", 1000))
      .key_by()
      .from("relay")
      .build();
}

struct CopyRun {
  RunResult result;
  EffectCheck check;
  std::uint64_t state_digest = 0;
  std::uint64_t sink_items = 0;
};

CopyRun run_copy(FtMode mode, std::vector<FailureEvent> failures, std::uint64_t seed) {
  TempDir t("afs-sink");
  const auto db = (t.path() / "db").string();
  const auto topology = copy_topology(db, seed);
  Registry registry;
  hh::register_heavy_hitters(registry);
  register_sinks(registry);
  RunConfig cfg;
  cfg.mode = mode;
  cfg.exact_state_every = 5000;
  // Small windows and queues keep the source within a few thousand items of the sink, so that every planned kill
  // (placed by source items) finds the sink in the middle of its stream, with effects buffered.
  cfg.batch_items = 256;
  cfg.flow_window = 1024;
  cfg.queue_items = 1024;
  cfg.failures = std::move(failures);
  cfg.job_id = "sink-" + std::to_string(seed) + "-" + std::to_string(static_cast<int>(mode));
  LocalCluster cluster(topology, registry, cfg);
  CopyRun run;
  run.result = cluster.run();
  auto* sink = dynamic_cast<EffectSink*>(cluster.final_operator(3));
  if (sink == nullptr) throw RuntimeError("the sink did not finish");
  run.state_digest = sink->digest();
  run.sink_items = sink->items();
  const hh::ZipfGenerator gen(hh::zipf_params(source_params(seed)));
  run.check = check_effects([&](const auto& fn) { read_effect_parts(db, fn); }, kItems,
                            [&](std::uint64_t p) { return gen.item_at(p); });
  return run;
}

// Kills of the sink alone, of a relay and the sink together, of the source and the other relay, and of everything.
std::vector<FailureEvent> kills() {
  return {{15000, {3}, std::nullopt},
          {30000, {1, 3}, std::nullopt},
          {45000, {0, 2}, std::nullopt},
          {60000, {3}, std::nullopt},
          {75000, {0, 1, 2, 3}, std::nullopt}};
}

TEST(ExactlyOnceSinkThreads, NoFailuresWritesEveryEffectOnceInEveryMode) {
  for (auto mode : {FtMode::None, FtMode::Exact}) {
    const auto run = run_copy(mode, {}, 1);
    EXPECT_TRUE(run.check.exactly_once()) << to_string(mode);
    EXPECT_EQ(run.check.records, kItems) << to_string(mode);
    EXPECT_EQ(run.check.digest, run.state_digest) << to_string(mode);
  }
}

TEST(ExactlyOnceSinkThreads, ExactModeWithKillsWritesEveryEffectExactlyOnce) {
  for (std::uint64_t seed : {1, 2}) {
    const auto run = run_copy(FtMode::Exact, kills(), seed);
    // 10 planned kills of workers; a worker restarting at the moment of a kill is not killed again.
    EXPECT_GE(run.result.failures.size(), 6u) << "seed " << seed;
    const auto& c = run.check;
    EXPECT_EQ(c.missing, 0u) << "seed " << seed;
    EXPECT_EQ(c.duplicates, 0u) << "seed " << seed;
    EXPECT_EQ(c.wrong, 0u) << "seed " << seed;
    EXPECT_EQ(c.seq_gaps, 0u) << "seed " << seed;
    EXPECT_EQ(c.records, kItems) << "seed " << seed;
    EXPECT_TRUE(c.exactly_once()) << "seed " << seed;
    // The engine's exactly-once state and the database agree: the sink processed each item once.
    EXPECT_EQ(run.sink_items, kItems) << "seed " << seed;
    EXPECT_EQ(c.digest, run.state_digest) << "seed " << seed;
  }
}

// Mode none against exact mode, with the sink killed four times (kills of the other workers too can leave mode
// none's end of stream waiting for good: see algorithms/sinks/README.md).
std::vector<FailureEvent> sink_kills() {
  return {
      {15000, {3}, std::nullopt}, {35000, {3}, std::nullopt}, {55000, {3}, std::nullopt}, {75000, {3}, std::nullopt}};
}

TEST(ExactlyOnceSinkThreads, ModeNoneLosesEffectsWhereExactModeDoesNot) {
  const auto exact = run_copy(FtMode::Exact, sink_kills(), 3);
  EXPECT_GE(exact.result.failures.size(), 3u);
  EXPECT_TRUE(exact.check.exactly_once());
  EXPECT_EQ(exact.check.records, kItems);
  // Mode none does not wait for anyone: the source may finish before the later kills, which then find fewer workers,
  // and a kill that finds the sink caught up with nothing in flight loses nothing (seen once in CI, under load). So
  // up to three seeds: one of them must lose effects.
  bool lost = false;
  for (std::uint64_t seed = 3; seed <= 5 && !lost; ++seed) {
    const auto run = run_copy(FtMode::None, sink_kills(), seed);
    EXPECT_GE(run.result.failures.size(), 1u) << "seed " << seed;
    if (run.check.exactly_once()) continue;
    lost = true;
    EXPECT_GT(run.check.missing, 0u);  // the crashed sink's buffer and queue, and what was sent to it while down
    EXPECT_LT(run.sink_items, kItems);
  }
  EXPECT_TRUE(lost) << "mode none wrote every effect exactly once in three runs with four kills of the sink";
}

}  // namespace
}  // namespace afs::sinks
