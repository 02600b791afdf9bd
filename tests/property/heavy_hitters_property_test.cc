// Property tests of heavy hitters under approximate fault tolerance (PAPER Theorem 2,
// proofs/theorem2-count-min.md): with compensation after each recovery there are no false negatives and no
// estimate falls below the exact weight, whatever the failure schedule; without failures approx equals none.
#include <gtest/gtest.h>

#include "tests/property/hh_harness.h"

namespace afs::testing {
namespace {

// Behind a relay the sketches' upstream forgets what they acknowledged, so their failures lose items for good and
// the compensation (the measured loss, or the bound) is what keeps recall at 1. There only the sketches fail (see
// sketch_failures).
TEST(HeavyHittersProperty, RecallIsOneAfterCompensation) {
  for (int seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed * 101);
    HhSetup s;
    s.seed = seed;
    s.relay = seed > 6;
    s.items = 300000;
    s.phi = 1500;
    s.weights = seed % 2 ? "unit" : "packet";
    if (s.weights == "packet") s.phi *= 770;
    RunConfig cfg;
    cfg.mode = FtMode::Approx;
    cfg.bounds = s.weights == "packet" ? UserBounds{2e4, 20, 100} : UserBounds{200, 50, 100};
    cfg.batch_items = 256;
    if (s.relay) {
      const auto t = hh_topology(s);
      cfg.failures = sketch_failures(rng, 2 + seed % 6, s.items, t.first_worker(t.stage_index("hh")), s.parallelism);
    } else {
      cfg.failures = random_failures(rng, 2 + seed % 6, s.items, 4);
    }
    const auto run = run_hh(s, cfg);
    EXPECT_FALSE(run.result.failures.empty());
    EXPECT_EQ(run.score.recall, 1.0) << "seed " << seed << ": " << run.score.true_positives << " of "
                                     << run.score.true_heavy;
    EXPECT_GE(run.min_margin, 0) << "seed " << seed << ": an estimate fell below the exact weight";
    EXPECT_GT(run.score.true_heavy, 5u);
  }
}

// A replayable source goes back to what each sketch's backups covered, so a recovered sketch sees every item again:
// nothing is missing, no compensation is added, and the sketches end exactly as in a failure-free run, whatever
// fails (proofs/general-bounds.md, R-source).
TEST(HeavyHittersProperty, ReplayableSourceMakesSketchRecoveryExact) {
  for (int seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed * 211);
    HhSetup s;
    s.seed = seed;
    s.items = 200000;
    s.weights = seed % 2 ? "unit" : "packet";
    s.phi = s.weights == "packet" ? 1500.0 * 770 : 1500;
    RunConfig none;
    none.mode = FtMode::None;
    const auto reference = run_hh(s, none);
    RunConfig cfg;
    cfg.mode = FtMode::Approx;
    cfg.bounds = s.weights == "packet" ? UserBounds{2e4, 20, 100} : UserBounds{200, 50, 100};
    cfg.batch_items = 256;
    cfg.failures = random_failures(rng, 2 + seed % 5, s.items, 4);
    const auto run = run_hh(s, cfg);
    const int first = run.topology.first_worker(run.topology.stage_index("hh"));
    int measured = 0;
    for (const auto& r : run.result.failures) {
      if (r.worker < first || r.worker >= first + s.parallelism) continue;
      if (r.missing_items < 0) continue;  // it failed again before its senders resumed: the next one measures
      ++measured;
      EXPECT_EQ(r.missing_items, 0) << "seed " << seed << " worker " << r.worker << " failure " << r.failure_count;
    }
    EXPECT_GT(measured, 0) << "seed " << seed;
    EXPECT_EQ(run.states, reference.states) << "seed " << seed;
    for (auto c : run.compensation) EXPECT_EQ(c, 0) << "seed " << seed;
  }
}

TEST(HeavyHittersProperty, NoFailuresApproxEqualsNone) {
  for (int seed = 1; seed <= 4; ++seed) {
    HhSetup s;
    s.seed = seed;
    s.weights = seed % 2 ? "unit" : "packet";
    s.phi = s.weights == "packet" ? 1500.0 * 770 : 1500;
    RunConfig none;
    none.mode = FtMode::None;
    const auto reference = run_hh(s, none);
    for (auto mode : {FtMode::Approx, FtMode::Exact}) {
      RunConfig cfg;
      cfg.mode = mode;
      cfg.bounds = {1e4, 100, 100};
      const auto run = run_hh(s, cfg);
      EXPECT_EQ(run.states, reference.states) << "seed " << seed << " mode " << to_string(mode);
      EXPECT_EQ(run.reported, reference.reported) << "seed " << seed << " mode " << to_string(mode);
      EXPECT_GT(run.result.state_backups, 0u);
    }
    EXPECT_EQ(reference.result.state_backups, 0u);
    EXPECT_EQ(reference.result.backup_bytes, 0u);
  }
}

}  // namespace
}  // namespace afs::testing
