// Property tests of Space-Saving heavy hitters under approximate fault tolerance (proofs/space-saving.md, Theorem SS
// and Corollary SS-P): on many seeded failure schedules, every key's true weight stays within its summary's bounds
// after compensation (count - error <= true <= count; true <= min_count for an unmonitored key), the compensation
// stays below Theta + alpha L / n per copy, the error widens by at most it, no true heavy hitter is missed, and a
// reported key is at most min_count below phi. Without failures approx and exact equal none; behind a replayable
// source recovery is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/property/hh_harness.h"

namespace afs::testing {
namespace {

HhSetup ss_setup(int seed) {
  HhSetup s;
  s.algorithm = "space-saving";
  s.capacity = 2000;
  s.seed = static_cast<std::uint64_t>(seed);
  s.items = 300000;
  s.weights = seed % 2 ? "unit" : "packet";
  s.phi = s.weights == "packet" ? 1500.0 * 770 : 1500;
  return s;
}

// Half the seeds put a relay before the summaries, so their failures lose items for good and the compensation is
// what keeps every upper bound; there only the summaries fail. The others fail any worker behind a replayable source.
TEST(SpaceSavingProperty, BoundsHoldAndRecallIsOneAfterCompensation) {
  std::int64_t compensated = 0;
  std::size_t needed = 0;  // keys whose upper bound would be below their true weight without the compensation
  for (int seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed * 307);
    HhSetup s = ss_setup(seed);
    s.relay = seed > 6;
    RunConfig cfg;
    cfg.mode = FtMode::Approx;
    cfg.bounds = s.weights == "packet" ? UserBounds{2e4, 20, 100} : UserBounds{200, 50, 100};
    cfg.batch_items = 256;
    const auto t = hh_topology(s);
    const int first = t.first_worker(t.stage_index("hh"));
    if (s.relay) {
      cfg.failures = sketch_failures(rng, 2 + seed % 6, s.items, first, s.parallelism);
    } else {
      cfg.failures = random_failures(rng, 2 + seed % 6, s.items, 4);
    }
    const auto run = run_hh(s, cfg);
    const std::string at = "seed " + std::to_string(seed);
    EXPECT_FALSE(run.result.failures.empty()) << at;
    const double alpha = static_cast<double>(hh::max_weight(hh::parse_weights(s.weights)));
    const auto n = static_cast<std::size_t>(s.parallelism);
    // Per copy: its keys' exact weights, its total, and the bound of its compensation from its failure records.
    std::vector<std::unordered_map<std::uint64_t, std::int64_t>> part(n);
    std::vector<std::int64_t> total(n, 0), bound(n, 0);
    for (const auto& [k, w] : run.exact) {
      part[key_partition(k, n)][k] = w;
      total[key_partition(k, n)] += w;
    }
    std::vector<bool> failed_before(n, false);
    for (const auto& r : run.result.failures) {
      if (r.worker < first || r.worker >= first + s.parallelism) continue;
      if (!failed_before[static_cast<std::size_t>(r.worker - first)]) {  // Corollary SS-P: Theta / 2, not / (2n)
        EXPECT_EQ(r.theta, cfg.bounds.theta / 2) << at << " worker " << r.worker << "'s first failure";
        failed_before[static_cast<std::size_t>(r.worker - first)] = true;
      }
      bound[static_cast<std::size_t>(r.worker - first)] +=
          static_cast<std::int64_t>(std::floor(r.theta)) +
          static_cast<std::int64_t>(r.l) * static_cast<std::int64_t>(alpha);
    }
    for (std::size_t p = 0; p < n; ++p) {
      const auto& summary = run.summaries[p];
      const std::int64_t e = run.compensation[p];
      compensated += e;
      // Lemma SS3: the compensation is at most the sum of the per-failure bounds, below Theta + alpha L / n (each
      // copy fed by key uses all of Theta, and L split n ways: Corollary SS-P).
      EXPECT_LE(e, bound[p]) << at << " copy " << p;
      EXPECT_LT(static_cast<double>(e), cfg.bounds.theta + alpha * cfg.bounds.l / static_cast<double>(n)) << at;
      // Theorem SS (1): every key within its bounds.
      for (const auto& [k, w] : part[p]) {
        ASSERT_GE(summary.upper_bound(k), w) << at << " copy " << p << " key " << k;
        ASSERT_LE(summary.lower_bound(k), w) << at << " copy " << p << " key " << k;
        needed += summary.monitored(k) && summary.upper_bound(k) - e < w ? 1 : 0;
      }
      // Theorem SS (2): the error is at most N_p / k + E.
      const auto k = static_cast<std::int64_t>(s.capacity);
      EXPECT_LE(summary.min_count(), (total[p] + k - 1) / k + e) << at << " copy " << p;
      // Theorem SS (4): every reported key is heavier than phi - min_count.
      for (const auto& [key, v] : run.reported) {
        if (key_partition(key, n) != p) continue;
        EXPECT_EQ(v, summary.upper_bound(key)) << at;
        EXPECT_GT(static_cast<double>(part[p].at(key)), s.phi - static_cast<double>(summary.min_count())) << at;
      }
    }
    // Theorem SS (3): no false negatives.
    EXPECT_EQ(run.score.recall, 1.0) << at << ": " << run.score.true_positives << " of " << run.score.true_heavy;
    EXPECT_GE(run.min_margin, 0) << at;
    EXPECT_GT(run.score.true_heavy, 5u) << at;
  }
  EXPECT_GT(compensated, 0) << "no schedule lost anything: the test would not see a missing compensation";
  EXPECT_GT(needed, 0u) << "no key needed the compensation: the test would not see a missing one";
}

// Failures behind a replayable source: the source goes back to what each summary's backup covered and sends every
// item again in the same order, deltas are whole, so nothing is missing, nothing is compensated, and every summary
// ends exactly as in a failure-free run (the eviction order depends only on the entries).
TEST(SpaceSavingProperty, ReplayableSourceMakesRecoveryExact) {
  for (int seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed * 419);
    HhSetup s = ss_setup(seed);
    s.items = 200000;
    RunConfig none;
    none.mode = FtMode::None;
    const auto reference = run_hh(s, none);
    RunConfig cfg;
    cfg.mode = FtMode::Approx;
    cfg.bounds = s.weights == "packet" ? UserBounds{2e4, 20, 100} : UserBounds{200, 50, 100};
    cfg.batch_items = 256;
    cfg.failures = random_failures(rng, 2 + seed % 5, s.items, 4);
    const auto run = run_hh(s, cfg);
    const std::string at = "seed " + std::to_string(seed);
    EXPECT_FALSE(run.result.failures.empty()) << at;
    EXPECT_EQ(run.states, reference.states) << at;
    EXPECT_EQ(run.reported, reference.reported) << at;
    for (auto c : run.compensation) EXPECT_EQ(c, 0) << at;
  }
}

TEST(SpaceSavingProperty, NoFailuresApproxAndExactEqualNone) {
  for (int seed = 1; seed <= 4; ++seed) {
    const HhSetup s = ss_setup(seed);
    RunConfig none;
    none.mode = FtMode::None;
    const auto reference = run_hh(s, none);
    EXPECT_EQ(reference.result.state_backups, 0u);
    for (auto mode : {FtMode::Approx, FtMode::Exact}) {
      RunConfig cfg;
      cfg.mode = mode;
      cfg.bounds = {1e4, 100, 100};
      const auto run = run_hh(s, cfg);
      EXPECT_EQ(run.states, reference.states) << "seed " << seed << " mode " << to_string(mode);
      EXPECT_EQ(run.reported, reference.reported) << "seed " << seed << " mode " << to_string(mode);
      EXPECT_GT(run.result.state_backups, 0u);
    }
  }
}

}  // namespace
}  // namespace afs::testing
