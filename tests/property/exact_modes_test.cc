// The exact fault-tolerance modes (DESIGN 6; issue 6): under random failure schedules on the in-process cluster the
// sketches, the reported keys and the sink end exactly as in a failure-free run of mode none, behind a replayable
// source and behind a relay (a worker whose upstream is not replayable).
//  - ask (backtrack recovery): checkpoints with input positions, no per-item acknowledgements, senders keep their
//    output until a downstream checkpoint covers it, a recovered worker asks its senders to resend from its
//    checkpoint; no item log.
//  - microbatch (Spark Streaming style): items logged, the state checkpointed at each batch boundary, outputs
//    released per batch; a failure recomputes the batch from the log.
//  - exact (upstream backup): every item logged, the state backed up every fixed number of items.
//  - checkpoint (Flink style): barrier checkpoints from the source every few thousand items, aligned at the sink's
//    two inputs, snapshotted asynchronously; a failure rolls every worker back to the last complete checkpoint (the
//    workers not killed crash themselves), the source replays from its offset; no item log.
#include <gtest/gtest.h>

#include "afstream/core/errors.h"
#include "afstream/ft/records.h"
#include "afstream/store/checkpoint_ledger.h"
#include "afstream/store/memory_store.h"
#include "tests/property/hh_harness.h"

namespace afs::testing {
namespace {

RunConfig ask_config(std::uint64_t every) {
  RunConfig c;
  c.mode = FtMode::Ask;
  c.ask_every = every;
  c.batch_items = 256;
  return c;
}

RunConfig mode_config(FtMode mode, int seed) {
  RunConfig c;
  c.mode = mode;
  c.batch_items = 256;
  c.ask_every = seed % 2 ? 4096 : 1000;
  c.microbatch_items = seed % 2 ? 10000 : 3000;  // many batches in a short run (the interval would make one)
  c.exact_state_every = 20000;
  c.checkpoint_items = seed % 2 ? 20000 : 5000;  // many checkpoints in a short run; kills often land mid-checkpoint
  return c;
}

class ExactModesProperty : public ::testing::TestWithParam<FtMode> {};

TEST_P(ExactModesProperty, FailuresLeaveExactlyTheFailureFreeResults) {
  const FtMode mode = GetParam();
  for (const bool relay : {false, true}) {
    for (int seed = 1; seed <= 6; ++seed) {
      std::mt19937_64 rng(seed * 977 + relay + 31 * static_cast<int>(mode));
      HhSetup s;
      s.seed = seed;
      s.items = 200000;
      s.relay = relay;
      s.weights = seed % 2 ? "unit" : "packet";
      s.phi = s.weights == "packet" ? 1500.0 * 770 : 1500;
      RunConfig none;
      none.mode = FtMode::None;
      const auto reference = run_hh(s, none);
      auto cfg = mode_config(mode, seed);
      const int workers = relay ? 5 : 4;
      cfg.failures = random_failures(rng, 2 + seed % 4, s.items, workers);
      const auto run = run_hh(s, cfg);
      const std::string at =
          std::string(to_string(mode)) + (relay ? " relay" : " source") + " seed " + std::to_string(seed);
      EXPECT_FALSE(run.result.failures.empty()) << at;
      EXPECT_EQ(run.states, reference.states) << at;
      EXPECT_EQ(run.reported, reference.reported) << at;
      for (auto c : run.compensation) EXPECT_EQ(c, 0) << at;  // nothing to compensate: nothing was lost
      for (const auto& r : run.result.failures) {
        EXPECT_EQ(r.lost_items, 0u) << at << " worker " << r.worker;
        if (mode == FtMode::Ask || mode == FtMode::Checkpoint) {
          EXPECT_EQ(r.replayed_items, 0u) << at << " worker " << r.worker;  // no item log
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ExactModesProperty,
                         ::testing::Values(FtMode::Ask, FtMode::MicroBatch, FtMode::Exact, FtMode::Checkpoint),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(AskModeProperty, NoFailuresEqualsNoneWithoutAcknowledgingItems) {
  HhSetup s;
  s.items = 200000;
  RunConfig none;
  none.mode = FtMode::None;
  const auto reference = run_hh(s, none);
  const auto run = run_hh(s, ask_config(2048));
  EXPECT_EQ(run.states, reference.states);
  EXPECT_EQ(run.reported, reference.reported);
  EXPECT_GT(run.result.state_backups, 0u);  // checkpoints
  EXPECT_EQ(run.result.item_backups, 0u);   // and no item log
}

// Microbatch: a checkpoint at every boundary (here every 5000 items a sketch processes) and an item log.
TEST(MicroBatchProperty, NoFailuresEqualsNoneWithACheckpointPerBatch) {
  HhSetup s;
  s.items = 200000;
  RunConfig none;
  none.mode = FtMode::None;
  const auto reference = run_hh(s, none);
  RunConfig cfg;
  cfg.mode = FtMode::MicroBatch;
  cfg.microbatch_items = 5000;
  const auto run = run_hh(s, cfg);
  EXPECT_EQ(run.states, reference.states);
  EXPECT_EQ(run.reported, reference.reported);
  EXPECT_GE(run.result.state_backups, s.items / 5000);  // both sketches' batches (the source backs up its offset too)
  EXPECT_GT(run.result.item_backups, 0u);
}

// Checkpoint mode without failures: mode none's results, checkpoints complete (aligned at the sink, whose two inputs
// come from the two sketches), no item log; and every worker ends in a checkpoint that holds its end of stream.
TEST(CheckpointModeProperty, NoFailuresEqualsNoneWithAlignedCheckpoints) {
  HhSetup s;
  s.items = 200000;
  RunConfig none;
  none.mode = FtMode::None;
  const auto reference = run_hh(s, none);
  RunConfig cfg;
  cfg.mode = FtMode::Checkpoint;
  cfg.checkpoint_items = 10000;
  auto store = std::make_shared<MemoryStore>();
  const auto run = run_hh(s, cfg, store);
  EXPECT_EQ(run.states, reference.states);
  EXPECT_EQ(run.reported, reference.reported);
  EXPECT_EQ(run.result.item_backups, 0u);
  // One checkpoint per 10000 source items that completed before the next was due, and the final one.
  EXPECT_GE(run.result.checkpoints, 2u);
  EXPECT_LE(run.result.checkpoints, s.items / 10000 + 1);
  EXPECT_EQ(run.result.checkpoints_abandoned, 0u);
  EXPECT_GT(run.result.checkpoint_bytes, 0u);
  EXPECT_GE(run.result.checkpoint_ms_max, run.result.checkpoint_ms_mean);
  // Every checkpoint the source started completed, the last one the final one: every worker's last record is of it
  // and holds its end of stream.
  EXPECT_EQ(store->checkpoint_status().complete, checkpoint_id(0, static_cast<std::uint32_t>(run.result.checkpoints)));
  for (int w = 0; w < 4; ++w) {
    const auto chain = store->state_chain(w);
    ASSERT_FALSE(chain.empty()) << "worker " << w;
    const auto last = StateRecord::decode(chain.back());
    EXPECT_TRUE(last.finished) << "worker " << w;
    EXPECT_EQ(last.checkpoint, store->checkpoint_status().complete) << "worker " << w;
  }
}

// A checkpoint that cannot complete within ft.checkpoint-timeout is abandoned; one more than
// ft.checkpoint-tolerable-failures fails the job with an error naming both options.
TEST(CheckpointModeProperty, TimeoutsOverTheToleratedCountFailTheJob) {
  HhSetup s;
  s.items = 2000000;
  RunConfig cfg;
  cfg.mode = FtMode::Checkpoint;
  cfg.checkpoint_items = 1000;
  cfg.checkpoint_timeout = std::chrono::milliseconds(1);  // shorter than any checkpoint takes here
  cfg.checkpoint_tolerable_failures = 2;
  try {
    run_hh(s, cfg);
    ADD_FAILURE() << "the job did not fail";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ft.checkpoint-timeout"), std::string::npos) << m;
    EXPECT_NE(m.find("3 abandoned checkpoints, more than ft.checkpoint-tolerable-failures = 2"), std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace afs::testing
