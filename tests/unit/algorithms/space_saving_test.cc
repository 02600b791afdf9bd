// Unit tests of the engine-free Space-Saving summary (algorithms/heavy_hitters/space_saving.h) against brute force on
// seeded Zipf streams: bounds on every key, no miss above N / k, merge guarantees on the concatenated stream, top-k
// order, and rejection of truncated and corrupt buffers.
#include "algorithms/heavy_hitters/space_saving.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/heavy_hitters/zipf.h"

namespace afs::hh {
namespace {

std::vector<Item> stream(std::uint64_t seed, std::uint64_t n, bool weighted) {
  ZipfGenerator gen({.num_keys = 5000, .skew = 1.0, .total_items = n, .seed = seed});
  std::vector<Item> items(n);
  gen.fill(0, items);
  std::mt19937_64 rng(seed);
  for (auto& it : items) it.value = weighted ? static_cast<std::int64_t>(1 + rng() % 100) : 1;
  return items;
}

// Every guarantee that holds after updates and merges, for every key of the exact counts.
void expect_bounds(const SpaceSaving& s, const std::unordered_map<std::uint64_t, std::int64_t>& exact,
                   const std::string& at) {
  for (const auto& [key, w] : exact) {
    ASSERT_GE(s.upper_bound(key), w) << at << " key " << key;
    ASSERT_LE(s.lower_bound(key), w) << at << " key " << key;
    if (w > s.min_count()) {
      ASSERT_TRUE(s.monitored(key)) << at << " key " << key << " weight " << w;
    }
  }
}

TEST(SpaceSaving, BoundsHoldAndNothingAboveNOverKIsMissed) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    for (const bool weighted : {false, true}) {
      const auto items = stream(seed, 20000, weighted);
      SpaceSaving s(100);
      std::unordered_map<std::uint64_t, std::int64_t> exact;
      for (const auto& it : items) {
        s.update(it.key, it.value);
        exact[it.key] += it.value;
      }
      const std::string at = "seed " + std::to_string(seed) + (weighted ? " weighted" : " unit");
      EXPECT_EQ(s.size(), 100u) << at;
      EXPECT_LE(s.min_count() * 100, s.total()) << at;  // min_count <= N / k
      expect_bounds(s, exact, at);
      const auto top = s.top(10);
      for (std::size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].count, top[i].count) << at;
    }
  }
}

TEST(SpaceSaving, MergeKeepsTheGuaranteesForTheConcatenatedStream) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto a_items = stream(seed, 15000, true), b_items = stream(seed + 100, 9000, true);
    SpaceSaving a(80), b(50), c(80);
    std::unordered_map<std::uint64_t, std::int64_t> exact;
    for (const auto& it : a_items) a.update(it.key, it.value), exact[it.key] += it.value;
    for (const auto& it : b_items) b.update(it.key, it.value), exact[it.key] += it.value;
    const auto c_items = stream(seed + 200, 3000, false);
    for (const auto& it : c_items) c.update(it.key, it.value), exact[it.key] += it.value;
    SpaceSaving ab_c = a;
    ab_c.merge(b);
    ab_c.merge(c);
    SpaceSaving bc = b, a_bc = a;
    bc.merge(c);
    a_bc.merge(bc);
    for (const auto* s : {&ab_c, &a_bc}) {
      EXPECT_EQ(s->size(), 80u);
      EXPECT_EQ(s->total(), a.total() + b.total() + c.total());
      expect_bounds(*s, exact, "seed " + std::to_string(seed));
    }
  }
}

TEST(SpaceSaving, SmallStreamsAreExact) {
  SpaceSaving s(10);
  for (std::uint64_t k = 0; k < 5; ++k) s.update(k, static_cast<std::int64_t>(k + 1));
  for (std::uint64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(s.upper_bound(k), static_cast<std::int64_t>(k + 1));
    EXPECT_EQ(s.lower_bound(k), static_cast<std::int64_t>(k + 1));
  }
  EXPECT_EQ(s.min_count(), 0);
  EXPECT_EQ(s.top(2), (std::vector<SpaceSaving::Entry>{{4, 5, 0}, {3, 4, 0}}));
}

TEST(SpaceSaving, SizingAndBadInput) {
  EXPECT_EQ(SpaceSaving::capacity_for_error(0.01), 100u);
  EXPECT_THROW(SpaceSaving::capacity_for_error(0), ConfigError);
  EXPECT_THROW(SpaceSaving(0), ConfigError);
  SpaceSaving s(4);
  EXPECT_THROW(s.update(1, -1), std::invalid_argument);
}

TEST(SpaceSaving, SerializeRoundTripsAndRejectsEveryTruncationAndCorruption) {
  SpaceSaving s(8);
  for (const auto& it : stream(3, 500, true)) s.update(it.key, it.value);
  ByteWriter w;
  s.serialize(w);
  const std::vector<std::uint8_t> good = w.take();
  ByteReader r(good);
  const auto back = SpaceSaving::deserialize(r);
  EXPECT_EQ(back.entries(), s.entries());
  EXPECT_EQ(back.total(), s.total());
  EXPECT_EQ(back.capacity(), s.capacity());
  for (std::size_t len = 0; len < good.size(); ++len) {
    ByteReader t(std::span<const std::uint8_t>(good.data(), len));
    EXPECT_THROW(SpaceSaving::deserialize(t), FormatError) << "prefix of " << len << " bytes";
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::vector<std::uint8_t> bad = good;
    bad[i] ^= 0x10;
    ByteReader t(bad);
    EXPECT_THROW(SpaceSaving::deserialize(t), FormatError) << "byte " << i << " flipped";
  }
}

}  // namespace
}  // namespace afs::hh
