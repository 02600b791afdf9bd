// Unit tests of the engine-free HyperLogLog (algorithms/distinct): accuracy against the exact count over many seeds,
// merge against one sketch over the concatenated stream, and the binary form's rejection of bad buffers.
#include "algorithms/distinct/hyperloglog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::distinct {
namespace {

// n distinct keys (drawn from the seed; duplicates of them change nothing) fed to a sketch of precision p.
HyperLogLog fed(int p, std::uint64_t seed, std::uint64_t n, std::uint64_t first = 0) {
  HyperLogLog h(p, 7);
  std::mt19937_64 rng(seed);
  const std::uint64_t base = rng();
  for (std::uint64_t i = first; i < first + n; ++i) {
    h.update(base + i);
    if (i % 3 == 0) h.update(base + i);  // repeats count once
  }
  return h;
}

TEST(HyperLogLog, EstimatesAreWithinTwoStandardErrorsForMostSeeds) {
  for (const int p : {8, 11, 14}) {
    for (const std::uint64_t n : {20000ull, 200000ull}) {
      const double se = HyperLogLog::standard_error(p);
      int within = 0;
      double sum_rel = 0;
      constexpr int kSeeds = 40;
      for (int seed = 1; seed <= kSeeds; ++seed) {
        const double rel = fed(p, seed * 101 + p, n).estimate() / static_cast<double>(n) - 1;
        within += std::fabs(rel) <= 2 * se;
        sum_rel += rel;
      }
      // About 95% are expected within 2 standard errors; 85% leaves room for the finite sample of seeds.
      EXPECT_GE(within, kSeeds * 85 / 100) << "p " << p << " n " << n;
      EXPECT_LT(std::fabs(sum_rel / kSeeds), se) << "p " << p << " n " << n << ": biased";
    }
  }
}

// Linear counting below 2.5 * 2^p: its standard error at n = 500 of 4096 registers is about 1.1%.
TEST(HyperLogLog, SmallCountsAreNearlyExact) {
  for (std::uint64_t n : {0ull, 1ull, 5ull, 50ull, 500ull}) {
    const double e = fed(12, 3, n).estimate();
    EXPECT_NEAR(e, static_cast<double>(n), 0.04 * static_cast<double>(n) + 0.5) << n;
  }
}

TEST(HyperLogLog, BoundsBracketTheEstimate) {
  const auto h = fed(12, 9, 100000);
  EXPECT_LT(h.lower_bound(), h.estimate());
  EXPECT_GT(h.upper_bound(), h.estimate());
  EXPECT_LE(h.lower_bound(), 100000.0);
  EXPECT_GE(h.upper_bound(), 100000.0);
}

TEST(HyperLogLog, MergeEqualsOneSketchOverTheConcatenationAndIsAssociative) {
  const auto a = fed(10, 5, 30000, 0), b = fed(10, 5, 30000, 20000), c = fed(10, 5, 5000, 90000);
  HyperLogLog ab = a;
  ab.merge(b);
  EXPECT_EQ(ab, fed(10, 5, 50000, 0));  // [0, 30000) and [20000, 50000): the keys of [0, 50000)
  HyperLogLog ab_c = ab, a_bc = a, bc = b;
  ab_c.merge(c);
  bc.merge(c);
  a_bc.merge(bc);
  EXPECT_EQ(ab_c, a_bc);
  HyperLogLog other(11, 7);
  EXPECT_THROW(ab.merge(other), std::invalid_argument);
  EXPECT_THROW(ab.merge(HyperLogLog(10, 8)), std::invalid_argument);
}

TEST(HyperLogLog, SizingHelpersAndBadParameters) {
  EXPECT_EQ(HyperLogLog::precision_for_error(0.0163), 12);  // 1.04 / 64 = 0.01625
  EXPECT_LE(HyperLogLog::standard_error(HyperLogLog::precision_for_error(0.01)), 0.01);
  EXPECT_THROW(HyperLogLog::precision_for_error(0), ConfigError);
  EXPECT_THROW(HyperLogLog::precision_for_error(1e-5), ConfigError);
  EXPECT_THROW(HyperLogLog(3), ConfigError);
  EXPECT_THROW(HyperLogLog(19), ConfigError);
  HyperLogLog h(4);
  for (std::uint64_t k = 0; k < 100000; ++k) EXPECT_LE(h.slot(k).rank, HyperLogLog::max_rank(4));
}

TEST(HyperLogLog, SerializeRoundTripsAndRejectsEveryTruncationAndCorruption) {
  const auto h = fed(6, 11, 5000);
  ByteWriter w;
  h.serialize(w);
  const std::vector<std::uint8_t> good = w.take();
  ByteReader r(good);
  EXPECT_EQ(HyperLogLog::deserialize(r), h);
  EXPECT_EQ(r.position(), good.size());
  for (std::size_t len = 0; len < good.size(); ++len) {
    ByteReader t(std::span<const std::uint8_t>(good.data(), len));
    EXPECT_THROW(HyperLogLog::deserialize(t), FormatError) << "prefix of " << len << " bytes";
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::vector<std::uint8_t> bad = good;
    bad[i] ^= 0x20;
    ByteReader t(bad);
    EXPECT_THROW(HyperLogLog::deserialize(t), FormatError) << "byte " << i << " flipped";
  }
}

}  // namespace
}  // namespace afs::distinct
