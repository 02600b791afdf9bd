// Ask mode (backtrack recovery, DESIGN 6; issue 6 item 5): checkpoints with input positions, no per-item
// acknowledgements, senders keep their output until a downstream checkpoint covers it, and a recovered worker asks
// its senders to resend from its checkpoint. Exactly-once state: under random failure schedules on the in-process
// cluster the sketches, the reported keys and the sink end exactly as in a failure-free run of mode none, behind
// a replayable source and behind a relay (a worker that keeps no log).
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

TEST(AskModeProperty, FailuresLeaveExactlyTheFailureFreeResults) {
  for (const bool relay : {false, true}) {
    for (int seed = 1; seed <= 6; ++seed) {
      std::mt19937_64 rng(seed * 977 + relay);
      HhSetup s;
      s.seed = seed;
      s.items = 200000;
      s.relay = relay;
      s.weights = seed % 2 ? "unit" : "packet";
      s.phi = s.weights == "packet" ? 1500.0 * 770 : 1500;
      RunConfig none;
      none.mode = FtMode::None;
      const auto reference = run_hh(s, none);
      auto cfg = ask_config(seed % 2 ? 4096 : 1000);
      const int workers = relay ? 5 : 4;
      cfg.failures = random_failures(rng, 2 + seed % 4, s.items, workers);
      const auto run = run_hh(s, cfg);
      const std::string at = std::string(relay ? "relay" : "source") + " seed " + std::to_string(seed);
      EXPECT_FALSE(run.result.failures.empty()) << at;
      EXPECT_EQ(run.states, reference.states) << at;
      EXPECT_EQ(run.reported, reference.reported) << at;
      for (auto c : run.compensation) EXPECT_EQ(c, 0) << at;  // nothing to compensate: nothing was lost
      for (const auto& r : run.result.failures) {
        EXPECT_EQ(r.lost_items, 0u) << at << " worker " << r.worker;
        EXPECT_EQ(r.replayed_items, 0u) << at << " worker " << r.worker;  // no item log: senders resend
      }
    }
  }
}

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

}  // namespace
}  // namespace afs::testing
