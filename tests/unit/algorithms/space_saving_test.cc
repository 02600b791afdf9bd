// Unit tests of the engine-free Space-Saving summary (algorithms/heavy_hitters/space_saving.h) against brute force on
// seeded Zipf streams: bounds on every key, no miss above N / k, merge guarantees on the concatenated stream, top-k
// order, and rejection of truncated and corrupt buffers; the generalizations for fault tolerance (the floor and
// add_to_all keep every bound when items are lost and the loss is compensated, proofs/space-saving.md Lemma SS2), the
// history-independent eviction (a restored summary continues exactly as the original), assign/erase, version 1.
#include "algorithms/heavy_hitters/space_saving.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
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

// Lemma SS2 (proofs/space-saving.md): a summary fed only the kept items, with compensations c_1, c_2, ... added at
// arbitrary points (even before it is full), whose total E covers every key's lost weight, still bounds the true
// weight of every key of the whole stream: lower <= true <= upper, unmonitored keys <= min_count(), and
// min_count() <= N / k + E once full.
TEST(SpaceSaving, CompensationCoversLostWeightWhereverItIsAdded) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const bool weighted = seed % 2 == 0;
    const auto items = stream(seed, 20000, weighted);
    std::mt19937_64 rng(seed * 7);
    SpaceSaving s(100);
    std::unordered_map<std::uint64_t, std::int64_t> exact, lost;
    std::vector<std::size_t> compensate_at;  // before item i (some before the summary is full)
    for (int j = 0; j < 4; ++j) compensate_at.push_back(rng() % (seed % 3 == 0 ? 50 : items.size()));
    std::int64_t lost_total = 0;
    for (const auto& it : items) {
      exact[it.key] += it.value;
      if (rng() % 50 == 0) {  // lost: never reaches the summary
        lost[it.key] += it.value;
        lost_total += it.value;
      }
    }
    std::int64_t max_lost = 0;
    for (const auto& [k, w] : lost) max_lost = std::max(max_lost, w);
    ASSERT_GT(max_lost, 0);
    // Four compensations whose sum is exactly the largest per-key loss.
    std::vector<std::int64_t> parts = {max_lost / 4, max_lost / 4, max_lost / 4, max_lost - 3 * (max_lost / 4)};
    rng.seed(seed * 7);
    for (int j = 0; j < 4; ++j) (void)rng();
    std::int64_t added = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      for (int j = 0; j < 4; ++j) {
        if (compensate_at[j] == i) {
          s.add_to_all(parts[j]);
          added += parts[j];
        }
      }
      if (rng() % 50 == 0) continue;
      s.update(items[i].key, items[i].value);
    }
    ASSERT_EQ(added, max_lost);
    const std::string at = "seed " + std::to_string(seed);
    expect_bounds(s, exact, at);
    EXPECT_LE(s.min_count(), (s.total() + 99) / 100 + added) << at;
    std::int64_t n = 0;
    for (const auto& [k, w] : exact) n += w;
    EXPECT_EQ(s.total() + lost_total, n) << at;
  }
  // Without the compensation some bound fails: the test can tell.
  const auto items = stream(3, 20000, false);
  SpaceSaving s(100);
  std::unordered_map<std::uint64_t, std::int64_t> exact;
  for (std::size_t i = 0; i < items.size(); ++i) {
    exact[items[i].key] += items[i].value;
    if (i % 10 != 0) s.update(items[i].key, items[i].value);
  }
  bool broken = false;
  for (const auto& [k, w] : exact) broken |= s.upper_bound(k) < w;
  EXPECT_TRUE(broken);
}

TEST(SpaceSaving, FloorBoundsUnmonitoredKeysBeforeTheSummaryIsFull) {
  SpaceSaving s(10);
  s.update(1, 5);
  s.add_to_all(7);
  EXPECT_EQ(s.floor(), 7);
  EXPECT_EQ(s.min_count(), 7);
  EXPECT_EQ(s.upper_bound(99), 7);  // never seen: at most what was lost
  EXPECT_EQ(s.lower_bound(99), 0);
  s.update(2, 3);  // enters at floor + 3 with error floor
  EXPECT_EQ(s.find(2), (SpaceSaving::Entry{2, 10, 7}));
  EXPECT_EQ(s.find(1), (SpaceSaving::Entry{1, 12, 7}));
  EXPECT_THROW(s.add_to_all(-1), std::invalid_argument);
  // The floor survives the binary form; merge charges both sides' min counts.
  ByteWriter w;
  s.serialize(w);
  const auto bytes = w.take();
  ByteReader r(bytes);
  EXPECT_EQ(SpaceSaving::deserialize(r).floor(), 7);
  SpaceSaving t(10);
  t.update(3, 1);
  t.add_to_all(2);
  t.merge(s);
  EXPECT_EQ(t.floor(), 9);
  EXPECT_EQ(t.upper_bound(99), 9);
  EXPECT_EQ(t.find(3), (SpaceSaving::Entry{3, 3 + 7, 2 + 7}));
}

// Ties in count are broken by key, so the evicted key depends only on the entries: a summary rebuilt from its
// binary form (a different heap layout) continues exactly as the original, on many unit-weight streams where ties
// are the rule.
TEST(SpaceSaving, RestoredSummaryContinuesExactlyAsTheOriginal) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto items = stream(seed, 6000, seed % 2 == 0);
    SpaceSaving s(64);
    for (std::size_t i = 0; i < 3000; ++i) s.update(items[i].key, items[i].value);
    ByteWriter w;
    s.serialize(w);
    const auto bytes = w.take();
    ByteReader r(bytes);
    SpaceSaving back = SpaceSaving::deserialize(r);
    for (std::size_t i = 3000; i < items.size(); ++i) {
      ASSERT_EQ(back.update(items[i].key, items[i].value), s.update(items[i].key, items[i].value)) << i;
    }
    EXPECT_EQ(back.entries(), s.entries()) << "seed " << seed;
  }
}

// Written as the heap holds them (an operator's full backups: no sort), the entries come back in the same heap
// layout, entry for entry, and the summary continues exactly as the original.
TEST(SpaceSaving, EntriesWrittenAsStoredComeBackInTheSameHeapLayout) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto items = stream(seed, 6000, seed % 2 == 0);
    SpaceSaving s(64);
    for (std::size_t i = 0; i < 3000; ++i) s.update(items[i].key, items[i].value);
    ByteWriter w;
    s.serialize(w, SpaceSaving::EntryOrder::AsStored);
    const auto bytes = w.take();
    ByteReader r(bytes);
    SpaceSaving back = SpaceSaving::deserialize(r);
    ASSERT_TRUE(std::ranges::equal(back.unordered_entries(), s.unordered_entries())) << "seed " << seed;
    for (std::size_t i = 3000; i < items.size(); ++i) {
      ASSERT_EQ(back.update(items[i].key, items[i].value), s.update(items[i].key, items[i].value)) << i;
    }
    EXPECT_EQ(back.entries(), s.entries()) << "seed " << seed;
  }
}

// The serialized form is canonical: entries in increasing key order, so equal summaries reached by different
// histories (different heap layouts) give equal bytes. Keys spread over all eight bytes exercise every radix pass.
TEST(SpaceSaving, SerializedEntriesAreInKeyOrderWhateverTheHistory) {
  std::mt19937_64 rng(7);
  std::vector<SpaceSaving::Entry> entries;
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t key = i % 3 == 0 ? rng() : (i % 3 == 1 ? rng() % 1000000 : rng() >> 40);
    const std::int64_t count = static_cast<std::int64_t>(rng() % 10000 + 1);
    entries.push_back({key, count, static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(count))});
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  entries.erase(
      std::unique(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.key == b.key; }),
      entries.end());
  SpaceSaving forward(entries.size()), backward(entries.size());
  for (const auto& e : entries) forward.assign(e);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) backward.assign(*it);
  ByteWriter a, b;
  forward.serialize(a);
  backward.serialize(b);
  EXPECT_EQ(a.buffer(), b.buffer());
  ByteReader r(a.buffer());
  const auto back = SpaceSaving::deserialize(r);
  // Skip the header (tag, version, flags, capacity, total, floor) and the entry count: the entries follow in order.
  ByteReader raw(a.buffer());
  raw.get<std::uint32_t>();
  raw.get<std::uint16_t>();
  raw.get<std::uint16_t>();
  raw.get<std::uint64_t>();
  raw.get<std::int64_t>();
  raw.get<std::int64_t>();
  ASSERT_EQ(raw.get<std::uint64_t>(), entries.size());
  for (const auto& e : entries) {
    ASSERT_EQ(raw.get<std::uint64_t>(), e.key);
    ASSERT_EQ(raw.get<std::int64_t>(), e.count);
    ASSERT_EQ(raw.get<std::int64_t>(), e.error);
  }
  EXPECT_EQ(back.entries(), forward.entries());
}

TEST(SpaceSaving, AssignAndEraseKeepTheHeap) {
  std::mt19937_64 rng(5);
  SpaceSaving s(50);
  std::unordered_map<std::uint64_t, SpaceSaving::Entry> want;
  for (int i = 0; i < 5000; ++i) {
    const std::uint64_t key = rng() % 80;
    if (rng() % 3 == 0) {
      s.erase(key);
      want.erase(key);
    } else if (want.count(key) || want.size() < 50) {
      const std::int64_t count = static_cast<std::int64_t>(rng() % 1000);
      const SpaceSaving::Entry e{key, count, count / 2};
      s.assign(e);
      want[key] = e;
    }
    ASSERT_EQ(s.size(), want.size());
  }
  std::vector<SpaceSaving::Entry> v;
  for (const auto& [k, e] : want) v.push_back(e);
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.count != b.count ? a.count > b.count : a.key < b.key; });
  EXPECT_EQ(s.entries(), v);
  // The minimum is the smallest (count, key).
  s.set_totals(0, 0);
  while (s.size() < 50) s.assign({1000 + s.size(), 5000, 0});
  const auto min = v.empty() ? SpaceSaving::Entry{} : v.back();
  EXPECT_EQ(s.min_count(), std::min<std::int64_t>(min.count, 5000));
  EXPECT_THROW(s.assign({99999, 1, 0}), std::invalid_argument);          // full
  EXPECT_THROW(s.assign({v.front().key, 1, 2}), std::invalid_argument);  // error > count
}

TEST(SpaceSaving, ReadsVersionOneWithFloorZero) {
  // A version-1 buffer: tag, version 1, flags, capacity, total, one entry, checksum (no floor).
  ByteWriter w;
  w.put<std::uint32_t>(0x31535353);
  w.put<std::uint16_t>(1);
  w.put<std::uint16_t>(0);
  w.put<std::uint64_t>(4);
  w.put<std::int64_t>(9);
  w.put<std::uint64_t>(1);
  w.put<std::uint64_t>(42);
  w.put<std::int64_t>(9);
  w.put<std::int64_t>(0);
  w.put<std::uint64_t>(XXH3_64bits(w.buffer().data(), w.size()));
  const auto bytes = w.take();
  ByteReader r(bytes);
  const auto s = SpaceSaving::deserialize(r);
  EXPECT_EQ(s.floor(), 0);
  EXPECT_EQ(s.total(), 9);
  EXPECT_EQ(s.find(42), (SpaceSaving::Entry{42, 9, 0}));
}

}  // namespace
}  // namespace afs::hh
