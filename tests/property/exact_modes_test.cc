// The exact fault-tolerance modes (DESIGN 6; issue 6): under random failure schedules on the in-process cluster the
// sketches, the reported keys and the sink end exactly as in a failure-free run of mode none, behind a replayable
// source and behind a relay (a worker whose upstream is not replayable).
//  - ask (backtrack recovery): checkpoints with input positions, no per-item acknowledgements, senders keep their
//    output until a downstream checkpoint covers it, a recovered worker asks its senders to resend from its
//    checkpoint; no item log.
//  - microbatch (Spark Streaming style): items logged, the state checkpointed at each batch boundary, outputs
//    released per batch; a failure recomputes the batch from the log.
//  - exact (upstream backup): every item logged, the state backed up every fixed number of items.
#include <gtest/gtest.h>

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
        if (mode == FtMode::Ask) EXPECT_EQ(r.replayed_items, 0u) << at << " worker " << r.worker;  // no item log
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ExactModesProperty,
                         ::testing::Values(FtMode::Ask, FtMode::MicroBatch, FtMode::Exact),
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
  EXPECT_GT(run.result.state_backups, 0u);   // checkpoints
  EXPECT_EQ(run.result.item_backups, 0u);    // and no item log
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

}  // namespace
}  // namespace afs::testing
