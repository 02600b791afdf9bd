// Unit tests of afs::hh::CountMin and CountMinHash: the Count-Min guarantees behind Theorem 2 of [J] (no
// underestimate; error > eps*N with probability <= delta), merge, Theorem 2 compensation, external counter arrays,
// and the versioned snapshot (round trip, every truncation and corruption rejected).
#include "algorithms/heavy_hitters/count_min.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "tests/error_message.h"

namespace afs::hh {
namespace {

using afs::testing::expect_throw_mentioning;

std::vector<Item> zipf_stream(std::uint64_t num_keys, double skew, std::uint64_t n, std::uint64_t seed) {
  ZipfGenerator gen({.num_keys = num_keys, .skew = skew, .total_items = n, .seed = seed});
  std::vector<Item> items(n);
  gen.fill(0, items);
  return items;
}

std::unordered_map<std::uint64_t, std::int64_t> exact_of(const std::vector<Item>& items) {
  std::unordered_map<std::uint64_t, std::int64_t> exact;
  for (const Item& it : items) exact[it.key] += it.value;
  return exact;
}

std::vector<std::uint8_t> serialize(const CountMin& cm) {
  ByteWriter w;
  cm.serialize(w);
  return w.take();
}

CountMin deserialize(const std::vector<std::uint8_t>& bytes) {
  ByteReader r(bytes);
  return CountMin::deserialize(r);
}

TEST(CountMinSizing, FollowsTheFormulas) {
  EXPECT_EQ(CountMin::width_for_epsilon(1e-4), 27183u);  // ceil(e / 1e-4)
  EXPECT_EQ(CountMin::width_for_epsilon(0.01), 272u);
  EXPECT_EQ(CountMin::width_for_epsilon(0.5), 6u);
  EXPECT_EQ(CountMin::depth_for_delta(0.01), 5u);  // ceil(ln 100) = ceil(4.605)
  EXPECT_EQ(CountMin::depth_for_delta(0.05), 3u);
  EXPECT_EQ(CountMin::depth_for_delta(0.5), 1u);
  EXPECT_EQ(CountMin::depth_for_delta(0.9), 1u);

  const CountMin cm = CountMin::from_error(1e-4, 0.01, 7);
  EXPECT_EQ(cm.width(), 27183u);
  EXPECT_EQ(cm.depth(), 5u);
  EXPECT_EQ(cm.seed(), 7u);
  EXPECT_EQ(cm.counters().size(), 27183u * 5u);
  EXPECT_LE(cm.epsilon(), 1e-4);
  EXPECT_LE(cm.delta(), 0.01);
}

TEST(CountMinSizing, RejectsBadErrorParameters) {
  for (double eps : {0.0, -0.1, 1.0, 2.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    expect_throw_mentioning<ConfigError>([&] { CountMin::width_for_epsilon(eps); }, "epsilon");
  }
  expect_throw_mentioning<ConfigError>([] { CountMin::width_for_epsilon(1e-12); }, "epsilon");
  for (double delta : {0.0, -0.5, 1.0, 3.0, std::nan("")}) {
    expect_throw_mentioning<ConfigError>([&] { CountMin::depth_for_delta(delta); }, "delta");
  }
  expect_throw_mentioning<ConfigError>([] { CountMin::depth_for_delta(1e-300); }, "delta");
  expect_throw_mentioning<ConfigError>([] { CountMin::from_error(0.0, 0.1, 1); }, "epsilon");
}

TEST(CountMinConstruction, RejectsBadShapeNamingTheParameter) {
  expect_throw_mentioning<ConfigError>([] { CountMin(0, 4, 1); }, "width");
  expect_throw_mentioning<ConfigError>([] { CountMin(8000, 0, 1); }, "depth");
  expect_throw_mentioning<ConfigError>([] { CountMin(8000, CountMinHash::kMaxDepth + 1, 1); }, "depth");
  expect_throw_mentioning<ConfigError>([] { CountMin(CountMinHash::kMaxWidth + 1, 1, 1); }, "width");
  expect_throw_mentioning<ConfigError>([] { CountMin(static_cast<std::size_t>(-1), 4, 1); }, "width");
  expect_throw_mentioning<ConfigError>([] { CountMin(std::size_t{1} << 28, 8, 1); }, "counters");
}

TEST(CountMin, CountsExactlyWithoutCollisions) {
  CountMin single(1 << 16, 1, 3);
  EXPECT_EQ(single.estimate(42), 0);
  single.update(42);
  single.update(42, 9);
  EXPECT_EQ(single.estimate(42), 10);
  EXPECT_EQ(single.total_count(), 10);
  EXPECT_EQ(single.estimate(43), 0);  // alone in a 65536-wide row
}

TEST(CountMin, NeverUnderestimates) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    // A small sketch (many collisions) and weighted updates.
    CountMin cm(64, 3, seed);
    const auto items = zipf_stream(5000, 1.1, 50'000, seed);
    std::mt19937_64 rng(seed);
    std::unordered_map<std::uint64_t, std::int64_t> exact;
    for (const Item& it : items) {
      const auto c = static_cast<std::int64_t>(rng() % 100);
      cm.update(it.key, c);
      exact[it.key] += c;
    }
    for (const auto& [key, count] : exact) ASSERT_GE(cm.estimate(key), count) << "key " << key << " seed " << seed;
  }
}

TEST(CountMin, ErrorAboveEpsilonNIsRarerThanDelta) {
  // Per key, P(estimate - T > eps * N) <= delta; averaged over keys and many seeds the fraction must stay below delta.
  const double eps = 0.01, delta = 0.05;
  const int kSeeds = 40;
  const std::uint64_t kItems = 100'000;
  double fraction_sum = 0.0, worst = 0.0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    CountMin cm = CountMin::from_error(eps, delta, 1000 + seed);
    const auto items = zipf_stream(5000, 0.8, kItems, seed);
    for (const Item& it : items) cm.update(it.key);
    const auto exact = exact_of(items);
    std::size_t bad = 0;
    for (const auto& [key, count] : exact) {
      const std::int64_t err = cm.estimate(key) - count;
      ASSERT_GE(err, 0);
      if (static_cast<double>(err) > eps * static_cast<double>(kItems)) ++bad;
    }
    const double fraction = static_cast<double>(bad) / static_cast<double>(exact.size());
    fraction_sum += fraction;
    worst = std::max(worst, fraction);
    EXPECT_LE(cm.error_bound(), eps * static_cast<double>(kItems));
  }
  EXPECT_LE(fraction_sum / kSeeds, delta);
  EXPECT_LE(worst, 2 * delta);
}

TEST(CountMinHash, BucketsAreInTheirRowAndColumnsAreUniform) {
  const std::size_t w = 257;
  const CountMinHash hash(w, 4, 99);
  for (int row = 0; row < 4; ++row) {
    // Sequential keys (the adversarial case for weak hashes): chi-square of the column counts.
    std::vector<double> counts(w, 0.0);
    const std::uint64_t n = w * 100;
    for (std::uint64_t key = 0; key < n; ++key) {
      const std::size_t b = hash.bucket(row, key);
      ASSERT_GE(b, static_cast<std::size_t>(row) * w);
      ASSERT_LT(b, static_cast<std::size_t>(row + 1) * w);
      EXPECT_EQ(b, row * w + hash.column(row, key));
      counts[b - row * w] += 1.0;
    }
    double chi2 = 0.0;
    for (double c : counts) chi2 += (c - 100.0) * (c - 100.0) / 100.0;
    EXPECT_LT(chi2, 256 + 6 * std::sqrt(2.0 * 256)) << "row " << row;  // df = 256, ~6 sigma
  }
}

TEST(CountMinHash, RowsCollideIndependently) {
  const std::size_t w = 50;
  const CountMinHash hash(w, 2, 5);
  const std::uint64_t n = 3000;
  std::vector<std::size_t> c0(n), c1(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    c0[k] = hash.column(0, k * 7919);
    c1[k] = hash.column(1, k * 7919);
  }
  double pairs = 0, both = 0, first = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    for (std::uint64_t j = i + 1; j < n; ++j) {
      pairs += 1;
      const bool a = c0[i] == c0[j], b = c1[i] == c1[j];
      first += a;
      both += a && b;
    }
  }
  const double p = 1.0 / static_cast<double>(w);
  EXPECT_NEAR(first / pairs, p, 0.1 * p);
  EXPECT_NEAR(both / pairs, p * p, 0.25 * p * p);
}

TEST(CountMin, SameSeedSameSketchDifferentSeedDifferentHashing) {
  const auto items = zipf_stream(1000, 1.1, 10'000, 1);
  CountMin a(128, 4, 11), b(128, 4, 11), c(128, 4, 12);
  for (const Item& it : items) {
    a.update(it.key);
    b.update(it.key);
    c.update(it.key);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(std::vector<std::int64_t>(a.counters().begin(), a.counters().end()),
            std::vector<std::int64_t>(c.counters().begin(), c.counters().end()));
}

TEST(CountMin, MergeEqualsOneSketchOverTheConcatenation) {
  const auto items = zipf_stream(2000, 1.1, 30'000, 8);
  CountMin whole(512, 4, 21), first(512, 4, 21), second(512, 4, 21);
  for (std::size_t i = 0; i < items.size(); ++i) {
    whole.update(items[i].key, 2);
    (i < 12'345 ? first : second).update(items[i].key, 2);
  }
  first.merge(second);
  EXPECT_EQ(first, whole);
  EXPECT_EQ(first.total_count(), 60'000);
}

TEST(CountMin, MergeIsAssociativeAndCommutative) {
  const auto items = zipf_stream(2000, 1.1, 30'000, 9);
  CountMin a(256, 3, 4), b(256, 3, 4), c(256, 3, 4);
  for (std::size_t i = 0; i < items.size(); ++i) (i % 3 == 0 ? a : i % 3 == 1 ? b : c).update(items[i].key);
  CountMin ab_c = a;
  ab_c.merge(b);
  ab_c.merge(c);
  CountMin bc = b;
  bc.merge(c);
  CountMin a_bc = a;
  a_bc.merge(bc);
  CountMin cba = c;
  cba.merge(b);
  cba.merge(a);
  EXPECT_EQ(ab_c, a_bc);
  EXPECT_EQ(ab_c, cba);
}

TEST(CountMin, MergeRejectsDifferentShapeOrSeed) {
  CountMin a(256, 3, 4);
  expect_throw_mentioning<ConfigError>([&] { a.merge(CountMin(257, 3, 4)); }, "width");
  expect_throw_mentioning<ConfigError>([&] { a.merge(CountMin(256, 4, 4)); }, "depth");
  expect_throw_mentioning<ConfigError>([&] { a.merge(CountMin(256, 3, 5)); }, "seed");
  EXPECT_EQ(a, CountMin(256, 3, 4));  // unchanged
}

TEST(CountMin, AddToAllRaisesEveryEstimateButNotTheTotal) {
  CountMin cm(100, 3, 1);
  for (std::uint64_t k = 0; k < 500; ++k) cm.update(k, static_cast<std::int64_t>(k % 7));
  std::vector<std::int64_t> before;
  for (std::uint64_t k = 0; k < 1000; ++k) before.push_back(cm.estimate(k));
  const auto total = cm.total_count();
  cm.add_to_all(17);
  for (std::uint64_t k = 0; k < 1000; ++k) EXPECT_EQ(cm.estimate(k), before[k] + 17);
  for (std::int64_t v : cm.counters()) EXPECT_GE(v, 17);
  EXPECT_EQ(cm.total_count(), total);
}

TEST(CountMin, Theorem2CompensationRestoresNoFalseNegatives) {
  // A backup taken at position B, then Theta items are processed but lost at a failure; after restoring the backup
  // and adding Theta to every counter (Theorem 2, k = 1 with Theta counting the lost divergence), no key is
  // underestimated relative to the full stream.
  const auto items = zipf_stream(3000, 1.1, 40'000, 12);
  const std::size_t backup_at = 15'000, theta = 2'000;
  CountMin live(272, 3, 77);
  for (std::size_t i = 0; i < backup_at; ++i) live.update(items[i].key);
  const CountMin backup = live;
  CountMin restored = backup;  // items [backup_at, backup_at + theta) are lost
  restored.add_to_all(static_cast<std::int64_t>(theta));
  for (std::size_t i = backup_at + theta; i < items.size(); ++i) restored.update(items[i].key);
  const auto exact = exact_of(items);
  for (const auto& [key, count] : exact) ASSERT_GE(restored.estimate(key), count);
  // Without compensation the hottest key is underestimated.
  CountMin uncompensated = backup;
  for (std::size_t i = backup_at + theta; i < items.size(); ++i) uncompensated.update(items[i].key);
  const std::uint64_t hottest = ZipfGenerator::key_of_rank(0);
  EXPECT_LT(uncompensated.estimate(hottest), exact.at(hottest));
}

TEST(CountMin, ExternalCounterArrayMatchesTheSketch) {
  const auto items = zipf_stream(1000, 1.1, 20'000, 3);
  CountMin cm(300, 4, 8);
  std::vector<std::int64_t> external(cm.hash().size(), 0);
  std::vector<std::int64_t> by_bucket(cm.hash().size(), 0);
  for (const Item& it : items) {
    cm.update(it.key, 3);
    cm.hash().for_each_bucket(it.key, [&](std::size_t i) { external[i] += 3; });
    for (int row = 0; row < 4; ++row) by_bucket[cm.bucket(row, it.key)] += 3;
  }
  EXPECT_EQ(external, std::vector<std::int64_t>(cm.counters().begin(), cm.counters().end()));
  EXPECT_EQ(by_bucket, external);
  const CountMinHash same(300, 4, 8);  // an operator holding only the hash and its own array
  for (std::uint64_t k = 0; k < 2000; ++k) {
    const std::uint64_t key = ZipfGenerator::key_of_rank(k);
    EXPECT_EQ(CountMin::estimate_from(external, same, key), cm.estimate(key));
  }
}

TEST(CountMinSnapshot, RoundTripAndContinueEqualsUninterrupted) {
  const auto items = zipf_stream(1000, 1.1, 20'000, 4);
  CountMin cm(333, 5, 0xdeadbeef), uninterrupted(333, 5, 0xdeadbeef);
  for (std::size_t i = 0; i < 10'000; ++i) cm.update(items[i].key);
  cm.add_to_all(-3);
  CountMin restored = deserialize(serialize(cm));
  EXPECT_EQ(restored, cm);
  EXPECT_EQ(restored.width(), 333u);
  EXPECT_EQ(restored.depth(), 5u);
  EXPECT_EQ(restored.seed(), 0xdeadbeefu);
  EXPECT_EQ(restored.total_count(), 10'000);
  for (std::size_t i = 10'000; i < items.size(); ++i) {
    cm.update(items[i].key);
    restored.update(items[i].key);
  }
  EXPECT_EQ(restored, cm);
}

TEST(CountMinSnapshot, ReaderStopsRightAfterTheSketch) {
  CountMin a(16, 2, 1), b(32, 3, 2);
  a.update(5, 7);
  b.update(6, 8);
  ByteWriter w;
  a.serialize(w);
  b.serialize(w);
  w.put<std::uint32_t>(0xabcd);
  const auto bytes = w.take();
  ByteReader r(bytes);
  EXPECT_EQ(CountMin::deserialize(r), a);
  EXPECT_EQ(CountMin::deserialize(r), b);
  EXPECT_EQ(r.get<std::uint32_t>(), 0xabcdu);
  EXPECT_TRUE(r.at_end());
}

TEST(CountMinSnapshot, RejectsEveryTruncation) {
  CountMin cm(16, 3, 5);
  for (std::uint64_t k = 0; k < 100; ++k) cm.update(k, static_cast<std::int64_t>(k));
  const auto bytes = serialize(cm);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    const std::vector<std::uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(deserialize(prefix), FormatError) << "prefix of " << len << " bytes";
  }
}

TEST(CountMinSnapshot, RejectsEveryCorruptedByte) {
  CountMin cm(16, 3, 5);
  for (std::uint64_t k = 0; k < 100; ++k) cm.update(k, static_cast<std::int64_t>(k));
  const auto bytes = serialize(cm);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x5a;
    EXPECT_THROW(deserialize(bad), FormatError) << "byte " << i;
  }
}

TEST(CountMinSnapshot, RejectsCorruptHeaderFieldsWithAClearMessage) {
  CountMin cm(16, 3, 5);
  cm.update(1);
  const auto bytes = serialize(cm);
  // Layout: tag u32 @0, version u16 @4, flags u16 @6, width u64 @8, depth u64 @16, seed u64 @24, total i64 @32,
  // counter count u64 @40, counters @48, checksum u64 at the end.
  auto with = [&](std::size_t offset, auto value) {
    auto b = bytes;
    std::memcpy(b.data() + offset, &value, sizeof(value));
    return b;
  };
  expect_throw_mentioning<FormatError>([&] { deserialize(with(0, std::uint32_t{0x12345678})); }, "tag");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(4, std::uint16_t{2})); }, "version");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(6, std::uint16_t{1})); }, "flags");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(8, std::uint64_t{0})); }, "width");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(8, ~std::uint64_t{0})); }, "width");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(8, std::uint64_t{17})); }, "counters");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(16, std::uint64_t{0})); }, "depth");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(16, std::uint64_t{65})); }, "depth");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(16, std::uint64_t{2})); }, "counters");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(24, std::uint64_t{6})); }, "checksum");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(32, std::int64_t{2})); }, "checksum");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(40, std::uint64_t{47})); }, "counters");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(40, std::uint64_t{1} << 60)); }, "truncated");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(48, std::int64_t{99})); }, "checksum");
  expect_throw_mentioning<FormatError>([&] { deserialize(with(bytes.size() - 8, std::uint64_t{0})); }, "checksum");
}

}  // namespace
}  // namespace afs::hh
