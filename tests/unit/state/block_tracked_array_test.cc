// Unit tests for BlockTrackedArray (DESIGN.md section 3): its divergence is an upper bound of the brute-force max-abs
// distance to the backed-up state (exact for one-way counters in blocks of one), its deltas and partial deltas
// rebuild the state exactly or within what they return, its payloads are TrackedArray's, and bad payloads are
// rejected without touching it.
#include "afstream/state/block_tracked_array.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/state/tracked_array.h"
#include "state_test_util.h"

namespace afs {
namespace {

using namespace afs::testing_state;

// max_i |a_i - b_i|, independently of the library (exact for int64 through 128 bits).
template <typename T>
double brute_max_abs(std::span<const T> a, const std::vector<T>& b) {
  long double mx = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_same_v<T, std::int64_t>) {
      const __int128 d = static_cast<__int128>(a[i]) - b[i];
      mx = std::max(mx, static_cast<long double>(d < 0 ? -d : d));
    } else {
      mx = std::max(mx, std::fabs(static_cast<long double>(a[i]) - b[i]));
    }
  }
  return static_cast<double>(mx);
}

// The per-block sums of |changes| since the backup, as the class comment defines the bound, kept by hand.
// (Summed as the container sums them: in double for double counters, exactly for int64.)
template <typename T>
struct Shadow {
  using Sum = std::conditional_t<std::is_same_v<T, double>, double, long double>;
  std::vector<T> stored;   // what the backups written so far rebuild
  std::vector<Sum> moved;  // per block
  Sum floor = 0;           // since a partial delta: what it returned (until a whole backup)
  Sum watch = 0;           // the last partial delta's residual (0 before the first)
  Sum bound() const { return std::max(floor, moved.empty() ? 0 : *std::max_element(moved.begin(), moved.end())); }
};

template <typename T>
T random_change(std::mt19937_64& rng, bool one_way, std::uint64_t magnitude = 1000) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    const auto d = static_cast<std::int64_t>(rng() % magnitude);
    return one_way || rng() % 2 ? d : -d;
  } else {
    const double d = std::uniform_real_distribution<double>(0, 10)(rng);
    return one_way || rng() % 2 ? d : -d;
  }
}

template <typename T>
void apply_payload(std::vector<T>& stored, const std::vector<std::uint8_t>& bytes, bool full) {
  TrackedArray<T> reader(stored.size(), Metric::MaxAbs);
  reader.apply_full(std::vector<T>(stored));
  ByteReader r(bytes);
  if (full) {
    reader.read_full(r);
  } else {
    reader.apply_delta(r);
  }
  r.expect_end("test payload");
  stored.assign(reader.values().begin(), reader.values().end());
}

template <typename T>
void check_random_run(std::size_t n, std::size_t block, bool one_way, std::uint64_t seed,
                      std::uint64_t magnitude = 1000) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " block " << block << " one_way " << one_way << " seed " << seed
                                    << " magnitude " << magnitude);
  std::mt19937_64 rng(seed);
  BlockTrackedArray<T> a(n, block);
  Shadow<T> s{std::vector<T>(n), std::vector<typename Shadow<T>::Sum>((n + block - 1) / block)};
  for (int step = 0; step < 3000; ++step) {
    const std::size_t i = rng() % n;
    const T d = random_change<T>(rng, one_way, magnitude);
    if (rng() % 5 == 0 && !one_way) {
      const T now = static_cast<T>(a[i] + d);
      s.moved[i / block] +=
          std::is_same_v<T, double> ? std::fabs(now - a[i]) : std::fabs(static_cast<long double>(now) - a[i]);
      a.set(i, now);
    } else {
      a.add(i, d);
      s.moved[i / block] += std::fabs(static_cast<typename Shadow<T>::Sum>(d));
    }
    // For double the bound holds to the rounding of the values' own sums.
    const double truth = brute_max_abs<T>(a.values(), s.stored);
    double scale = 1;
    for (const T v : a.values()) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    ASSERT_GE(a.divergence() + 1e-12 * scale, truth) << "step " << step;
    ASSERT_EQ(a.divergence(), static_cast<double>(s.bound()));
    if (block == 1 && one_way && s.floor == 0) {
      ASSERT_NEAR(a.divergence(), truth, 1e-9 * (1 + truth));
    }
    switch (rng() % 97) {
      case 0: {  // whole delta
        ByteWriter w;
        a.write_delta(w);
        a.mark_backed_up();
        apply_payload(s.stored, w.take(), false);
        std::fill(s.moved.begin(), s.moved.end(), 0);
        s.floor = 0;  // (the watched residual stays)
        ASSERT_EQ(brute_max_abs<T>(a.values(), s.stored), 0);
        ASSERT_EQ(a.divergence(), 0);
        ASSERT_EQ(a.dirty_count(), 0u);
        break;
      }
      case 1:
      case 2:
      case 3: {  // partial delta
        const double residual = std::uniform_real_distribution<double>(0, 3000)(rng);
        const auto before = s.bound();
        ByteWriter w;
        const double left = a.backup_partial_delta(w, residual);
        apply_payload(s.stored, w.take(), false);
        ASSERT_LE(left, residual);
        ASSERT_EQ(a.divergence(), left);
        ASSERT_LE(brute_max_abs<T>(a.values(), s.stored), left + 1e-12 * scale);
        // Blocks past the residual now hold only slots within it; their bound is the largest distance left.
        const auto keep = std::is_same_v<T, double> ? residual : std::floor(residual);
        s.floor = std::min<typename Shadow<T>::Sum>(before, keep);
        for (std::size_t b = 0; b < s.moved.size(); ++b) {
          // Looked at: the blocks past the previous residual (they crossed it since), or past this one if smaller.
          if (s.moved[b] <= std::min<typename Shadow<T>::Sum>(keep, s.watch)) continue;
          typename Shadow<T>::Sum rest = 0;
          for (std::size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
            const auto d = static_cast<typename Shadow<T>::Sum>(
                std::is_same_v<T, double> ? std::fabs(a[i] - s.stored[i])
                                          : std::fabs(static_cast<long double>(a[i]) - s.stored[i]));
            // Written: in a block far past the residual (beyond 1.5 times it) every changed slot, else those past
            // half of it.
            const double half = std::is_same_v<T, double> ? keep / 2 : std::floor(keep / 2);
            const double settle = s.moved[b] > keep + half ? 0 : half;
            ASSERT_LE(d, settle) << "slot " << i << " past the block's settle level was not written";
            // int64 blocks of one slot keep no backed-up copy: a slot is measured by its bound (the sum of its
            // |changes|, more than its distance when they went both ways), and written when that passes settle.
            const bool per_slot = block == 1 && std::is_same_v<T, std::int64_t>;
            rest = std::max(rest, !per_slot ? d : s.moved[b] > settle ? 0 : s.moved[b]);
          }
          s.moved[b] = rest;
          s.floor = std::max(s.floor, rest);  // (above the old bound only by rounding, for double)
        }
        s.watch = keep;
        ASSERT_EQ(left, static_cast<double>(s.floor));
        ASSERT_EQ(left, static_cast<double>(s.bound()));
        break;
      }
      case 5:
      case 6: {  // a partial delta given no residual: whole, and the next whole ones walk the changed blocks' list
        ByteWriter w;
        ASSERT_EQ(a.backup_partial_delta(w, 0), 0);
        apply_payload(s.stored, w.take(), false);
        std::fill(s.moved.begin(), s.moved.end(), 0);
        s.floor = s.watch = 0;
        ASSERT_EQ(brute_max_abs<T>(a.values(), s.stored), 0);
        ASSERT_EQ(a.dirty_count(), 0u);
        break;
      }
      case 4: {  // full backup
        ByteWriter w;
        a.write_full(w);
        a.mark_backed_up();
        apply_payload(s.stored, w.take(), true);
        std::fill(s.moved.begin(), s.moved.end(), 0);
        s.floor = 0;  // (the watched residual stays)
        break;
      }
      default:
        break;
    }
  }
  // Whatever happened, the store's state plus the next delta is the current state, bit for bit.
  ByteWriter w;
  a.write_delta(w);
  apply_payload(s.stored, w.take(), false);
  const std::vector<T> values = a.values();
  EXPECT_TRUE(std::equal(s.stored.begin(), s.stored.end(), values.begin(), values.end()));
}

TEST(BlockTrackedArray, DivergenceBoundsTheBruteForceDistanceAndDeltasRebuildTheState) {
  for (const std::size_t block : {1, 2, 8, 64}) {
    for (const std::size_t n : {1, 7, 100, 1000}) {
      for (const bool one_way : {true, false}) {
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
          check_random_run<std::int64_t>(n, block, one_way, seed);
          check_random_run<double>(n, block, one_way, seed + 10);
        }
      }
    }
  }
}

// int64 blocks of one keep each bound in its value's word (the packed layout) until a value may leave +-2^39 or a
// bound pass 2^24, then in an array of their own: the same divergence, deltas and values either way. Changes of up
// to 1e7 take the bounds past 2^24 within a run.
TEST(BlockTrackedArray, PackedCountersMoveToTheSeparateLayoutWithoutAChange) {
  for (const std::size_t n : {1, 7, 100}) {
    for (const bool one_way : {true, false}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) check_random_run<std::int64_t>(n, 1, one_way, seed, 10'000'000);
    }
  }
  // Values growing past 2^39, with a backup after each step (bounds below 2^32, exact): 2^38 - 10, then up by 4e9
  // at a time (past 2^24: the separate layout from the first add; leaving by the reach is in
  // PackedSlowPathsKeepValuesDivergenceAndTheSmallestValueWritten).
  {
    BlockTrackedArray<std::int64_t> a(2, 1);
    const std::int64_t half = std::int64_t{1} << 38;
    a.apply_full({half - 10, -3});
    std::vector<std::int64_t> stored{half - 10, -3};
    for (int k = 1; k <= 80; ++k) {
      a.add(0, 4'000'000'000);
      a.add(1, -k);
      ASSERT_EQ(a.divergence(), 4e9) << k;
      ASSERT_EQ(a[0], half - 10 + k * std::int64_t{4'000'000'000}) << k;
      ByteWriter w;
      ASSERT_EQ(a.backup_partial_delta(w, 0), 0);
      apply_payload(stored, w.take(), false);
      ASSERT_EQ(stored, a.values()) << k;
    }
    EXPECT_GT(a[0], 2 * half);
  }
  // Past the range at once: a restore, a set, a compensation, a delta applied.
  for (int how = 0; how < 4; ++how) {
    SCOPED_TRACE(how);
    BlockTrackedArray<std::int64_t> a(4, 1);
    a.add(1, 7);
    const std::int64_t big = std::int64_t{1} << 50;
    if (how == 0) a.apply_full({-big, 2, 3, 4});
    if (how == 1) a.set(0, -big);
    if (how == 2) a.add_to_all(-big);
    if (how == 3) {
      BlockTrackedArray<std::int64_t> other(4, 1);
      other.set(0, -big);
      ByteWriter w;
      other.write_delta(w);
      ByteReader r(w.buffer());
      a.apply_delta(r);
    }
    EXPECT_EQ(a[0], -big);
    a.add(0, -5);
    a.add(3, 9);
    EXPECT_EQ(a[0], -big - 5);
    // A restore or a delta counts as backed up; a set or a compensation of 2^50 saturates the bounds.
    EXPECT_EQ(a.divergence(),
              how == 0 || how == 3 ? 9.0 : static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
    ByteWriter w;
    a.write_full(w);
    BlockTrackedArray<std::int64_t> copy(4, 1);
    ByteReader r(w.buffer());
    copy.read_full(r);
    EXPECT_EQ(copy.values(), a.values());
  }
}

// The packed layout's slow paths (a second reading found them unexercised, and add_each's minimum wrong on them for
// a repeated slot): a recount of the values' reach that stays packed, leaving by the reach with small adds, leaving
// by a bound, restores and deltas at the edge of the range, a compensation and a delta applied while packed.
TEST(BlockTrackedArray, PackedSlowPathsKeepValuesDivergenceAndTheSmallestValueWritten) {
  const std::uint32_t one_twice[] = {1, 1};
  {  // the reach's running sum passes 2^39 - 1 while the values stay small: recounted, still packed
    BlockTrackedArray<std::int64_t> a(2, 1);
    const std::int64_t d = std::int64_t{1} << 22;
    for (int k = 0; k < (1 << 16) - 1; ++k) {
      a.add(0, d);
      a.add(0, -d);
      a.mark_backed_up();
    }
    a.add(0, d);
    a.add(0, -(d - 5));
    a.mark_backed_up();
    EXPECT_EQ(a.add_each(one_twice, 5), 5);  // writes 5, then 10
    EXPECT_EQ(a[1], 10);
    EXPECT_EQ(a[0], 5);
    EXPECT_EQ(a.divergence(), 10);
    a.add(0, 7);
    ByteWriter w;
    a.write_delta(w);
    std::vector<std::int64_t> stored{5, 0};
    apply_payload(stored, w.take(), false);
    EXPECT_EQ(stored, a.values());
  }
  {  // a bound about to pass 2^24 - 1: the separate layout, and the smallest value written still
    BlockTrackedArray<std::int64_t> a(2, 1);
    a.add(0, (std::int64_t{1} << 24) - 10);
    EXPECT_EQ(a.add_each(one_twice, 5), 5);
    EXPECT_EQ(a[1], 10);
    EXPECT_EQ(a.divergence(), static_cast<double>((std::int64_t{1} << 24) - 10));
  }
  {  // values past the range by adds of 2^22, a backup after each: it leaves by the reach, not by a bound
    BlockTrackedArray<std::int64_t> a(1, 1);
    const std::int64_t start = (std::int64_t{1} << 38) - 1000, d = std::int64_t{1} << 22;
    a.apply_full({start});
    for (std::int64_t k = 1; k <= (1 << 16) + 10; ++k) {
      a.add(0, d);
      ASSERT_EQ(a.divergence(), static_cast<double>(d)) << k;
      ASSERT_EQ(a[0], start + k * d) << k;
      a.mark_backed_up();
    }
    EXPECT_GT(a[0], std::int64_t{1} << 39);
  }
  // Restores at the edge of the range (2^38 - 1 stays packed, 2^38 does not), negative values near it, a
  // compensation and a delta applied while packed.
  for (const std::int64_t edge : {(std::int64_t{1} << 38) - 1, std::int64_t{1} << 38}) {
    for (const std::int64_t sign : {1, -1}) {
      SCOPED_TRACE(::testing::Message() << "edge " << edge << " sign " << sign);
      BlockTrackedArray<std::int64_t> a(3, 1);
      a.apply_full({sign * edge, 4, -4});
      a.add(0, sign * 5);
      a.add_to_all(2);
      EXPECT_EQ(a.values(), (std::vector<std::int64_t>{sign * edge + sign * 5 + 2, 6, -2}));
      EXPECT_EQ(a.divergence(), 7);  // slot 0's bound sums its |changes|, 5 and 2, whichever way they went
      BlockTrackedArray<std::int64_t> b(3, 1);
      b.apply_full({1, 2, sign * edge});
      b.add(2, -sign * 3);
      ByteWriter w;
      b.write_delta(w);
      ByteReader r(w.buffer());
      a.apply_delta(r);  // slot 2 only
      EXPECT_EQ(a[2], sign * edge - sign * 3);
      EXPECT_EQ(a.divergence(), 0);
      a.add(2, sign);
      EXPECT_EQ(a.divergence(), 1);
      EXPECT_EQ(a[2], sign * edge - sign * 2);
    }
  }
}

TEST(BlockTrackedArray, BlocksOfOneMeasureOneWayCountersExactly) {
  BlockTrackedArray<std::int64_t> a(10, 1);
  a.add(3, 5);
  a.add(4, 7);
  a.add(3, 4);
  EXPECT_EQ(a.divergence(), 9);
  BlockTrackedArray<std::int64_t> b(10, 8);  // slots 3 and 4 share a block: 9 + 7
  b.add(3, 5);
  b.add(4, 7);
  b.add(3, 4);
  EXPECT_EQ(b.divergence(), 16);
  b.add(9, 20);  // the second block
  EXPECT_EQ(b.divergence(), 20);
}

TEST(BlockTrackedArray, AnUpdateRaisesTheDivergenceByAtMostItsChange) {
  std::mt19937_64 rng(3);
  BlockTrackedArray<std::int64_t> a(8000 * 4, 8);
  for (int k = 0; k < 20000; ++k) {
    const double before = a.divergence();
    const auto w = static_cast<std::int64_t>(40 + rng() % 1461);
    for (std::size_t row = 0; row < 4; ++row) a.add(row * 8000 + rng() % 8000, w);  // one item, four rows
    ASSERT_LE(a.divergence() - before, static_cast<double>(w));
  }
}

template <typename T>
void check_add_each_equals_add(std::size_t n, std::size_t block, bool tracked, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " block " << block << " tracked " << tracked);
  std::mt19937_64 rng(seed);
  BlockTrackedArray<T> one(n, block), each(n, block);
  if (!tracked) {
    one.stop_tracking();
    each.stop_tracking();
  }
  for (int k = 0; k < 2000; ++k) {
    std::vector<std::uint32_t> slots(1 + rng() % 6);
    for (auto& i : slots) i = static_cast<std::uint32_t>(rng() % n);  // repeats and shared blocks too
    const auto d = static_cast<T>(static_cast<std::int64_t>(rng() % 200) - 50);
    for (const auto i : slots) one.add(i, d);
    const T least = each.add_each(slots, d);
    ASSERT_EQ(each.distance(one), 0);
    // The smallest value written: with repeats, the smallest of the slots' values after each of their adds.
    std::vector<T> after(slots.size());
    {
      std::vector<T> v = one.values();
      for (std::size_t k2 = slots.size(); k2-- > 0;) {
        after[k2] = v[slots[k2]];
        v[slots[k2]] -= d;
      }
    }
    ASSERT_EQ(least, *std::min_element(after.begin(), after.end()));
    ASSERT_EQ(fingerprint(each), fingerprint(one));
    if (k % 97 == 0) {  // partial deltas and whole ones (after which add_each lists without a branch)
      constexpr double kResiduals[] = {0, 300, 0, 0.5, 0};  // 0.5: an int64 watch of 0 after a partial delta
      const double residual = kResiduals[(k / 97) % 5];
      ByteWriter w1, w2;
      ASSERT_EQ(one.backup_partial_delta(w1, residual), each.backup_partial_delta(w2, residual));
      ASSERT_EQ(w1.take(), w2.take());
    }
  }
}

TEST(BlockTrackedArray, AddEachEqualsAddSlotBySlot) {
  for (const bool tracked : {true, false}) {
    for (const std::size_t block : {1, 4}) {
      check_add_each_equals_add<std::int64_t>(100, block, tracked, 12);
      check_add_each_equals_add<double>(100, block, tracked, 13);
    }
    // Every block moves between whole deltas: the list fills up, and its spare slot takes the last store.
    check_add_each_equals_add<std::int64_t>(3, 1, tracked, 14);
    check_add_each_equals_add<double>(5, 2, tracked, 15);
  }
}

// A set() across most of the int64 range (a change of up to 2^64 - 1) saturates the bound: it neither wraps to a
// small divergence nor lists the block twice.
TEST(BlockTrackedArray, AChangeAcrossTheInt64RangeSaturatesTheBound) {
  BlockTrackedArray<std::int64_t> a(1, 1);
  a.apply_full({std::numeric_limits<std::int64_t>::min() + 1});
  a.add(0, -1);
  a.set(0, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(a.divergence(), static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
  const std::uint32_t slot[] = {0};
  a.add_each(slot, -1);
  a.add_each(slot, 1);
  EXPECT_EQ(a.divergence(), static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
  EXPECT_EQ(a.dirty_count(), 1u);
  ByteWriter w;
  EXPECT_EQ(a.backup_partial_delta(w, 0), 0);
  EXPECT_EQ(a.divergence(), 0);
  EXPECT_EQ(a[0], std::numeric_limits<std::int64_t>::max());
}

TEST(BlockTrackedArray, AddToAllMovesEveryBlockOnce) {
  BlockTrackedArray<std::int64_t> a(20, 4);
  a.add(0, 3);
  a.add_to_all(10);
  EXPECT_EQ(a.divergence(), 13);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], i == 0 ? 13 : 10);
  EXPECT_EQ(a.dirty_count(), 20u);
  a.mark_backed_up();
  a.add_to_all(-2);
  EXPECT_EQ(a.divergence(), 2);
}

// The delta's slots, read back through TrackedArray (the same payload).
std::vector<std::pair<std::uint32_t, std::int64_t>> delta_entries(ByteWriter& w, std::size_t n) {
  const auto bytes = w.take();
  TrackedArray<std::int64_t> reader(n, Metric::MaxAbs);
  ByteReader r(bytes);
  const auto d = reader.read_delta(r);
  std::vector<std::pair<std::uint32_t, std::int64_t>> v;
  for (std::size_t k = 0; k < d.indices.size(); ++k) v.emplace_back(d.indices[k], d.values[k]);
  return v;
}

TEST(BlockTrackedArray, PartialDeltaWritesOnlyTheSlotsPastTheResidual) {
  using Entries = std::vector<std::pair<std::uint32_t, std::int64_t>>;
  BlockTrackedArray<std::int64_t> a(32, 8);
  a.add(1, 100);  // block 0: bound 105, far past the residual 10 (beyond 15): every changed slot is written
  a.add(2, 2);
  a.add(4, 3);
  a.add(9, 5);   // block 1: bound 5, within the residual
  a.add(17, 6);  // block 2: bound 11, just past it: the slots past half of it (5) are written
  a.add(18, 5);
  // The first partial delta looks at every block that changed (all passed the residual 0 watched before it).
  ByteWriter w;
  EXPECT_EQ(a.backup_partial_delta(w, 10.5), 10);  // min(divergence 105, residual 10)
  EXPECT_EQ(a.divergence(), 10);
  EXPECT_EQ(delta_entries(w, 32), (Entries{{1, 100}, {2, 2}, {4, 3}, {17, 6}}));
  EXPECT_EQ(a.dirty_count(), 2u);  // slots 9 and 18 wait for a later delta
  // Later ones look only at the blocks whose bound passed the residual since.
  a.add(9, 4);   // block 1: bound 9, within the residual: not looked at
  a.add(1, 20);  // block 0: bound 20 passes it
  EXPECT_EQ(a.divergence(), 20);
  ByteWriter w2;
  EXPECT_EQ(a.backup_partial_delta(w2, 10.5), 10);
  EXPECT_EQ(delta_entries(w2, 32), (Entries{{1, 120}}));
  EXPECT_EQ(a.dirty_count(), 2u);
  // A smaller residual than the last one: every block past it is looked at (here both far past it).
  ByteWriter w3;
  EXPECT_EQ(a.backup_partial_delta(w3, 3), 3);
  EXPECT_EQ(delta_entries(w3, 32), (Entries{{9, 9}, {18, 5}}));
  EXPECT_EQ(a.dirty_count(), 0u);
  a.add(5, 1);
  ByteWriter all;
  EXPECT_EQ(a.backup_partial_delta(all, 0), 0);  // no residual: whole
  EXPECT_EQ(a.divergence(), 0);
  EXPECT_EQ(a.dirty_count(), 0u);
}

TEST(BlockTrackedArray, ChangesThatCancelAreNotWritten) {
  BlockTrackedArray<std::int64_t> a(16, 8);
  a.add(2, 7);
  a.add(2, -7);
  EXPECT_EQ(a.divergence(), 14);  // the bound does not know they cancel
  EXPECT_EQ(a.dirty_count(), 0u);
  ByteWriter w;
  a.write_delta(w);
  TrackedArray<std::int64_t> reader(16, Metric::MaxAbs);
  const auto bytes = w.take();
  ByteReader r(bytes);
  EXPECT_TRUE(reader.read_delta(r).indices.empty());
}

TEST(BlockTrackedArray, PayloadsAreTrackedArrayPayloads) {
  BlockTrackedArray<double> a(50, 8);
  TrackedArray<double> t(50, Metric::MaxAbs);
  for (std::size_t i = 1; i < 50; i += 3) {
    a.add(i, 0.5 * static_cast<double>(i));
    t.add(i, 0.5 * static_cast<double>(i));
  }
  EXPECT_EQ(full_bytes(a), full_bytes(t));
  EXPECT_EQ(delta_bytes(a), delta_bytes(t));  // both in index order here (TrackedArray: first-change order)
  BlockTrackedArray<double> b(50, 4);
  const auto bytes = full_bytes(t);
  ByteReader r(bytes);
  b.read_full(r);
  const std::vector<double> read = b.values();
  EXPECT_TRUE(std::equal(read.begin(), read.end(), t.values().begin(), t.values().end()));
  EXPECT_EQ(b.divergence(), 0);
}

TEST(BlockTrackedArray, RestoreThenContinueEqualsAnUninterruptedRun) {
  std::mt19937_64 rng(8);
  BlockTrackedArray<std::int64_t> live(300, 8);
  std::vector<std::vector<std::uint8_t>> backups{full_bytes(live)};
  std::vector<bool> is_full{true};
  for (int k = 0; k < 5000; ++k) {
    live.add(rng() % 300, static_cast<std::int64_t>(rng() % 50));
    if (live.divergence() > 400) {
      ByteWriter w;
      live.write_delta(w);
      live.mark_backed_up();
      backups.push_back(w.take());
      is_full.push_back(false);
    }
  }
  ByteWriter w;
  live.write_delta(w);
  live.mark_backed_up();
  backups.push_back(w.take());
  is_full.push_back(false);
  BlockTrackedArray<std::int64_t> restored(300, 8);
  for (std::size_t j = 0; j < backups.size(); ++j) {
    ByteReader r(backups[j]);
    if (is_full[j]) {
      restored.read_full(r);
    } else {
      restored.apply_delta(r);
    }
  }
  EXPECT_EQ(restored.distance(live), 0);
  EXPECT_EQ(restored.divergence(), 0);
  for (int k = 0; k < 1000; ++k) {
    const auto i = rng() % 300;
    const auto d = static_cast<std::int64_t>(rng() % 50);
    live.add(i, d);
    restored.add(i, d);
  }
  EXPECT_EQ(restored.distance(live), 0);
  EXPECT_EQ(restored.divergence(), live.divergence());
  EXPECT_EQ(delta_bytes(restored), delta_bytes(live));
}

TEST(BlockTrackedArray, UntrackedHoldsTheSameValuesAndWritesFullCopies) {
  BlockTrackedArray<std::int64_t> tracked(40, 8), untracked(40, 8);
  untracked.stop_tracking();
  EXPECT_FALSE(untracked.tracking());
  for (std::size_t i = 0; i < 40; i += 7) {
    tracked.add(i, 3);
    untracked.add(i, 3);
  }
  untracked.mark_backed_up();
  EXPECT_EQ(untracked.distance(tracked), 0);
  EXPECT_TRUE(std::isinf(untracked.divergence()));
  EXPECT_EQ(untracked.dirty_count(), 40u);
  ByteWriter w;
  EXPECT_EQ(untracked.backup_partial_delta(w, 100), 0);
  TrackedArray<std::int64_t> reader(40, Metric::MaxAbs);
  const auto bytes = w.take();
  ByteReader r(bytes);
  reader.apply_delta(r);
  const std::vector<std::int64_t> values = tracked.values();
  EXPECT_TRUE(std::equal(reader.values().begin(), reader.values().end(), values.begin(), values.end()));
}

// Measured at backups (measure_at_backups): the same values as a tracked array fed the same changes, divergence()
// exactly the brute-force distance to what the store holds, a partial delta writes exactly the slots farther than
// the residual (and returns the largest distance left), and the store's state plus the next delta is the current
// state bit for bit.
// |a - b| as the container measures it (a double difference in double, an int64 one exactly).
template <typename T>
double slot_distance(T a, T b) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    const __int128 d = static_cast<__int128>(a) - b;
    return static_cast<double>(d < 0 ? -d : d);
  } else {
    return std::fabs(a - b);
  }
}

template <typename T>
double measured_truth(const std::vector<T>& a, const std::vector<T>& b) {
  double most = 0;
  for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, slot_distance(a[i], b[i]));
  return most;
}

template <typename T>
void check_measured_run(std::size_t n, std::size_t block, bool one_way, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " block " << block << " one_way " << one_way << " seed " << seed);
  std::mt19937_64 rng(seed);
  BlockTrackedArray<T> a(n, block), tracked(n, block);
  a.measure_at_backups();
  ASSERT_TRUE(a.measured_at_backups());
  ASSERT_TRUE(a.tracking());
  ASSERT_FALSE(tracked.measured_at_backups());
  std::vector<T> stored(n);
  for (int step = 0; step < 2000; ++step) {
    const T d = random_change<T>(rng, one_way);
    if (rng() % 4 == 0) {  // one item's slots in one call, as Count-Min updates its rows
      std::vector<std::uint32_t> slots;
      for (int k = 0; k < 3; ++k) slots.push_back(static_cast<std::uint32_t>(rng() % n));
      ASSERT_EQ(a.add_each(slots, d), tracked.add_each(slots, d));
    } else if (rng() % 5 == 0 && !one_way) {
      const std::size_t i = rng() % n;
      a.set(i, static_cast<T>(a[i] + d));
      tracked.set(i, static_cast<T>(tracked[i] + d));
    } else {
      const std::size_t i = rng() % n;
      a.add(i, d);
      tracked.add(i, d);
    }
    ASSERT_EQ(a.distance(tracked), 0) << "step " << step;
    ASSERT_EQ(a.divergence(), measured_truth(a.values(), stored)) << "step " << step;
    std::size_t differing = 0;
    for (std::size_t i = 0; i < n; ++i) differing += a[i] != stored[i] ? 1 : 0;
    ASSERT_EQ(a.dirty_count(), differing);
    switch (rng() % 61) {
      case 0: {  // whole delta
        ByteWriter w;
        a.write_delta(w);
        a.mark_backed_up();
        const auto bytes = w.take();
        std::size_t entries = 0;
        {
          TrackedArray<T> reader(n, Metric::MaxAbs);
          ByteReader r(bytes);
          entries = reader.read_delta(r).indices.size();
        }
        EXPECT_EQ(entries, differing) << "a whole delta writes the slots that differ, no more";
        apply_payload(stored, bytes, false);
        ASSERT_EQ(measured_truth(a.values(), stored), 0);
        ASSERT_EQ(a.divergence(), 0);
        break;
      }
      case 1:
      case 2:
      case 3: {  // partial delta
        const double residual = std::uniform_real_distribution<double>(0, 3000)(rng);
        const double keep = std::is_same_v<T, double> ? residual : std::floor(residual);
        std::vector<std::uint32_t> past;
        double left_expected = 0;
        const std::vector<T> now = a.values();
        for (std::size_t i = 0; i < n; ++i) {
          const double dist = slot_distance(now[i], stored[i]);
          if (dist > keep) {
            past.push_back(static_cast<std::uint32_t>(i));
          } else {
            left_expected = std::max(left_expected, dist);
          }
        }
        ByteWriter w;
        const double left = a.backup_partial_delta(w, residual);
        const auto bytes = w.take();
        std::vector<std::uint32_t> written;
        {
          TrackedArray<T> reader(n, Metric::MaxAbs);
          ByteReader r(bytes);
          const auto delta = reader.read_delta(r);
          written.assign(delta.indices.begin(), delta.indices.end());
        }
        std::sort(written.begin(), written.end());
        EXPECT_EQ(written, past) << "residual " << residual;
        apply_payload(stored, bytes, false);
        ASSERT_EQ(left, left_expected);
        ASSERT_LE(left, residual);
        ASSERT_EQ(a.divergence(), measured_truth(a.values(), stored));
        break;
      }
      case 4: {  // a partial delta given no residual: whole
        ByteWriter w;
        ASSERT_EQ(a.backup_partial_delta(w, 0), 0);
        apply_payload(stored, w.take(), false);
        ASSERT_EQ(a.dirty_count(), 0u);
        ASSERT_EQ(a.divergence(), 0);
        break;
      }
      case 5: {  // full backup, then restored into a fresh array measured at backups
        ByteWriter w;
        a.write_full(w);
        EXPECT_EQ(full_bytes(a), full_bytes(tracked)) << "the same payloads as the tracked layout";
        a.mark_backed_up();
        const auto bytes = w.take();
        apply_payload(stored, bytes, true);
        BlockTrackedArray<T> restored(n, block);
        restored.measure_at_backups();
        ByteReader r(bytes);
        restored.read_full(r);
        ASSERT_EQ(restored.distance(a), 0);
        ASSERT_EQ(restored.divergence(), 0);
        break;
      }
      default:
        break;
    }
  }
  ByteWriter w;
  a.write_delta(w);
  apply_payload(stored, w.take(), false);
  const std::vector<T> values = a.values();
  if constexpr (std::is_same_v<T, double>) {
    EXPECT_EQ(0, std::memcmp(stored.data(), values.data(), n * sizeof(T)));
  } else {
    EXPECT_EQ(stored, values);
  }
}

TEST(BlockTrackedArray, MeasuredAtBackupsIsExactAndWritesWhatATrackedArrayWouldHold) {
  for (const std::size_t block : {1, 8}) {
    for (const std::size_t n : {1, 7, 300}) {
      for (const bool one_way : {true, false}) {
        for (std::uint64_t seed = 1; seed <= 2; ++seed) {
          check_measured_run<std::int64_t>(n, block, one_way, seed);
          check_measured_run<double>(n, block, one_way, seed + 10);
        }
      }
    }
  }
}

TEST(BlockTrackedArray, MeasuredAtBackupsAppliesDeltasAndCountsNanAsInfinite) {
  BlockTrackedArray<std::int64_t> a(16, 1), source(16, 1);
  a.measure_at_backups();
  source.add(3, 40);
  source.add(9, 2);
  const auto delta = delta_bytes(source);
  ByteReader r(delta);
  a.apply_delta(r);
  EXPECT_EQ(a[3], 40);
  EXPECT_EQ(a.divergence(), 0) << "an applied delta is the backed-up state";
  a.add(3, 5);
  EXPECT_EQ(a.divergence(), 5);
  BlockTrackedArray<double> b(4, 1);
  b.measure_at_backups();
  b.add(2, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isinf(b.divergence()));
  ByteWriter w;
  EXPECT_TRUE(std::isnan(b.backup_partial_delta(w, 1)) == false);
  EXPECT_EQ(b.divergence(), 0) << "a NaN slot is past any residual: written";
  // stop_tracking after it: untracked, as ever.
  a.stop_tracking();
  EXPECT_FALSE(a.tracking());
  EXPECT_TRUE(std::isinf(a.divergence()));
}

TEST(BlockTrackedArray, NanAndSaturationStayUpperBounds) {
  BlockTrackedArray<double> a(8, 4);
  a.add(1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isinf(a.divergence()));
  BlockTrackedArray<std::int64_t> b(8, 4);
  b.add(0, std::numeric_limits<std::int64_t>::max());
  b.add(1, std::numeric_limits<std::int64_t>::min());
  b.add(2, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(b.divergence(), static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
}

// int64 bounds are stored in 32 bits: one that passes 2^32 - 1 saturates, the divergence becomes the largest value
// (a backup is forced), and every backup still writes the slot, whatever residual it leaves (a residual that large
// is lowered below the saturation, so that a saturating slot is always looked at).
TEST(BlockTrackedArray, BoundsPastThirtyTwoBitsSaturateAndTheirSlotsAreWritten) {
  for (const std::size_t block : {std::size_t{1}, std::size_t{4}}) {
    SCOPED_TRACE(::testing::Message() << "block " << block);
    BlockTrackedArray<std::int64_t> a(16, block);
    std::vector<std::int64_t> stored(16);
    auto partial = [&](double residual) {
      ByteWriter w;
      const double left = a.backup_partial_delta(w, residual);
      apply_payload(stored, w.take(), false);
      EXPECT_LE(brute_max_abs<std::int64_t>(a.values(), stored), left);
      EXPECT_EQ(a.divergence(), left);
      return left;
    };
    a.add(0, 3'000'000'000);
    EXPECT_EQ(a.divergence(), 3e9);  // exact below the saturation
    a.add(8, 1'500'000'000);
    EXPECT_EQ(partial(4e9), 3e9);  // watches 4e9; slot 0 past half of it is written (per slot) or left (blocks)
    a.add(8, 3'000'000'000);       // slot 8's bound: 4.5e9 > 2^32 - 1
    EXPECT_EQ(a.divergence(), static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
    a.add(8, 5);  // stays saturated
    EXPECT_EQ(a.divergence(), static_cast<double>(std::numeric_limits<std::uint64_t>::max()));
    EXPECT_LT(partial(4e9), 4.3e9);  // slot 8 written
    EXPECT_EQ(stored[8], 4'500'000'005);
    a.add(3, 5'000'000'000);  // saturates a bound under a residual above the saturation
    EXPECT_GT(a.divergence(), 1e19);
    EXPECT_LT(partial(1e19), 4.3e9);
    EXPECT_EQ(stored[3], 5'000'000'000);
    for (int k = 0; k < 3; ++k) a.add(5, 5'000'000'000);  // saturated, then moved again: listed once
    ByteWriter once;
    a.backup_partial_delta(once, 1e19);
    ByteReader r(once.buffer());
    const auto d = a.read_delta(r);
    EXPECT_EQ(d.indices, (std::vector<std::uint32_t>{5}));
    stored[5] = d.values.at(0);
    ByteWriter w;
    a.write_delta(w);
    a.mark_backed_up();
    apply_payload(stored, w.take(), false);
    EXPECT_EQ(stored, a.values());
    EXPECT_EQ(a.divergence(), 0);
  }
}

TEST(BlockTrackedArray, RejectsBadSizesAndBlocks) {
  EXPECT_THROW(BlockTrackedArray<std::int64_t>(10, 0), ConfigError);
  EXPECT_THROW(BlockTrackedArray<std::int64_t>(10, 6), ConfigError);
  EXPECT_THROW(BlockTrackedArray<std::int64_t>(std::size_t{1} << 33, 8), ConfigError);
  EXPECT_NO_THROW(BlockTrackedArray<std::int64_t>(0, 8));
}

TEST(BlockTrackedArray, CorruptAndTruncatedPayloadsLeaveItUnchanged) {
  auto read_full_to = [](auto& c, ByteReader& r) { c.read_full(r); };
  auto apply_delta_to = [](auto& c, ByteReader& r) { c.apply_delta(r); };
  BlockTrackedArray<std::int64_t> src(20, 4);
  for (std::size_t i = 0; i < 20; i += 3) src.add(i, static_cast<std::int64_t>(i) + 1);
  BlockTrackedArray<std::int64_t> target(20, 4);
  target.add(5, 9);
  expect_prefixes_rejected(target, full_bytes(src), read_full_to);
  expect_prefixes_rejected(target, delta_bytes(src), apply_delta_to);
  expect_rejected(target, full_bytes(BlockTrackedArray<std::int64_t>(21, 4)), read_full_to);
  expect_rejected(target, delta_bytes(BlockTrackedArray<std::int64_t>(19, 4)), apply_delta_to);
  expect_rejected(target, delta_bytes(src), read_full_to);  // a delta is not a full copy
  expect_rejected(target, full_bytes(BlockTrackedArray<double>(20, 4)), read_full_to);
  // An index out of range.
  TrackedArray<std::int64_t> big(40, Metric::MaxAbs);
  big.add(30, 1);
  auto bytes = delta_bytes(big);
  bytes[4] = 20;  // the header's size now says 20 slots; the index 30 is out of range
  expect_rejected(target, bytes, apply_delta_to);
}

// Measured at backups: restores, compensation, extreme values and residuals in measured mode.
template <typename T>
void scratch_measured(std::size_t n, std::size_t block, std::uint64_t seed, bool extremes) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " block " << block << " seed " << seed << " ext " << extremes);
  std::mt19937_64 rng(seed);
  auto a = std::make_unique<BlockTrackedArray<T>>(n, block);
  a->measure_at_backups();
  std::vector<T> stored(n);                      // what the store holds (full + deltas applied)
  std::vector<std::vector<std::uint8_t>> chain;  // payloads since last full (full first)
  {
    ByteWriter w;
    a->write_full(w);
    chain.push_back(w.take());
  }
  const double residuals[] = {-1,
                              0,
                              0.3,
                              1,
                              2.5,
                              7,
                              100,
                              1e6,
                              4294967294.0,
                              4294967295.0,
                              1e12,
                              1e30,
                              std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN()};
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 20);
    const std::size_t i = rng() % n;
    if (op < 8) {
      a->add(i, random_change<T>(rng, false, 1000));
    } else if (op < 10) {
      T v = random_change<T>(rng, false, 1000);
      if (extremes && rng() % 3 == 0) {
        if constexpr (std::is_same_v<T, std::int64_t>) {
          v = rng() % 2 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
        } else {
          v = rng() % 2 ? 1e300 : -0.0;
        }
      }
      a->set(i, v);
    } else if (op < 12) {
      std::vector<std::uint32_t> slots{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(rng() % n)};
      a->add_each(slots, random_change<T>(rng, true, 1000));
    } else if (op == 12) {
      a->add_to_all(random_change<T>(rng, true, 500));
    } else if (op == 13 || op == 14) {  // partial delta
      const double r = residuals[rng() % std::size(residuals)];
      ByteWriter w;
      const double left = a->backup_partial_delta(w, r);
      auto bytes = w.take();
      apply_payload(stored, bytes, false);
      chain.push_back(bytes);
      double truth = 0;
      for (std::size_t k = 0; k < n; ++k) {
        if constexpr (std::is_same_v<T, double>) {
          if (std::bit_cast<std::uint64_t>((*a)[k]) == std::bit_cast<std::uint64_t>(stored[k])) continue;
        }
        truth = std::max(truth, slot_distance((*a)[k], stored[k]));
      }
      ASSERT_GE(left, truth) << "residual " << r << " step " << step;
      ASSERT_EQ(a->divergence(), truth) << "residual " << r;
      if (!(r > 0)) {
        ASSERT_EQ(left, 0);
        ASSERT_EQ(0, std::memcmp(stored.data(), a->values().data(), n * sizeof(T)));
      }
    } else if (op == 15) {  // whole delta
      ByteWriter w;
      a->write_delta(w);
      a->mark_backed_up();
      auto bytes = w.take();
      apply_payload(stored, bytes, false);
      chain.push_back(bytes);
      ASSERT_EQ(0, std::memcmp(stored.data(), a->values().data(), n * sizeof(T)));
      ASSERT_EQ(a->divergence(), 0);
    } else if (op == 16) {  // full
      ByteWriter w;
      a->write_full(w);
      a->mark_backed_up();
      chain.clear();
      chain.push_back(w.take());
      stored = a->values();
    } else if (op == 17 || op == 18) {  // crash: a fresh measured array restored from the chain
      auto r = std::make_unique<BlockTrackedArray<T>>(n, block);
      r->measure_at_backups();
      for (std::size_t c = 0; c < chain.size(); ++c) {
        ByteReader rd(chain[c]);
        if (c == 0) {
          if (rng() % 2) {
            r->read_full(rd);
          } else {
            r->apply_full(r->read_full_values(rd));
          }
        } else if (rng() % 2) {
          r->apply_delta(rd);
        } else {
          r->apply_delta(r->read_delta(rd));
        }
      }
      ASSERT_EQ(0, std::memcmp(stored.data(), r->values().data(), n * sizeof(T)));
      ASSERT_EQ(r->divergence(), 0);
      ASSERT_EQ(r->dirty_count(), 0u);
      a = std::move(r);
    } else {
      ASSERT_EQ(a->divergence(), measured_truth(a->values(), stored));
    }
  }
}

TEST(BlockTrackedArray, MeasuredAtBackupsSurvivesRestoresCompensationAndExtremes) {
  for (const std::size_t block : {1, 4}) {
    for (const std::size_t n : {1, 5, 64}) {
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        scratch_measured<std::int64_t>(n, block, seed, false);
        scratch_measured<std::int64_t>(n, block, seed, true);
        scratch_measured<double>(n, block, seed, false);
      }
    }
  }
}
}  // namespace
}  // namespace afs
