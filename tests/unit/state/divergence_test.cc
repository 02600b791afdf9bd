// Unit tests for the divergence metrics and the shared O(1) tracker (DESIGN.md section 3): names, parsing, exact
// integer arithmetic at the extremes of int64, floating-point cancellation; and every container is a TrackedState.
#include "afstream/state/divergence.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "afstream/core/errors.h"
#include "afstream/state/tracked_array.h"
#include "afstream/state/tracked_map.h"
#include "afstream/state/tracked_state.h"
#include "afstream/state/tracked_vector.h"

namespace afs {
namespace {

static_assert(TrackedState<TrackedArray<std::int64_t>>);
static_assert(TrackedState<TrackedArray<double>>);
static_assert(TrackedState<TrackedMap<std::int64_t>>);
static_assert(TrackedState<TrackedMap<double>>);
static_assert(TrackedState<TrackedVector>);

TEST(Metric, NamesRoundTrip) {
  for (Metric m : {Metric::MaxAbs, Metric::L1, Metric::L2, Metric::NewKeys}) EXPECT_EQ(parse_metric(to_string(m)), m);
  EXPECT_STREQ(to_string(Metric::MaxAbs), "max-abs");
  EXPECT_STREQ(to_string(Metric::NewKeys), "new-keys");
}

TEST(Metric, ParseIsLenient) {
  EXPECT_EQ(parse_metric("MaxAbs"), Metric::MaxAbs);
  EXPECT_EQ(parse_metric("max_abs"), Metric::MaxAbs);
  EXPECT_EQ(parse_metric("L1"), Metric::L1);
  EXPECT_EQ(parse_metric("l2"), Metric::L2);
  EXPECT_EQ(parse_metric("NEW_KEYS"), Metric::NewKeys);
  EXPECT_EQ(parse_metric("newkeys"), Metric::NewKeys);
}

TEST(Metric, ParseRejectsUnknown) {
  EXPECT_THROW(parse_metric("l3"), ConfigError);
  EXPECT_THROW(parse_metric(""), ConfigError);
  try {
    parse_metric("cosine");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cosine"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("max-abs, l1, l2, new-keys"), std::string::npos);
  }
}

TEST(DivergenceTracker, IntegerExtremesAreExact) {
  constexpr auto lo = std::numeric_limits<std::int64_t>::min();
  constexpr auto hi = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(detail::abs_diff(lo, hi), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(detail::abs_diff(hi, lo), std::numeric_limits<std::uint64_t>::max());

  detail::DivergenceTracker<std::int64_t> l1(Metric::L1);
  l1.change(lo, lo, hi);  // |d| = 2^64 - 1
  l1.change(lo, lo, hi);  // a second slot: the sum exceeds 64 bits
  EXPECT_DOUBLE_EQ(l1.value(), 2.0 * 18446744073709551615.0);
  l1.change(lo, hi, lo);  // back to the base: exactly one slot's worth remains
  EXPECT_DOUBLE_EQ(l1.value(), 18446744073709551615.0);

  detail::DivergenceTracker<std::int64_t> l2(Metric::L2);
  l2.change(0, 0, hi);
  EXPECT_DOUBLE_EQ(l2.value(), static_cast<double>(hi));
  l2.change(0, hi, 1);  // (2^63-1)^2 removed exactly, 1 remains
  EXPECT_EQ(l2.value(), 1.0);
}

TEST(DivergenceTracker, MaxAbsIsAHighWaterMark) {
  detail::DivergenceTracker<std::int64_t> t(Metric::MaxAbs);
  t.change(10, 10, 15);
  t.change(10, 15, 11);  // moved back: the mark stays at 5
  EXPECT_EQ(t.value(), 5.0);
  t.reset();
  EXPECT_EQ(t.value(), 0.0);
}

TEST(DivergenceTracker, DoubleCancellationIsFlaggedForRecomputation) {
  // Contribution 4000 is absorbed by 1e20 (ulp 16384), so removing both leaves the running sum at -4000.
  detail::DivergenceTracker<double> t(Metric::L2);
  const double b = std::sqrt(4000.0);
  t.change(0.0, 0.0, 1e10);
  t.change(0.0, 0.0, b);
  t.change(0.0, 1e10, 0.0);
  EXPECT_FALSE(t.drifted());
  t.change(0.0, b, 0.0);
  EXPECT_TRUE(t.drifted());
  EXPECT_EQ(t.value(), 0.0);  // clamped, never NaN
  t.reset_sum();
  EXPECT_FALSE(t.drifted());
}

// A value that is not a number makes the sums infinite until the next backup, never 0 (they read 0: a NaN weight
// never triggered Theta, nor did the finite drift beside it). An infinite value moved again (inf - inf) too.
TEST(DivergenceTracker, ANanValueMakesTheDivergenceInfinite) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const Metric m : {Metric::L1, Metric::L2}) {
    detail::DivergenceTracker<double> t(m);
    t.change(0.0, 0.0, 3.0);
    t.change(0.0, 0.0, nan);
    EXPECT_EQ(t.value(), inf) << static_cast<int>(m);
    t.change(0.0, nan, 0.0);  // set back: still not known until a backup
    EXPECT_EQ(t.value(), inf) << static_cast<int>(m);
    t.reset_sum();
    EXPECT_EQ(t.value(), 0.0) << static_cast<int>(m);
    t.change(0.0, 0.0, inf);
    t.change(0.0, inf, 1.0);
    EXPECT_EQ(t.value(), inf) << static_cast<int>(m);
  }
  // The high-water mark too: NaN > max is false, and a NaN entry left MaxAbs where it was.
  detail::DivergenceTracker<double> t(Metric::MaxAbs);
  t.change(0.0, 0.0, 3.0);
  t.change(0.0, 0.0, nan);
  EXPECT_EQ(t.value(), inf);
  detail::DivergenceTracker<double> r(Metric::MaxAbs);
  r.accumulate(1.0, nan);
  EXPECT_EQ(r.value(), inf);
}

}  // namespace
}  // namespace afs
