// Unit tests of afs::hh::ZipfGenerator: seekability (any chunking gives the same stream), the empirical distribution
// against probability(), the rank <-> key bijection, and parameter validation.
#include "algorithms/heavy_hitters/zipf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs::hh {
namespace {

using afs::testing::expect_throw_mentioning;

std::vector<Item> fill_chunked(const ZipfGenerator& gen, std::uint64_t begin, std::uint64_t end,
                               const std::vector<std::size_t>& chunk_sizes) {
  std::vector<Item> out(end - begin);
  std::uint64_t pos = begin;
  for (std::size_t c = 0; pos < end; ++c) {
    const std::size_t len = std::min<std::uint64_t>(chunk_sizes[c % chunk_sizes.size()], end - pos);
    gen.fill(pos, out.data() + (pos - begin), len);
    pos += len;
  }
  return out;
}

TEST(ZipfGenerator, ItemsCarryKeyValueOneAndPositionAsTime) {
  const ZipfGenerator gen({.num_keys = 100, .skew = 1.1, .total_items = 1000, .seed = 3});
  std::vector<Item> items(1000);
  gen.fill(0, items);
  for (std::size_t p = 0; p < items.size(); ++p) {
    EXPECT_EQ(items[p].value, 1);
    EXPECT_EQ(items[p].time, static_cast<std::int64_t>(p));
    EXPECT_EQ(items[p].seq, 0u);
    const auto rank = gen.rank_of_key(items[p].key);
    ASSERT_TRUE(rank.has_value());
    EXPECT_EQ(*rank, gen.rank_at(p));
    EXPECT_EQ(items[p], gen.item_at(p));
  }
}

TEST(ZipfGenerator, AnyChunkingGivesTheSameStream) {
  const ZipfGenerator gen({.num_keys = 1000, .skew = 1.1, .total_items = 20'000, .seed = 5});
  const auto whole = fill_chunked(gen, 0, 20'000, {20'000});
  std::mt19937_64 rng(1);
  std::vector<std::size_t> random_sizes;
  for (int i = 0; i < 100; ++i) random_sizes.push_back(1 + rng() % 700);
  for (const auto& sizes : std::vector<std::vector<std::size_t>>{{1}, {3}, {64}, {4096}, {19'999}, random_sizes}) {
    EXPECT_EQ(fill_chunked(gen, 0, 20'000, sizes), whole) << "first chunk size " << sizes[0];
  }
  // Starting in the middle (a source restarting from an offset) and a fresh generator with the same parameters.
  const auto tail = fill_chunked(gen, 12'345, 20'000, random_sizes);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + 12'345));
  const ZipfGenerator twin(gen.params());
  EXPECT_EQ(fill_chunked(twin, 0, 20'000, {777}), whole);
}

TEST(ZipfGenerator, SeedsSelectDifferentStreams) {
  const ZipfGenerator a({.num_keys = 1000, .skew = 1.1, .total_items = 1000, .seed = 1});
  const ZipfGenerator b({.num_keys = 1000, .skew = 1.1, .total_items = 1000, .seed = 2});
  std::size_t same = 0;
  for (std::uint64_t p = 0; p < 1000; ++p) same += a.rank_at(p) == b.rank_at(p);
  EXPECT_LT(same, 100u);  // P(same rank) = sum p_k^2, about 0.05 here
}

// Generators of one distribution share the alias table (a restarted source does not build it again); a generator
// built alone, once the others are gone, gives the same stream from a table of its own.
TEST(ZipfGenerator, GeneratorsOfOneDistributionShareTheirTable) {
  const ZipfParams p{.num_keys = 5000, .skew = 1.1, .total_items = 10000, .seed = 3};
  std::vector<Item> first(p.total_items), again(p.total_items);
  {
    const ZipfGenerator a(p);
    const ZipfGenerator b({.num_keys = 5000, .skew = 1.1, .total_items = 20, .seed = 9});
    const ZipfGenerator other_skew({.num_keys = 5000, .skew = 1.2, .total_items = 10000, .seed = 3});
    const ZipfGenerator other_n({.num_keys = 5001, .skew = 1.1, .total_items = 10000, .seed = 3});
    const ZipfGenerator copy = a;
    EXPECT_TRUE(a.shares_table_with(b));
    EXPECT_TRUE(a.shares_table_with(copy));
    EXPECT_FALSE(a.shares_table_with(other_skew));
    EXPECT_FALSE(a.shares_table_with(other_n));
    a.fill(0, first);
  }
  const ZipfGenerator alone(p);
  alone.fill(0, again);
  EXPECT_EQ(again, first);
}

TEST(ZipfGenerator, ProbabilitiesFollowZipfAndSumToOne) {
  const ZipfGenerator gen({.num_keys = 100'000, .skew = 1.1, .total_items = 1, .seed = 0});
  double sum = 0.0;
  for (std::uint64_t k = 0; k < 100'000; ++k) sum += gen.probability(k);
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_NEAR(gen.probability(1) / gen.probability(0), std::pow(2.0, -1.1), 1e-12);
  EXPECT_NEAR(gen.probability(9) / gen.probability(0), std::pow(10.0, -1.1), 1e-12);
  EXPECT_EQ(gen.probability(100'000), 0.0);
  const ZipfGenerator uniform({.num_keys = 50, .skew = 0.0, .total_items = 1, .seed = 0});
  EXPECT_DOUBLE_EQ(uniform.probability(0), 0.02);
  EXPECT_DOUBLE_EQ(uniform.probability(49), 0.02);
}

// Frequencies of the top ranks and of the tail agree with probability() within 5 standard deviations.
void expect_frequencies_match(const ZipfGenerator& gen, std::uint64_t top) {
  const std::uint64_t n = gen.total_items();
  const auto counts = gen.exact_counts(0, n);
  auto expect_close = [&](double observed, double p, const std::string& what) {
    const double sigma = std::sqrt(std::max(0.0, p * (1 - p)) / static_cast<double>(n));
    EXPECT_NEAR(observed, p, 5 * sigma + 1e-9) << what;
  };
  double top_mass = 0.0, top_observed = 0.0;
  for (std::uint64_t k = 0; k < top; ++k) {
    const auto it = counts.find(ZipfGenerator::key_of_rank(k));
    const double observed = it == counts.end() ? 0.0 : static_cast<double>(it->second) / static_cast<double>(n);
    expect_close(observed, gen.probability(k), "rank " + std::to_string(k));
    top_mass += gen.probability(k);
    top_observed += observed;
  }
  expect_close(top_observed, top_mass, "mass of the top ranks");
  std::int64_t total = 0;
  for (const auto& [key, c] : counts) {
    ASSERT_TRUE(gen.rank_of_key(key).has_value());
    total += c;
  }
  EXPECT_EQ(total, static_cast<std::int64_t>(n));
}

TEST(ZipfGenerator, FrequenciesMatchForSkew1_1) {
  expect_frequencies_match(ZipfGenerator({.num_keys = 100'000, .skew = 1.1, .total_items = 2'000'000, .seed = 7}), 50);
}

TEST(ZipfGenerator, FrequenciesMatchForUniformAndSteepSkews) {
  expect_frequencies_match(ZipfGenerator({.num_keys = 100, .skew = 0.0, .total_items = 200'000, .seed = 8}), 100);
  expect_frequencies_match(ZipfGenerator({.num_keys = 1000, .skew = 0.5, .total_items = 200'000, .seed = 9}), 100);
  expect_frequencies_match(ZipfGenerator({.num_keys = 10'000, .skew = 2.5, .total_items = 200'000, .seed = 10}), 20);
  expect_frequencies_match(ZipfGenerator({.num_keys = 1, .skew = 1.1, .total_items = 1000, .seed = 11}), 1);
}

// Skew 0 builds no alias table (every column would keep its own rank): the same stream as the table gives (a skew of
// 1e-300 builds one whose every weight is exactly 1), and the largest key space costs no memory per key.
TEST(ZipfGenerator, UniformDrawsNeedNoTable) {
  ZipfParams u;
  u.num_keys = 1000;
  u.skew = 0;
  u.total_items = 5000;
  u.seed = 3;
  ZipfParams t = u;
  t.skew = 1e-300;
  const ZipfGenerator a(u), b(t);
  std::vector<Item> x(5000), y(5000);
  a.fill(0, x.data(), x.size());
  b.fill(0, y.data(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].key, y[i].key) << i;
    ASSERT_EQ(a.rank_at(i), b.rank_at(i)) << i;
  }
  EXPECT_DOUBLE_EQ(a.probability(7), 1e-3);
  u.num_keys = ZipfGenerator::kMaxKeys;  // 4e9 keys: 80 GB of table if it were built
  const ZipfGenerator huge(u);
  huge.fill(0, x.data(), x.size());
  EXPECT_TRUE(huge.rank_of_key(x[0].key).has_value());
}

TEST(ZipfGenerator, KeyOfRankIsInjectiveAndInvertible) {
  const ZipfGenerator gen({.num_keys = 1'000'000, .skew = 1.1, .total_items = 1, .seed = 0});
  std::unordered_set<std::uint64_t> keys;
  keys.reserve(1'000'000);
  std::size_t ascending = 0;
  for (std::uint64_t r = 0; r < 1'000'000; ++r) {
    const std::uint64_t key = ZipfGenerator::key_of_rank(r);
    keys.insert(key);
    ASSERT_EQ(gen.rank_of_key(key), r);
    if (r > 0) ascending += ZipfGenerator::key_of_rank(r - 1) < key;
  }
  EXPECT_EQ(keys.size(), 1'000'000u);
  EXPECT_NE(ZipfGenerator::key_of_rank(0), 0u);
  EXPECT_NEAR(static_cast<double>(ascending) / 999'999.0, 0.5, 0.01);  // keys are not in rank order
  EXPECT_FALSE(gen.rank_of_key(ZipfGenerator::key_of_rank(1'000'000)).has_value());
  EXPECT_FALSE(gen.rank_of_key(ZipfGenerator::key_of_rank(~std::uint64_t{0})).has_value());
}

TEST(ZipfGenerator, RejectsBadParametersNamingThem) {
  expect_throw_mentioning<ConfigError>([] { ZipfGenerator({.num_keys = 0, .skew = 1.0, .total_items = 10}); },
                                       "num_keys");
  expect_throw_mentioning<ConfigError>(
      [] { ZipfGenerator({.num_keys = ZipfGenerator::kMaxKeys + 1, .skew = 1.0, .total_items = 10}); }, "num_keys");
  for (double s :
       {-0.1, std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    expect_throw_mentioning<ConfigError>([&] { ZipfGenerator({.num_keys = 10, .skew = s, .total_items = 10}); },
                                         "skew");
  }
  expect_throw_mentioning<ConfigError>(
      [] { ZipfGenerator({.num_keys = 10, .skew = 1.0, .total_items = std::uint64_t{1} << 63}); }, "total_items");
}

TEST(ZipfGenerator, RejectsRangesPastTheEnd) {
  const ZipfGenerator gen({.num_keys = 10, .skew = 1.0, .total_items = 100, .seed = 1});
  std::vector<Item> buf(10);
  EXPECT_NO_THROW(gen.fill(90, buf.data(), 10));
  EXPECT_NO_THROW(gen.fill(100, buf.data(), 0));
  expect_throw_mentioning<ConfigError>([&] { gen.fill(91, buf.data(), 10); }, "total_items");
  expect_throw_mentioning<ConfigError>([&] { gen.fill(~std::uint64_t{0} - 2, buf.data(), 10); }, "total_items");
  expect_throw_mentioning<ConfigError>([&] { gen.exact_counts(0, 101); }, "total_items");
  expect_throw_mentioning<ConfigError>([&] { gen.exact_counts(50, 40); }, "offset_begin");
  EXPECT_TRUE(gen.exact_counts(40, 40).empty());

  // The last positions of the largest allowed stream.
  const auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const ZipfGenerator huge({.num_keys = 10, .skew = 1.0, .total_items = max, .seed = 1});
  huge.fill(max - 10, buf.data(), 10);
  EXPECT_EQ(buf[9].time, std::numeric_limits<std::int64_t>::max() - 1);
}

}  // namespace
}  // namespace afs::hh
