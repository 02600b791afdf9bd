// Unit tests of the engine-free ripple join and the join workload (algorithms/join/ripple_join.h,
// join_generator.h): estimates against brute force over many seeds (coverage of the CLT interval at its stated
// rate, unbiasedness, the variance estimator against the empirical variance), merge of key partitions,
// the Theorem 3 widening, sizing, and every truncation and corruption of the binary form.
#include "algorithms/join/ripple_join.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "algorithms/join/join_generator.h"

namespace afs::join {
namespace {

JoinStreamParams small_streams(std::uint64_t seed) {
  return {.r_items = 3000, .s_items = 2000, .keys = 400, .skew = 0.8, .seed = seed, .max_value = 50};
}

// Brute force over the items: exact COUNT and SUM(r.value) of the equi-join.
std::pair<double, double> brute_force(const std::vector<Item>& items) {
  std::unordered_map<std::uint64_t, double> r, s, v;
  for (const auto& it : items) {
    if (side_of(it) == Side::R) {
      r[it.key] += 1;
      v[it.key] += static_cast<double>(it.value);
    } else {
      s[it.key] += 1;
    }
  }
  double count = 0, sum = 0;
  for (const auto& [k, n] : r) {
    const auto it = s.find(k);
    if (it == s.end()) continue;
    count += n * it->second;
    sum += v[k] * it->second;
  }
  return {count, sum};
}

std::vector<Item> items_of(const JoinGenerator& g) {
  std::vector<Item> v(g.total_items());
  g.fill(0, v.data(), v.size());
  return v;
}

RippleJoin fed(const std::vector<Item>& items, double rate, std::uint64_t seed) {
  RippleJoin j(rate, seed);
  for (const auto& it : items) j.update(side_of(it), it.key, it.value, static_cast<std::uint64_t>(it.time));
  return j;
}

TEST(JoinGenerator, SizesSidesAndGroundTruthAreExact) {
  const JoinGenerator g(small_streams(3));
  const auto items = items_of(g);
  std::uint64_t r = 0;
  for (std::size_t p = 0; p < items.size(); ++p) {
    EXPECT_EQ(items[p].time, join_time(p, side_of(items[p])));
    r += side_of(items[p]) == Side::R;
    EXPECT_GE(items[p].value, 1);
    EXPECT_LE(items[p].value, 50);
  }
  EXPECT_EQ(r, 3000u);
  const auto [count, sum] = brute_force(items);
  const auto truth = g.exact();
  EXPECT_EQ(truth.count, count);
  EXPECT_EQ(truth.sum, sum);
  EXPECT_GT(truth.count, 10000);  // a non-trivial join
  // Chunking does not matter, and the same seed gives the same stream.
  std::vector<Item> chunked(items.size());
  g.fill(0, chunked.data(), 1234);
  g.fill(1234, chunked.data() + 1234, chunked.size() - 1234);
  EXPECT_EQ(chunked, items);
  EXPECT_EQ(items_of(JoinGenerator(small_streams(3))), items);
  EXPECT_NE(items_of(JoinGenerator(small_streams(4))), items);
  EXPECT_THROW(g.item_at(g.total_items()), ConfigError);
}

TEST(JoinGenerator, ExpectedJoinSizeControlsTheJoin) {
  // Averaged over seeds the exact join is close to |R| |S| sum_k P(k)^2.
  for (const double skew : {0.0, 1.0}) {
    JoinStreamParams p{.r_items = 20000, .s_items = 10000, .keys = 1000, .skew = skew, .seed = 1, .max_value = 10};
    double mean = 0;
    const int seeds = 20;
    for (int s = 1; s <= seeds; ++s) {
      p.seed = s;
      mean += JoinGenerator(p).exact().count / seeds;
    }
    const double expected = JoinGenerator(p).expected_join_count();
    EXPECT_NEAR(mean / expected, 1.0, 0.03) << "skew " << skew;
  }
  EXPECT_DOUBLE_EQ(
      JoinGenerator({.r_items = 100, .s_items = 50, .keys = 10, .skew = 0, .seed = 1}).expected_join_count(),
      100.0 * 50 / 10);
}

TEST(JoinGenerator, RejectsBadParameters) {
  EXPECT_THROW(JoinGenerator({.r_items = 1, .s_items = 1, .keys = 0}), ConfigError);
  EXPECT_THROW(JoinGenerator({.r_items = 0, .s_items = 0, .keys = 5}), ConfigError);
  EXPECT_THROW(JoinGenerator({.r_items = 1, .s_items = 1, .keys = 5, .skew = -1}), ConfigError);
  EXPECT_THROW(JoinGenerator({.r_items = 1, .s_items = 1, .keys = 5, .skew = 1, .seed = 1, .max_value = 0}),
               ConfigError);
}

// Q_k (the sum of the squares of a key's sampled R values) is an int64 in the ripple-join operator: a max-value whose
// squares could overflow it is refused, as a silent overflow made the SUM interval cover in 82% of seeds at 95%
// (afstream run --job join --items 20000 --join.keys 500 --join.max-value 1000000000, seeds 1..40).
TEST(JoinGenerator, RefusesValuesWhoseSquareSumsOverflow) {
  EXPECT_THROW(
      JoinGenerator({.r_items = 10000, .s_items = 10000, .keys = 500, .skew = 1, .seed = 1, .max_value = 1000000000}),
      ConfigError);
  EXPECT_THROW(JoinGenerator({.r_items = 1, .s_items = 1, .keys = 5, .skew = 1, .seed = 1, .max_value = 4000000000LL}),
               ConfigError);
  // r-items * max-value^2 = 9e18 < 2^63: accepted.
  EXPECT_NO_THROW(
      JoinGenerator({.r_items = 1000000, .s_items = 1, .keys = 5, .skew = 1, .seed = 1, .max_value = 3000000}));
}

// The coin compares 53 hash bits with p * 2^53: a rate below 2^-53 is refused (p = 1e-300 gave a NaN estimate,
// p^2 underflowing to 0, and p = 1e-100 a variance of 0/0).
TEST(RippleJoin, RefusesRatesBelowTheCoinsResolution) {
  EXPECT_THROW(RippleJoin(1e-300), ConfigError);
  EXPECT_THROW(RippleJoin(1e-100), ConfigError);
  EXPECT_THROW(RippleJoin(1e-17), ConfigError);
  EXPECT_NO_THROW(RippleJoin(0x1p-53));
  const JoinMoments none{};
  EXPECT_THROW(estimate_from(none, 1e-300, Aggregate::Count), ConfigError);
  const auto e = estimate_from(none, 0x1p-53, Aggregate::Count);
  EXPECT_EQ(e.estimate, 0);
  EXPECT_EQ(e.variance, 0);
}

// The 95% interval covers the exact COUNT (and SUM) in at least 90% of 200 seeded streams, and not suspiciously
// always; the mean relative error is near 0 (the estimators are unbiased).
TEST(RippleJoin, IntervalCoversAtItsStatedRateOverManySeeds) {
  int count_covered = 0, sum_covered = 0;
  double mean_rel = 0, mean_sum_rel = 0;
  const int seeds = 200;
  for (int seed = 1; seed <= seeds; ++seed) {
    const JoinGenerator g(small_streams(seed));
    const auto items = items_of(g);
    const auto [count, sum] = brute_force(items);
    const auto j = fed(items, 0.2, seed * 7 + 1);
    count_covered += j.get_interval(0.95).contains(count);
    sum_covered += j.get_interval(0.95, Aggregate::Sum).contains(sum);
    EXPECT_LE(j.get_lower_bound(0.95), j.get_estimate());
    EXPECT_GE(j.get_upper_bound(0.95), j.get_estimate());
    mean_rel += (j.get_estimate() / count - 1) / seeds;
    mean_sum_rel += (j.get_estimate(Aggregate::Sum) / sum - 1) / seeds;
  }
  EXPECT_GE(count_covered, 180) << "COUNT covered in " << count_covered << " of 200";
  EXPECT_GE(sum_covered, 180) << "SUM covered in " << sum_covered << " of 200";
  EXPECT_LT(count_covered, 200);  // a 95% interval that always covers would be too wide
  EXPECT_NEAR(mean_rel, 0, 0.02);
  EXPECT_NEAR(mean_sum_rel, 0, 0.02);
}

// On one fixed pair of streams, over 1500 sampler seeds: the mean estimate is the exact join (unbiased) and the mean
// of the variance estimates is the empirical variance of the estimates (the variance estimator is unbiased).
TEST(RippleJoin, EstimatorAndVarianceEstimatorAreUnbiased) {
  const JoinGenerator g(small_streams(11));
  const auto items = items_of(g);
  const auto [count, sum] = brute_force(items);
  const int n = 1500;
  for (const Aggregate a : {Aggregate::Count, Aggregate::Sum}) {
    const double exact = a == Aggregate::Count ? count : sum;
    double mean = 0, mean_var = 0, sq = 0;
    for (int s = 1; s <= n; ++s) {
      const auto j = fed(items, 0.3, 1000 + s);
      const double e = j.get_estimate(a);
      mean += e / n;
      sq += (e - exact) * (e - exact) / n;
      mean_var += j.get_variance(a) / n;
    }
    EXPECT_NEAR(mean / exact, 1, 3 * std::sqrt(sq / n) / exact);
    EXPECT_NEAR(mean_var / sq, 1, 0.12) << "aggregate " << static_cast<int>(a);
  }
}

TEST(RippleJoin, EverythingSampledAtRateOneGivesTheExactJoinAndZeroWidth) {
  const auto items = items_of(JoinGenerator(small_streams(5)));
  const auto [count, sum] = brute_force(items);
  const auto j = fed(items, 1.0, 9);
  EXPECT_EQ(j.num_samples(), items.size());
  EXPECT_EQ(j.get_estimate(), count);
  EXPECT_EQ(j.get_estimate(Aggregate::Sum), sum);
  EXPECT_EQ(j.get_variance(), 0);
  EXPECT_EQ(j.get_lower_bound(0.99), count);
  EXPECT_EQ(j.get_upper_bound(0.99), count);
}

// Below rate 1 a sample without a join pair says nothing about how large the join is: the interval is [0, +inf) for
// COUNT (and unbounded for SUM), not [0, 0]. At rate 1 nothing was left out: an empty join is exactly 0.
TEST(RippleJoin, NoSampledPairGivesAnUnboundedInterval) {
  RippleJoin j(0.01, 3);
  j.add_sample(Side::R, 1, 5);
  j.add_sample(Side::S, 2, 0);
  EXPECT_EQ(j.get_estimate(), 0);
  EXPECT_EQ(j.get_lower_bound(0.95), 0);
  EXPECT_TRUE(std::isinf(j.get_upper_bound(0.95)));
  const auto sum = j.get_interval(0.95, Aggregate::Sum);
  EXPECT_TRUE(std::isinf(sum.lower) && std::isinf(sum.upper));
  RippleJoin all(1.0, 3);
  all.add_sample(Side::R, 1, 5);
  all.add_sample(Side::S, 2, 0);
  EXPECT_EQ(all.get_lower_bound(0.95), 0);
  EXPECT_EQ(all.get_upper_bound(0.95), 0);
}

TEST(RippleJoin, HandComputedEstimateAndVariance) {
  RippleJoin j(0.5, 1);
  // key 1: a = 2 (values 3, 4), b = 3; key 2: a = 1 (value 5), b = 0; key 3: b = 1.
  j.add_sample(Side::R, 1, 3);
  j.add_sample(Side::R, 1, 4);
  for (int i = 0; i < 3; ++i) j.add_sample(Side::S, 1, 0);
  j.add_sample(Side::R, 2, 5);
  j.add_sample(Side::S, 3, 0);
  EXPECT_EQ(j.num_samples(), 7u);
  EXPECT_DOUBLE_EQ(j.get_estimate(), 2 * 3 / 0.25);
  // q / p^4 * a b (a + b - q) = 0.5 / 0.0625 * 6 * 4.5
  EXPECT_DOUBLE_EQ(j.get_variance(), 0.5 / 0.0625 * 6 * 4.5);
  EXPECT_DOUBLE_EQ(j.get_estimate(Aggregate::Sum), 7 * 3 / 0.25);
  // q / p^4 * (A^2 b + Q b^2 - q Q b) with A = 7, Q = 25, b = 3
  EXPECT_DOUBLE_EQ(j.get_variance(Aggregate::Sum), 0.5 / 0.0625 * (49 * 3 + 25 * 9 - 0.5 * 25 * 3));
  const double z = RippleJoin::z_for_confidence(0.9);
  EXPECT_NEAR(z, 1.6448536269514722, 1e-12);
  EXPECT_DOUBLE_EQ(j.get_upper_bound(0.9), 24 + z * std::sqrt(j.get_variance()));
}

TEST(RippleJoin, ZForConfidence) {
  EXPECT_NEAR(RippleJoin::z_for_confidence(0.95), 1.959963984540054, 1e-12);
  EXPECT_NEAR(RippleJoin::z_for_confidence(0.99), 2.5758293035489004, 1e-12);
  EXPECT_THROW(RippleJoin::z_for_confidence(1), ConfigError);
  EXPECT_THROW(RippleJoin::z_for_confidence(0), ConfigError);
  EXPECT_THROW(RippleJoin(0), ConfigError);
  EXPECT_THROW(RippleJoin(1.5), ConfigError);
}

// Theorem 3: with up to M of the n samples lost the half-width is sqrt(n / (n - M)) times the plain one; unbounded
// once M >= n. COUNT intervals do not go below 0.
TEST(RippleJoin, Theorem3WideningOfTheInterval) {
  const auto j = fed(items_of(JoinGenerator(small_streams(2))), 0.2, 3);
  const double n = static_cast<double>(j.num_samples());
  const auto plain = j.get_interval(0.95, Aggregate::Sum);
  for (const double lost : {1.0, n / 4, n / 2, n - 1}) {
    const auto wide = j.get_interval(0.95, Aggregate::Sum, lost);
    EXPECT_NEAR((wide.upper - wide.lower) / (plain.upper - plain.lower), std::sqrt(n / (n - lost)), 1e-9);
    EXPECT_LE(wide.lower, plain.lower);
    EXPECT_GE(wide.upper, plain.upper);
  }
  EXPECT_EQ(j.get_upper_bound(0.95, Aggregate::Count, n), std::numeric_limits<double>::infinity());
  EXPECT_EQ(j.get_lower_bound(0.95, Aggregate::Count, n), 0);
  EXPECT_THROW(j.get_interval(0.95, Aggregate::Count, -1), ConfigError);
}

// Per-key statistics add: sketches over key partitions merge to the sketch of the whole stream, in any grouping,
// and the moments of disjoint partitions add up to the whole's (what the join-merge sink relies on).
TEST(RippleJoin, MergeOfKeyPartitionsEqualsOneSketchAndIsAssociative) {
  const auto items = items_of(JoinGenerator(small_streams(8)));
  const auto whole = fed(items, 0.25, 5);
  std::vector<RippleJoin> parts(3, RippleJoin(0.25, 5));
  for (const auto& it : items) {
    parts[key_partition(it.key, 3)].update(side_of(it), it.key, it.value, static_cast<std::uint64_t>(it.time));
  }
  RippleJoin left = parts[0];
  left.merge(parts[1]);
  left.merge(parts[2]);
  RippleJoin right = parts[1];
  right.merge(parts[2]);
  RippleJoin right_all = parts[0];
  right_all.merge(right);
  EXPECT_EQ(left, whole);
  EXPECT_EQ(right_all, whole);
  JoinMoments sum;
  for (const auto& p : parts) sum += p.moments();
  EXPECT_EQ(sum, whole.moments());
  EXPECT_THROW(left.merge(RippleJoin(0.5, 5)), std::invalid_argument);
  EXPECT_THROW(left.merge(RippleJoin(0.25, 6)), std::invalid_argument);
}

TEST(RippleJoin, SizingHelpersHitTheirTarget) {
  const JoinGenerator g(small_streams(1));
  // Expected per-key counts of the generator's Zipf model.
  std::vector<double> r, s;
  const double keys = 400;
  hh::ZipfGenerator z({.num_keys = 400, .skew = 0.8, .total_items = 1, .seed = 1});
  for (std::uint64_t k = 0; k < 400; ++k) {
    r.push_back(3000 * z.probability(k));
    s.push_back(2000 * z.probability(k));
  }
  for (const double target : {0.02, 0.05, 0.2}) {
    const double p = RippleJoin::sample_rate_for(target, 0.95, r, s);
    EXPECT_GT(p, 0);
    EXPECT_LT(p, 1);
    EXPECT_NEAR(RippleJoin::relative_half_width(p, 0.95, r, s), target, target * 1e-3);
  }
  // A larger rate gives a narrower interval; the uniform helper equals the general one on equal per-key counts.
  EXPECT_LT(RippleJoin::relative_half_width(0.5, 0.95, r, s), RippleJoin::relative_half_width(0.1, 0.95, r, s));
  const std::vector<double> ru(400, 3000 / keys), su(400, 2000 / keys);
  EXPECT_NEAR(RippleJoin::sample_rate_for_uniform(0.05, 0.95, 3000, 2000, 400),
              RippleJoin::sample_rate_for(0.05, 0.95, ru, su), 1e-3);
  // Empirically: at the suggested rate the observed relative half-width is close to the target.
  const double p = RippleJoin::sample_rate_for(0.1, 0.95, r, s);
  double mean_half = 0;
  for (int seed = 1; seed <= 50; ++seed) {
    const JoinGenerator gs(small_streams(seed));
    const auto items = items_of(gs);
    const auto j = fed(items, p, seed);
    mean_half += (j.get_upper_bound(0.95) - j.get_estimate()) / gs.exact().count / 50;
  }
  EXPECT_NEAR(mean_half, 0.1, 0.03);
  EXPECT_EQ(RippleJoin::sample_rate_for(1e-9, 0.95, r, s), 1);
  EXPECT_THROW(RippleJoin::sample_rate_for(0, 0.95, r, s), ConfigError);
  (void)g;
}

TEST(RippleJoin, SerializeRoundTripsAndRejectsEveryTruncationAndCorruption) {
  const auto j =
      fed(items_of(JoinGenerator({.r_items = 300, .s_items = 200, .keys = 40, .skew = 1, .seed = 4})), 0.3, 2);
  ASSERT_GT(j.num_keys(), 5u);
  ByteWriter w;
  j.serialize(w);
  const std::vector<std::uint8_t> good = w.take();
  ByteReader r(good);
  EXPECT_EQ(RippleJoin::deserialize(r), j);
  EXPECT_EQ(r.position(), good.size());
  for (std::size_t len = 0; len < good.size(); ++len) {
    ByteReader t(std::span<const std::uint8_t>(good.data(), len));
    EXPECT_THROW(RippleJoin::deserialize(t), FormatError) << "prefix of " << len << " bytes";
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::vector<std::uint8_t> bad = good;
    bad[i] ^= 0x20;
    ByteReader t(bad);
    EXPECT_THROW(RippleJoin::deserialize(t), FormatError) << "byte " << i << " flipped";
  }
  // Equal sketches give equal bytes whatever their history (keys are written in order).
  RippleJoin again(0.3, 2);
  again.merge(j);
  ByteWriter w2;
  again.serialize(w2);
  EXPECT_EQ(w2.take(), good);
}

}  // namespace
}  // namespace afs::join
