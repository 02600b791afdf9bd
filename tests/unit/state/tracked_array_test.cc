// Unit tests for TrackedArray (DESIGN.md section 3, and section 9: "every tracked container's divergence equals a
// brute-force recomputation; every snapshot/restore/continue equals an uninterrupted run").
#include "afstream/state/tracked_array.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/state/snapshot.h"
#include "state_test_util.h"

namespace afs {
namespace {

using namespace afs::testing_state;

constexpr Metric kMetrics[] = {Metric::MaxAbs, Metric::L1, Metric::L2};

// Brute-force distance between two plain arrays, computed independently of the library (exact for int64).
template <typename T>
double brute(Metric m, const std::vector<T>& cur, const std::vector<T>& base) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    unsigned __int128 mx = 0, l1 = 0, l2 = 0;
    for (std::size_t i = 0; i < cur.size(); ++i) {
      const __int128 d = static_cast<__int128>(cur[i]) - base[i];
      const auto a = static_cast<unsigned __int128>(d < 0 ? -d : d);
      mx = std::max(mx, a);
      l1 += a;
      l2 += a * a;
    }
    if (m == Metric::MaxAbs) return static_cast<double>(mx);
    if (m == Metric::L1) return static_cast<double>(l1);
    return static_cast<double>(std::sqrt(static_cast<long double>(l2)));
  } else {
    long double mx = 0, l1 = 0, l2 = 0;
    for (std::size_t i = 0; i < cur.size(); ++i) {
      const long double d = std::fabs(static_cast<long double>(cur[i]) - base[i]);
      mx = std::max(mx, d);
      l1 += d;
      l2 += d * d;
    }
    if (m == Metric::MaxAbs) return static_cast<double>(mx);
    if (m == Metric::L1) return static_cast<double>(l1);
    return static_cast<double>(std::sqrt(l2));
  }
}

template <typename T>
void expect_close(double got, double want) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    EXPECT_DOUBLE_EQ(got, want);
  } else {
    EXPECT_NEAR(got, want, 1e-9 * (1.0 + std::fabs(want)));
  }
}

template <typename T>
T random_value(std::mt19937_64& rng, bool non_negative) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return non_negative ? static_cast<T>(rng() % 6) : static_cast<T>(rng() % 2001) - 1000;
  } else {
    std::uniform_real_distribution<double> u(non_negative ? 0.0 : -1000.0, 1000.0);
    return u(rng);
  }
}

template <typename T>
std::vector<T> values_of(const TrackedArray<T>& a) {
  return std::vector<T>(a.values().begin(), a.values().end());
}

// One random operation: mostly adds, some sets (unless increment-only). Returns the slot written.
template <typename T>
std::size_t random_update(TrackedArray<T>& a, std::vector<T>* model, std::mt19937_64& rng, bool increment_only) {
  const std::size_t i = rng() % a.size();
  if (!increment_only && rng() % 8 == 0) {
    const T v = random_value<T>(rng, false);
    a.set(i, v);
    if (model) (*model)[i] = v;
  } else {
    const T d = random_value<T>(rng, increment_only);
    a.add(i, d);
    if (model) (*model)[i] += d;
  }
  return i;
}

template <typename T>
class TrackedArrayTest : public ::testing::Test {};
using ValueTypes = ::testing::Types<std::int64_t, double>;
TYPED_TEST_SUITE(TrackedArrayTest, ValueTypes);

TYPED_TEST(TrackedArrayTest, DivergenceMatchesBruteForce) {
  using T = TypeParam;
  for (Metric m : kMetrics) {
    for (bool increment_only : {false, true}) {
      SCOPED_TRACE(std::string(to_string(m)) + (increment_only ? " increment-only" : " mixed"));
      std::mt19937_64 rng(42 + static_cast<int>(m) + (increment_only ? 100 : 0));
      const std::size_t n = 97;
      TrackedArray<T> a(n, m);
      TrackedArray<T> backed_up = a;
      std::vector<T> cur(n, T{}), base(n, T{});
      std::set<std::size_t> touched;
      double high_water = 0;
      for (int step = 0; step < 3000; ++step) {
        const auto r = rng() % 100;
        if (r < 2) {
          a.mark_backed_up();
          backed_up = a;
          base = cur;
          touched.clear();
          high_water = 0;
        } else if (r < 5) {
          // The delta applied to a copy of the backed-up state reproduces the current state exactly.
          TrackedArray<T> c = backed_up;
          const auto d = delta_bytes(a);
          ByteReader rd(d);
          c.apply_delta(rd);
          rd.expect_end("delta");
          ASSERT_EQ(values_of(c), cur);
          EXPECT_EQ(c.divergence(), 0.0);
          EXPECT_EQ(c.dirty_count(), 0u);
        } else {
          touched.insert(random_update(a, &cur, rng, increment_only));
        }
        const double now = brute(m, cur, base);
        high_water = std::max(high_water, now);
        if (m == Metric::MaxAbs) {
          expect_close<T>(a.divergence(), high_water);
          if (increment_only) expect_close<T>(a.divergence(), now);
          EXPECT_GE(a.divergence() * (1 + 1e-12), now);
        } else {
          expect_close<T>(a.divergence(), now);
        }
        EXPECT_EQ(a.dirty_count(), touched.size());
        if (step % 50 == 0) {
          ASSERT_EQ(values_of(a), cur);
          expect_close<T>(a.distance(backed_up), now);
        }
        if (this->HasFailure()) return;
      }
    }
  }
}

TYPED_TEST(TrackedArrayTest, DirtyCountCountsWrittenSlots) {
  using T = TypeParam;
  TrackedArray<T> a(10, Metric::L1);
  a.add(3, T{1});
  a.add(3, T{1});
  a.set(7, T{0});  // written, even though the value did not change
  EXPECT_EQ(a.dirty_count(), 2u);
  a.mark_backed_up();
  EXPECT_EQ(a.dirty_count(), 0u);
  EXPECT_EQ(a.divergence(), 0.0);
  EXPECT_EQ(a.get(3), T{2});
}

TYPED_TEST(TrackedArrayTest, FullRoundTrip) {
  using T = TypeParam;
  for (Metric m : kMetrics) {
    std::mt19937_64 rng(7);
    TrackedArray<T> a(300, m);
    for (int k = 0; k < 2000; ++k) random_update<T>(a, nullptr, rng, false);
    const auto full = full_bytes(a);
    TrackedArray<T> b(300, m);
    b.add(5, T{3});  // a dirty target: read_full replaces it and leaves it backed up
    ByteReader r(full);
    b.read_full(r);
    r.expect_end("full");
    EXPECT_EQ(values_of(b), values_of(a));
    EXPECT_EQ(b.divergence(), 0.0);
    EXPECT_EQ(b.dirty_count(), 0u);
    EXPECT_EQ(b.distance(a), 0.0);
  }
}

// Mode none (Operator::stop_tracking): an untracked array holds the values a tracked one fed the same updates holds,
// its divergence is unknown (infinite), and every delta it writes, partial ones too, holds every slot and restores
// it exactly.
TYPED_TEST(TrackedArrayTest, UntrackedHoldsTheSameValuesAndWritesEverySlot) {
  using T = TypeParam;
  for (Metric m : kMetrics) {
    std::mt19937_64 rng(9), same(9);
    TrackedArray<T> tracked(200, m), untracked(200, m);
    for (int k = 0; k < 30; ++k) random_update<T>(untracked, nullptr, rng, false);
    for (int k = 0; k < 30; ++k) random_update<T>(tracked, nullptr, same, false);
    untracked.stop_tracking();
    EXPECT_FALSE(untracked.tracking());
    for (int k = 0; k < 2000; ++k) {
      random_update<T>(untracked, nullptr, rng, false);
      random_update<T>(tracked, nullptr, same, false);
    }
    EXPECT_EQ(values_of(untracked), values_of(tracked));
    EXPECT_EQ(untracked.divergence(), std::numeric_limits<double>::infinity());
    EXPECT_EQ(untracked.dirty_count(), 200u);
    untracked.mark_backed_up();  // changes nothing
    EXPECT_EQ(untracked.dirty_count(), 200u);
    ByteWriter partial;
    EXPECT_EQ(untracked.backup_partial_delta(partial, 5.0), 0.0);
    for (const auto& bytes : {delta_bytes(untracked), partial.take()}) {
      TrackedArray<T> restored(200, m);  // all 0: only a delta of every slot gives the values back
      ByteReader r(bytes);
      restored.apply_delta(r);
      r.expect_end("delta");
      EXPECT_EQ(values_of(restored), values_of(tracked));
      EXPECT_EQ(restored.divergence(), 0.0);
    }
  }
}

// A worker backs up (full, then deltas whenever divergence exceeds theta) into sealed snapshots; a replacement
// restores from them and continues: it must match the uninterrupted run exactly, including later deltas.
TYPED_TEST(TrackedArrayTest, SnapshotRestoreContinueEqualsUninterrupted) {
  using T = TypeParam;
  const std::uint32_t type_id = type_id_of("test.tracked_array");
  for (Metric m : kMetrics) {
    SCOPED_TRACE(to_string(m));
    const double theta = 40.0;
    TrackedArray<T> a(64, m);
    std::vector<std::vector<std::uint8_t>> chain;
    chain.push_back(seal_snapshot(type_id, SnapshotKind::Full, full_bytes(a)));
    a.mark_backed_up();
    std::mt19937_64 ops(99);
    auto step = [&](TrackedArray<T>& c, std::vector<std::vector<std::uint8_t>>* log) {
      random_update<T>(c, nullptr, ops, false);
      if (c.divergence() > theta) {
        if (log) log->push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(c)));
        c.mark_backed_up();
      }
    };
    for (int k = 0; k < 1500; ++k) step(a, &chain);
    chain.push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(a)));  // the final backup
    a.mark_backed_up();
    ASSERT_GT(chain.size(), 3u);

    TrackedArray<T> b(64, m);
    for (const auto& snap : chain) {
      const OpenedSnapshot s = open_snapshot(snap, type_id);
      ByteReader r(s.payload);
      if (s.kind == SnapshotKind::Full) {
        b.read_full(r);
      } else {
        b.apply_delta(r);
      }
      r.expect_end("snapshot payload");
    }
    ASSERT_EQ(values_of(b), values_of(a));

    // Continue both with the same operations.
    const auto ops_state = ops;
    std::vector<std::vector<std::uint8_t>> log_a, log_b;
    for (int k = 0; k < 1500; ++k) step(a, &log_a);
    ops = ops_state;
    for (int k = 0; k < 1500; ++k) step(b, &log_b);
    EXPECT_EQ(values_of(b), values_of(a));
    EXPECT_EQ(log_b, log_a);
    EXPECT_TRUE(fingerprint(b) == fingerprint(a));
  }
}

TYPED_TEST(TrackedArrayTest, CorruptDeltaLeavesArrayUnchanged) {
  using T = TypeParam;
  std::mt19937_64 rng(5);
  TrackedArray<T> writer(50, Metric::L1);
  for (int k = 0; k < 100; ++k) random_update<T>(writer, nullptr, rng, false);
  writer.mark_backed_up();
  TrackedArray<T> target = writer;  // the backed-up state, plus local changes of its own
  target.add(1, T{7});
  target.add(2, T{9});
  for (int k = 0; k < 30; ++k) random_update<T>(writer, nullptr, rng, false);
  const auto delta = delta_bytes(writer);
  expect_prefixes_rejected(target, delta, [](auto& c, ByteReader& r) { c.apply_delta(r); });
  // Sanity: the whole delta is accepted.
  TrackedArray<T> ok = target;
  ByteReader r(delta);
  ok.apply_delta(r);

  // Crafted corruptions.
  const std::uint16_t tag = std::is_same_v<T, std::int64_t> ? 0x0102 : 0x0202;
  auto craft = [&](std::uint64_t size, std::vector<std::uint32_t> idx, std::vector<T> vals, std::uint16_t t,
                   std::uint16_t version = 1) {
    ByteWriter w;
    w.put<std::uint16_t>(t);
    w.put<std::uint16_t>(version);
    w.put<std::uint64_t>(size);
    w.put_array<std::uint32_t>(idx);
    w.put_array<T>(vals);
    return w.take();
  };
  auto apply = [](auto& c, ByteReader& rd) { c.apply_delta(rd); };
  expect_rejected(target, craft(50, {0, 50}, {T{1}, T{2}}, tag), apply);  // index out of range
  expect_rejected(target, craft(50, {0, 1}, {T{1}}, tag), apply);         // count mismatch
  expect_rejected(target, craft(51, {0}, {T{1}}, tag), apply);            // wrong size
  expect_rejected(target, craft(50, {0}, {T{1}}, tag, 2), apply);         // unknown version
  expect_rejected(target, craft(50, {0}, {T{1}}, tag ^ 0x0300), apply);   // another container type
  expect_rejected(target, full_bytes(writer), apply);                     // a full payload is not a delta
}

TYPED_TEST(TrackedArrayTest, CorruptFullLeavesArrayUnchanged) {
  using T = TypeParam;
  std::mt19937_64 rng(6);
  TrackedArray<T> a(40, Metric::L2);
  for (int k = 0; k < 100; ++k) random_update<T>(a, nullptr, rng, false);
  TrackedArray<T> target(40, Metric::L2);
  target.add(3, T{4});
  const auto full = full_bytes(a);
  expect_prefixes_rejected(target, full, [](auto& c, ByteReader& r) { c.read_full(r); });
  expect_rejected(target, full_bytes(TrackedArray<T>(41, Metric::L2)), [](auto& c, ByteReader& r) { c.read_full(r); });
  expect_rejected(target, delta_bytes(a), [](auto& c, ByteReader& r) { c.read_full(r); });
}

TEST(TrackedArray, DoubleCancellationIsRecomputed) {
  // The running L2 sum goes negative (4000 absorbed by 1e20, then both removed); the array recomputes it from its
  // dirty slots, so later values are exact again.
  TrackedArray<double> a(4, Metric::L2);
  a.set(0, 1e10);
  a.set(1, std::sqrt(4000.0));
  a.set(0, 0.0);
  a.set(1, 0.0);
  EXPECT_EQ(a.divergence(), 0.0);
  a.set(2, 3.0);
  a.set(3, 4.0);
  EXPECT_DOUBLE_EQ(a.divergence(), 5.0);
}

TEST(TrackedArray, WrongValueTypeIsRejected) {
  TrackedArray<double> d(8, Metric::L1);
  d.add(1, 2.5);
  TrackedArray<std::int64_t> i(8, Metric::L1);
  expect_rejected(i, full_bytes(d), [](auto& c, ByteReader& r) { c.read_full(r); });
  expect_rejected(i, delta_bytes(d), [](auto& c, ByteReader& r) { c.apply_delta(r); });
}

TEST(TrackedArray, RejectsNewKeysMetric) { EXPECT_THROW(TrackedArray<std::int64_t>(4, Metric::NewKeys), ConfigError); }

TEST(TrackedArray, DistanceRequiresSameSize) {
  TrackedArray<std::int64_t> a(4, Metric::L1), b(5, Metric::L1);
  EXPECT_THROW(static_cast<void>(a.distance(b)), std::invalid_argument);
}

TEST(TrackedArray, LargeArrayDeltaIsSparse) {
  TrackedArray<std::int64_t> a(1'000'000, Metric::MaxAbs);
  for (std::size_t i = 0; i < 1000; ++i) a.add(i * 997 % a.size(), 1);
  EXPECT_EQ(a.dirty_count(), 1000u);
  EXPECT_LT(delta_bytes(a).size(), 1000u * 12 + 64);
  EXPECT_EQ(a.divergence(), 1.0);
}

// Partial deltas (general-bounds.md §3.6): a delta of only the slots that moved past the residual.
template <typename T>
std::uint64_t delta_entries(const std::vector<std::uint8_t>& delta) {
  // header, then the u64 count of indices
  TrackedArray<T> probe(1, Metric::MaxAbs);
  const std::size_t header = full_bytes(probe).size() - sizeof(std::uint64_t) - sizeof(T);
  std::uint64_t k = 0;
  std::memcpy(&k, delta.data() + header, sizeof k);
  return k;
}

TEST(TrackedArray, PartialDeltaWritesOnlyTheSlotsPastTheResidual) {
  TrackedArray<std::int64_t> a(100, Metric::MaxAbs);
  TrackedArray<std::int64_t> stored(100, Metric::MaxAbs);
  ByteWriter first;
  a.add(7, 3);
  EXPECT_EQ(a.backup_partial_delta(first, 10), 0);  // nothing watched yet: a whole delta, then watch 10
  ByteReader r1(first.buffer());
  stored.apply_delta(r1);
  a.add(3, 15);
  a.add(5, 5);
  a.add(9, 10);  // exactly the residual: not past it
  ByteWriter w;
  EXPECT_EQ(a.backup_partial_delta(w, 10), 10);
  EXPECT_EQ(delta_entries<std::int64_t>(w.buffer()), 1u);  // slot 3 only
  EXPECT_EQ(a.divergence(), 10);
  ByteReader r2(w.buffer());
  stored.apply_delta(r2);
  EXPECT_EQ(stored.get(3), 15);
  EXPECT_EQ(stored.get(5), 0);
  EXPECT_EQ(a.distance(stored), 10);
  // A whole write_delta still carries every slot changed since the last whole backup (3, 5 and 9).
  EXPECT_EQ(delta_entries<std::int64_t>(delta_bytes(a)), 3u);
  // A smaller residual than the one watched writes everything.
  ByteWriter w2;
  EXPECT_EQ(a.backup_partial_delta(w2, 4), 0);
  ByteReader r3(w2.buffer());
  stored.apply_delta(r3);
  EXPECT_EQ(a.distance(stored), 0);
  EXPECT_EQ(a.divergence(), 0);
}

TEST(TrackedArray, PartialDeltaIsWholeForOtherMetrics) {
  for (const Metric m : {Metric::L1, Metric::L2}) {
    TrackedArray<double> a(10, m);
    a.add(1, 0.5);
    ByteWriter w;
    EXPECT_EQ(a.backup_partial_delta(w, 100), 0);
    a.add(2, 0.5);
    ByteWriter w2;
    EXPECT_EQ(a.backup_partial_delta(w2, 100), 0);
    EXPECT_EQ(delta_entries<double>(w2.buffer()), 1u);
    EXPECT_EQ(a.divergence(), 0);
  }
}

// Random updates both ways, residuals going up and down: the stored state (every delta applied in order) is always
// within divergence() of the array, and within the returned residual right after each partial backup.
template <typename T>
void partial_delta_property(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = 1 + rng() % 300;
  TrackedArray<T> a(n, Metric::MaxAbs);
  TrackedArray<T> stored(n, Metric::MaxAbs);
  std::uniform_int_distribution<int> step(-20, 40);
  std::uniform_int_distribution<int> residual(0, 60);
  for (int round = 0; round < 200; ++round) {
    const int updates = static_cast<int>(rng() % 50);
    for (int u = 0; u < updates; ++u) {
      const std::size_t i = rng() % std::min<std::size_t>(n, 1 + rng() % 8 == 0 ? n : 8);  // a few hot slots
      if (rng() % 5 == 0) {
        a.set(i, static_cast<T>(step(rng)));
      } else {
        a.add(i, static_cast<T>(step(rng)));
      }
      ASSERT_GE(a.divergence(), a.distance(stored)) << "seed " << seed << " round " << round;
    }
    ByteWriter w;
    const double r = residual(rng);
    const double left = a.backup_partial_delta(w, r);
    ASSERT_LE(left, r) << "seed " << seed;
    ByteReader rd(w.buffer());
    stored.apply_delta(rd);
    ASSERT_LE(a.distance(stored), left) << "seed " << seed << " round " << round;
    ASSERT_LE(a.divergence(), left) << "seed " << seed;
  }
}

TEST(TrackedArray, PartialDeltasKeepTheStoreWithinTheResidual) {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    partial_delta_property<std::int64_t>(seed);
    partial_delta_property<double>(seed);
  }
}

// The residual a partial delta returns is what it really left (general-bounds.md §3.6), not the level the slots
// were allowed to reach. Brute force over the array: right after each backup the returned value is at least the true
// max |current - stored| over all slots (and at most the residual asked for), divergence() restarts from it, and
// after every later update divergence() is still at least the true distance to the stored state. Updates of both
// signs and sizes from 1 to past the residual, occasional sets, residuals going up and down (sometimes 0: whole).
template <typename T>
double brute_max_abs(const TrackedArray<T>& a, const std::vector<T>& stored) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i] - stored[i])));
  return m;
}

// Returns how many partial deltas reported less than the watched level (the old return value).
template <typename T>
int returned_residual_property(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = 1 + rng() % 200;
  TrackedArray<T> a(n, Metric::MaxAbs);
  TrackedArray<T> store(n, Metric::MaxAbs);  // the stored state: every delta applied in order
  std::vector<T> stored(n, T{});
  const int max_step = 1 + static_cast<int>(rng() % 80);  // below or past the residuals
  std::uniform_int_distribution<int> step(-max_step, max_step);
  std::uniform_int_distribution<int> residual(0, 100);
  double previous_r = std::numeric_limits<double>::infinity();
  int tighter = 0;
  for (int round = 0; round < 150; ++round) {
    const int updates = static_cast<int>(rng() % 40);
    for (int u = 0; u < updates; ++u) {
      const std::size_t i = rng() % (rng() % 4 == 0 ? n : std::min<std::size_t>(n, 6));  // a few hot slots
      if (rng() % 10 == 0) {
        a.set(i, static_cast<T>(step(rng)));
      } else {
        a.add(i, static_cast<T>(step(rng)));
      }
      EXPECT_GE(a.divergence(), brute_max_abs(a, stored)) << "seed " << seed << " round " << round;
    }
    const double r = rng() % 8 == 0 ? 0.0 : residual(rng);
    ByteWriter w;
    const double left = a.backup_partial_delta(w, r);
    ByteReader rd(w.buffer());
    store.apply_delta(rd);
    for (std::size_t i = 0; i < n; ++i) stored[i] = store[i];
    const double truth = brute_max_abs(a, stored);
    EXPECT_GE(left, truth) << "seed " << seed << " round " << round;
    EXPECT_LE(left, r) << "seed " << seed << " round " << round;
    EXPECT_EQ(a.divergence(), left) << "seed " << seed << " round " << round;
    if (left > 0) {
      // Never looser than the watched level (the previous residual, rounded down for integers).
      EXPECT_LE(left, previous_r) << "seed " << seed << " round " << round;
      tighter += left < std::floor(previous_r);
    }
    previous_r = r;
  }
  return tighter;
}

TEST(TrackedArray, PartialDeltaReturnsAtLeastTheTrueResidual) {
  int tighter = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    tighter += returned_residual_property<std::int64_t>(seed);
    tighter += returned_residual_property<double>(seed);
  }
  EXPECT_GT(tighter, 1000);  // the bound is usually below the watched level, not just equal to it
}

// Counters that only go up by 1 (Count-Min with unit weights) and stay below the watched residual: every partial
// delta writes nothing and returns exactly the true max |current - stored| (not the residual), across a chain of
// partial deltas (the slot that moved farthest in one round is often left alone in the next). Once a slot jumps past
// the residual the bound is the residual again, until a whole backup.
template <typename T>
void unit_increments_are_tight(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = 64;
  TrackedArray<T> a(n, Metric::MaxAbs);
  TrackedArray<T> store(n, Metric::MaxAbs);
  auto backup = [&](double r) {
    ByteWriter w;
    const double left = a.backup_partial_delta(w, r);
    ByteReader rd(w.buffer());
    store.apply_delta(rd);
    return left;
  };
  auto unit_increments = [&] {
    const int updates = static_cast<int>(rng() % 60);
    for (int u = 0; u < updates; ++u) a.add(rng() % (1 + rng() % (n - 1)), 1);  // skewed, never slot n - 1
  };
  for (std::size_t i = 0; i < n; ++i) a.add(i, static_cast<T>(rng() % 50));
  EXPECT_EQ(backup(10'000), 0);  // nothing watched yet: a whole delta
  double previous = 0;
  for (int round = 0; round < 40; ++round) {
    unit_increments();
    const double left = backup(10'000);
    ASSERT_EQ(left, a.distance(store)) << "seed " << seed << " round " << round;
    ASSERT_EQ(a.divergence(), left);
    ASSERT_GE(left, previous);  // one-way and nothing written: the unwritten gap only grows
    previous = left;
  }
  EXPECT_GT(previous, 0);
  EXPECT_LT(previous, 10'000);
  // A jump past the residual: that slot is written, and the bound falls back to the watched residual.
  a.add(n - 1, 20'000);
  unit_increments();
  EXPECT_EQ(backup(10'000), 10'000);
  EXPECT_EQ(store[n - 1], a[n - 1]);
  EXPECT_LE(a.distance(store), 10'000);
  // A whole backup starts the count over; the next partial delta is tight again.
  EXPECT_EQ(backup(0), 0);
  EXPECT_EQ(a.distance(store), 0);
  a.add(3, 1);
  a.add(3, 1);
  EXPECT_EQ(backup(10'000), 0);  // whole again (nothing watched after a whole backup)
  a.add(5, 1);
  a.add(5, 1);
  a.add(6, 1);
  EXPECT_EQ(backup(10'000), 2);
  EXPECT_EQ(a.distance(store), 2);
}

TEST(TrackedArray, PartialDeltaResidualIsTightForOneWayUnitIncrements) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    unit_increments_are_tight<std::int64_t>(seed);
    unit_increments_are_tight<double>(seed);
  }
}

}  // namespace
}  // namespace afs
