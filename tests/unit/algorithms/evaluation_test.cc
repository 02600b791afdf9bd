// Unit tests of afs::hh::score_heavy_hitters on hand-made reports with known precision, recall and ARE.
#include "algorithms/heavy_hitters/evaluation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "afstream/core/errors.h"

namespace afs::hh {
namespace {

using Counts = std::unordered_map<std::uint64_t, std::int64_t>;

const Counts kExact = {{1, 100}, {2, 50}, {3, 20}, {4, 10}, {5, 5}};  // phi = 20: heavy = {1, 2}

TEST(ScoreHeavyHitters, MixedReport) {
  // 1 correct (+10%), 4 a false positive, 2 missed (estimate 0: relative error 1).
  const auto s = score_heavy_hitters({{1, 110}, {4, 30}}, kExact, 20.0);
  EXPECT_EQ(s.reported, 2u);
  EXPECT_EQ(s.true_heavy, 2u);
  EXPECT_EQ(s.true_positives, 1u);
  EXPECT_DOUBLE_EQ(s.precision, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 0.5);
  EXPECT_DOUBLE_EQ(s.are, (0.1 + 1.0) / 2);
}

TEST(ScoreHeavyHitters, PerfectReport) {
  const auto s = score_heavy_hitters({{1, 100}, {2, 50}}, kExact, 20.0);
  EXPECT_DOUBLE_EQ(s.precision, 1.0);
  EXPECT_DOUBLE_EQ(s.recall, 1.0);
  EXPECT_DOUBLE_EQ(s.are, 0.0);
}

TEST(ScoreHeavyHitters, ThresholdIsStrictAndUnknownKeysAreFalsePositives) {
  // Key 3 has exactly phi = 20: not heavy. Key 99 is not in the stream at all.
  const auto s = score_heavy_hitters({{1, 90}, {2, 60}, {3, 21}, {99, 40}}, kExact, 20.0);
  EXPECT_EQ(s.true_heavy, 2u);
  EXPECT_EQ(s.true_positives, 2u);
  EXPECT_DOUBLE_EQ(s.precision, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 1.0);
  EXPECT_DOUBLE_EQ(s.are, (0.1 + 0.2) / 2);
}

TEST(ScoreHeavyHitters, EmptyReportAndNoHeavyHitters) {
  const auto nothing = score_heavy_hitters({}, kExact, 20.0);
  EXPECT_DOUBLE_EQ(nothing.precision, 1.0);
  EXPECT_DOUBLE_EQ(nothing.recall, 0.0);
  EXPECT_DOUBLE_EQ(nothing.are, 1.0);

  const auto none_heavy = score_heavy_hitters({{1, 120}}, kExact, 1000.0);
  EXPECT_EQ(none_heavy.true_heavy, 0u);
  EXPECT_DOUBLE_EQ(none_heavy.precision, 0.0);
  EXPECT_DOUBLE_EQ(none_heavy.recall, 1.0);
  EXPECT_DOUBLE_EQ(none_heavy.are, 0.0);

  const auto empty = score_heavy_hitters({}, {}, 0.0);
  EXPECT_DOUBLE_EQ(empty.precision, 1.0);
  EXPECT_DOUBLE_EQ(empty.recall, 1.0);
  EXPECT_DOUBLE_EQ(empty.are, 0.0);
}

TEST(ScoreHeavyHitters, FractionalThresholdAndOverestimates) {
  // phi = 4.5: heavy = {1, 2, 3, 4, 5}; estimates all 2x (relative error 1) except key 5 exact.
  const auto s = score_heavy_hitters({{1, 200}, {2, 100}, {3, 40}, {4, 20}, {5, 5}}, kExact, 4.5);
  EXPECT_EQ(s.true_heavy, 5u);
  EXPECT_DOUBLE_EQ(s.precision, 1.0);
  EXPECT_DOUBLE_EQ(s.recall, 1.0);
  EXPECT_DOUBLE_EQ(s.are, 4.0 / 5);
}

TEST(ScoreHeavyHitters, RejectsNegativeOrNanThreshold) {
  EXPECT_THROW(score_heavy_hitters({}, kExact, -1.0), ConfigError);
  EXPECT_THROW(score_heavy_hitters({}, kExact, std::nan("")), ConfigError);
}

}  // namespace
}  // namespace afs::hh
