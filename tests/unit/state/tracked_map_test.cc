// Unit tests for TrackedMap (DESIGN.md section 3, and section 9: "every tracked container's divergence equals a
// brute-force recomputation; every snapshot/restore/continue equals an uninterrupted run").
#include "afstream/state/tracked_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <ranges>
#include <set>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/state/snapshot.h"
#include "state_test_util.h"

namespace afs {
namespace {

using namespace afs::testing_state;

static_assert(std::forward_iterator<TrackedMap<std::int64_t>::const_iterator>);
static_assert(std::ranges::forward_range<const TrackedMap<double>>);

constexpr Metric kMetrics[] = {Metric::MaxAbs, Metric::L1, Metric::L2, Metric::NewKeys};

template <typename V>
using Model = std::map<std::uint64_t, V>;

// Brute-force distance over the union of keys, absent = 0, computed independently of the library.
template <typename V>
double brute(Metric m, const Model<V>& cur, const Model<V>& base) {
  if (m == Metric::NewKeys) {
    std::size_t n = 0;
    for (const auto& [k, v] : cur) n += base.count(k) ? 0 : 1;
    return static_cast<double>(n);
  }
  long double mx = 0, l1 = 0, l2 = 0;
  auto add = [&](V now, V was) {
    const long double d = std::fabs(static_cast<long double>(now) - static_cast<long double>(was));
    mx = std::max(mx, d);
    l1 += d;
    l2 += d * d;
  };
  // Merge walk over the union of keys (both maps are sorted).
  auto c = cur.begin();
  auto b = base.begin();
  while (c != cur.end() || b != base.end()) {
    if (b == base.end() || (c != cur.end() && c->first < b->first)) {
      add(c->second, V{});
      ++c;
    } else if (c == cur.end() || b->first < c->first) {
      add(V{}, b->second);
      ++b;
    } else {
      add(c->second, b->second);
      ++c;
      ++b;
    }
  }
  if (m == Metric::MaxAbs) return static_cast<double>(mx);
  if (m == Metric::L1) return static_cast<double>(l1);
  return static_cast<double>(std::sqrt(l2));
}

void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-9 * (1.0 + std::fabs(want))); }

template <typename V>
V random_value(std::mt19937_64& rng, bool non_negative) {
  if constexpr (std::is_same_v<V, std::int64_t>) {
    return non_negative ? static_cast<V>(rng() % 6) : static_cast<V>(rng() % 2001) - 1000;
  } else {
    std::uniform_real_distribution<double> u(non_negative ? 0.0 : -1000.0, 1000.0);
    return u(rng);
  }
}

template <typename V>
Model<V> contents(const TrackedMap<V>& m) {
  Model<V> out;
  for (const auto [k, v] : m) {
    EXPECT_TRUE(out.emplace(k, v).second) << "key " << k << " iterated twice";
  }
  return out;
}

// One random operation (add / set / erase, or only adds). Returns the key touched, or nullopt if nothing changed.
template <typename V>
std::optional<std::uint64_t> random_update(TrackedMap<V>& m, Model<V>* model, std::mt19937_64& rng,
                                           bool increment_only) {
  const std::uint64_t key = rng() % 16 == 0 ? rng() : rng() % 300;
  const auto op = increment_only ? 0 : rng() % 8;
  if (op == 0 || op > 3) {
    const V d = random_value<V>(rng, increment_only);
    m.add(key, d);
    if (model) (*model)[key] += d;
  } else if (op == 1) {
    const V v = random_value<V>(rng, false);
    m.set(key, v);
    if (model) (*model)[key] = v;
  } else {
    const bool had = m.contains(key);
    EXPECT_EQ(m.erase(key), had);
    if (model) model->erase(key);
    if (!had) return std::nullopt;
  }
  return key;
}

template <typename V>
class TrackedMapTest : public ::testing::Test {};
using ValueTypes = ::testing::Types<std::int64_t, double>;
TYPED_TEST_SUITE(TrackedMapTest, ValueTypes);

TYPED_TEST(TrackedMapTest, DivergenceMatchesBruteForce) {
  using V = TypeParam;
  for (Metric m : kMetrics) {
    for (bool increment_only : {false, true}) {
      SCOPED_TRACE(std::string(to_string(m)) + (increment_only ? " increment-only" : " mixed"));
      std::mt19937_64 rng(11 + static_cast<int>(m) + (increment_only ? 100 : 0));
      TrackedMap<V> a(m);
      TrackedMap<V> backed_up = a;
      Model<V> cur, base;
      std::set<std::uint64_t> touched;
      double high_water = 0;
      for (int step = 0; step < 4000; ++step) {
        const auto r = rng() % 100;
        if (r < 2) {
          a.mark_backed_up();
          backed_up = a;
          base = cur;
          touched.clear();
          high_water = 0;
        } else if (r < 5) {
          TrackedMap<V> c = backed_up;
          const auto d = delta_bytes(a);
          ByteReader rd(d);
          c.apply_delta(rd);
          rd.expect_end("delta");
          ASSERT_EQ(contents(c), cur);
          EXPECT_EQ(c.size(), cur.size());
          EXPECT_EQ(c.divergence(), 0.0);
          EXPECT_EQ(c.dirty_count(), 0u);
        } else if (auto k = random_update<V>(a, &cur, rng, increment_only)) {
          touched.insert(*k);
        }
        const double now = brute(m, cur, base);
        high_water = std::max(high_water, now);
        if (m == Metric::MaxAbs) {
          expect_close(a.divergence(), high_water);
          if (increment_only) expect_close(a.divergence(), now);
          EXPECT_GE(a.divergence() * (1 + 1e-12), now);
        } else {
          expect_close(a.divergence(), now);
        }
        EXPECT_EQ(a.dirty_count(), touched.size());
        EXPECT_EQ(a.size(), cur.size());
        if (step % 100 == 0) {
          ASSERT_EQ(contents(a), cur);
          for (std::uint64_t k = 0; k < 300; ++k) {
            ASSERT_EQ(a.contains(k), cur.count(k) == 1) << k;
            ASSERT_EQ(a.get(k), cur.count(k) ? cur.at(k) : V{}) << k;
          }
          expect_close(a.distance(backed_up), now);
        }
        if (this->HasFailure()) return;
      }
    }
  }
}

TYPED_TEST(TrackedMapTest, GrowthAndMassErasure) {
  using V = TypeParam;
  std::mt19937_64 rng(3);
  TrackedMap<V> a(Metric::L1);
  Model<V> cur;
  for (int k = 0; k < 20000; ++k) {
    const std::uint64_t key = rng() % 30000;
    a.add(key, V{1});
    cur[key] += V{1};
  }
  a.mark_backed_up();
  std::vector<std::uint64_t> keys;
  for (const auto& [k, v] : cur) keys.push_back(k);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (std::size_t i = 0; i < keys.size() / 2; ++i) {
    EXPECT_TRUE(a.erase(keys[i]));
    EXPECT_FALSE(a.erase(keys[i]));
    cur.erase(keys[i]);
  }
  EXPECT_EQ(a.size(), cur.size());
  a.mark_backed_up();  // drops the tombstones with backward-shift deletion
  EXPECT_EQ(contents(a), cur);
  for (std::uint64_t k = 0; k < 30000; ++k) ASSERT_EQ(a.get(k), cur.count(k) ? cur.at(k) : V{}) << k;
  // Re-insert some erased keys after the tombstones are gone.
  for (std::size_t i = 0; i < 100; ++i) {
    a.set(keys[i], V{5});
    cur[keys[i]] = V{5};
  }
  EXPECT_EQ(contents(a), cur);
  EXPECT_EQ(a.divergence(), 500.0);
}

TYPED_TEST(TrackedMapTest, EraseRecordsTombstones) {
  using V = TypeParam;
  TrackedMap<V> a(Metric::NewKeys);
  a.set(1, V{10});
  a.set(2, V{20});
  a.mark_backed_up();
  const TrackedMap<V> backed_up = a;
  EXPECT_TRUE(a.erase(1));
  a.add(3, V{0});  // a new key, even with value 0
  EXPECT_EQ(a.divergence(), 1.0);
  EXPECT_TRUE(a.erase(3));  // inserted and erased since the backup: no longer new
  EXPECT_EQ(a.divergence(), 0.0);
  EXPECT_FALSE(a.contains(1));
  EXPECT_EQ(a.get(1), V{});
  EXPECT_EQ(a.size(), 1u);
  TrackedMap<V> c = backed_up;
  const auto d = delta_bytes(a);
  ByteReader r(d);
  c.apply_delta(r);
  EXPECT_EQ(contents(c), contents(a));
  EXPECT_FALSE(c.contains(1));
}

// Keys inserted and erased between backups need no tombstone: a map that is never backed up (mode none; the
// parameter server's pending gradients) stays as small as its live keys, and deltas and divergence stay exact.
TYPED_TEST(TrackedMapTest, ChurnOfNewKeysDoesNotGrowTheMap) {
  using V = TypeParam;
  for (Metric m : kMetrics) {
    TrackedMap<V> a(m);
    a.set(7, V{3});
    a.set(8, V{4});
    a.mark_backed_up();
    const TrackedMap<V> backed_up = a;
    Model<V> base{{7, V{3}}, {8, V{4}}};
    Model<V> cur = base;
    EXPECT_TRUE(a.erase(8));  // present at the backup: its tombstone must stay
    cur.erase(8);
    std::mt19937_64 rng(5);
    for (std::uint64_t k = 100; k < 200'000; ++k) {
      a.add(k, V{1});
      if (k % 1000 != 0) {
        EXPECT_TRUE(a.erase(k));
      } else {
        cur[k] = V{1};  // a few stay
      }
      if (k % 5000 == 0) a.add(k - 1, V{2}), cur[k - 1] = V{2};  // revive a key erased just before
    }
    EXPECT_LT(a.dirty_count(), 5000u) << to_string(m);  // 200k keys went through it
    EXPECT_EQ(contents(a), cur);
    EXPECT_NEAR(a.divergence(), brute<V>(m, cur, base), 1e-9) << to_string(m);
    TrackedMap<V> c = backed_up;
    const auto d = delta_bytes(a);
    ByteReader r(d);
    c.apply_delta(r);
    EXPECT_EQ(contents(c), cur) << to_string(m);
    EXPECT_FALSE(c.contains(8));
  }
}

TYPED_TEST(TrackedMapTest, FullRoundTrip) {
  using V = TypeParam;
  for (Metric m : kMetrics) {
    std::mt19937_64 rng(17);
    TrackedMap<V> a(m);
    for (int k = 0; k < 3000; ++k) random_update<V>(a, nullptr, rng, false);
    TrackedMap<V> b(m);
    b.add(12345, V{1});
    const auto full = full_bytes(a);
    ByteReader r(full);
    b.read_full(r);
    r.expect_end("full");
    EXPECT_EQ(contents(b), contents(a));
    EXPECT_EQ(b.divergence(), 0.0);
    EXPECT_EQ(b.dirty_count(), 0u);
    EXPECT_EQ(b.distance(a), 0.0);
  }
}

TYPED_TEST(TrackedMapTest, SnapshotRestoreContinueEqualsUninterrupted) {
  using V = TypeParam;
  const std::uint32_t type_id = type_id_of("test.tracked_map");
  for (Metric m : kMetrics) {
    SCOPED_TRACE(to_string(m));
    const double theta = m == Metric::NewKeys ? 5.0 : 300.0;
    TrackedMap<V> a(m);
    std::vector<std::vector<std::uint8_t>> chain;
    chain.push_back(seal_snapshot(type_id, SnapshotKind::Full, full_bytes(a)));
    a.mark_backed_up();
    std::mt19937_64 ops(23);
    auto step = [&](TrackedMap<V>& c, std::vector<std::vector<std::uint8_t>>* log) {
      random_update<V>(c, nullptr, ops, false);
      if (c.divergence() > theta) {
        log->push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(c)));
        c.mark_backed_up();
      }
    };
    for (int k = 0; k < 2000; ++k) step(a, &chain);
    chain.push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(a)));
    a.mark_backed_up();
    ASSERT_GT(chain.size(), 3u);

    TrackedMap<V> b(m);
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
    ASSERT_EQ(contents(b), contents(a));

    const auto ops_state = ops;
    std::vector<std::vector<std::uint8_t>> log_a, log_b;
    for (int k = 0; k < 2000; ++k) step(a, &log_a);
    ops = ops_state;
    for (int k = 0; k < 2000; ++k) step(b, &log_b);
    EXPECT_EQ(contents(b), contents(a));
    EXPECT_EQ(b.divergence(), a.divergence());
    EXPECT_EQ(b.dirty_count(), a.dirty_count());
    // Deltas list keys in the order they were first changed, so they are identical byte for byte (full payloads
    // follow the table layout, which depends on the insertion history, and may differ).
    EXPECT_EQ(log_b, log_a);
  }
}

TYPED_TEST(TrackedMapTest, CorruptDeltaLeavesMapUnchanged) {
  using V = TypeParam;
  std::mt19937_64 rng(29);
  TrackedMap<V> writer(Metric::L1);
  for (int k = 0; k < 400; ++k) random_update<V>(writer, nullptr, rng, false);
  writer.mark_backed_up();
  TrackedMap<V> target = writer;
  target.add(7, V{3});
  for (int k = 0; k < 40; ++k) random_update<V>(writer, nullptr, rng, false);
  const auto delta = delta_bytes(writer);
  auto apply = [](auto& c, ByteReader& r) { c.apply_delta(r); };
  expect_prefixes_rejected(target, delta, apply);

  const std::uint16_t tag = std::is_same_v<V, std::int64_t> ? 0x0302 : 0x0402;
  const std::uint64_t n = target.size();
  const std::uint64_t present = contents(target).begin()->first;
  std::uint64_t absent = 1'000'000;
  while (target.contains(absent)) ++absent;
  auto craft = [&](std::uint64_t size, std::vector<std::uint64_t> keys, std::vector<V> vals,
                   std::vector<std::uint64_t> erased, std::uint16_t t) {
    ByteWriter w;
    w.put<std::uint16_t>(t);
    w.put<std::uint16_t>(1);
    w.put<std::uint64_t>(size);
    w.put_array<std::uint64_t>(keys);
    w.put_array<V>(vals);
    w.put_array<std::uint64_t>(erased);
    return w.take();
  };
  // Sanity: well-formed crafted deltas are accepted.
  {
    TrackedMap<V> c = target;
    const auto ok = craft(n + 1, {absent}, {V{1}}, {}, tag);
    ByteReader r(ok);
    c.apply_delta(r);
    EXPECT_EQ(c.get(absent), V{1});
  }
  expect_rejected(target, craft(n + 1, {absent, absent}, {V{1}, V{2}}, {}, tag), apply);  // duplicate upsert
  expect_rejected(target, craft(n, {present}, {V{1}}, {present}, tag), apply);            // upsert and erase
  expect_rejected(target, craft(n + 1, {absent}, {}, {}, tag), apply);                    // count mismatch
  expect_rejected(target, craft(n, {absent}, {V{1}}, {}, tag), apply);                    // wrong base size
  expect_rejected(target, craft(n, {}, {}, {present}, tag), apply);                       // wrong base size
  expect_rejected(target, craft(n + 1, {absent}, {V{1}}, {}, tag ^ 0x0700), apply);       // another container
  expect_rejected(target, full_bytes(writer), apply);                                     // full is not a delta
}

// read_delta only reads: the map is unchanged (contents, divergence) until apply_delta(const Delta&), which then
// gives what apply_delta(ByteReader&) gives, inserts and erasures alike; and a restore that reads both of two maps'
// deltas before applying either (an operator's all-or-nothing restore without copies) works.
TYPED_TEST(TrackedMapTest, ReadDeltaThenApplyEqualsApplyDelta) {
  using V = TypeParam;
  std::mt19937_64 rng(37);
  TrackedMap<V> writer(Metric::L1), other_writer(Metric::MaxAbs);
  for (int k = 0; k < 500; ++k) {
    random_update<V>(writer, nullptr, rng, false);
    random_update<V>(other_writer, nullptr, rng, false);
  }
  writer.mark_backed_up();
  other_writer.mark_backed_up();
  const TrackedMap<V> base = writer, other_base = other_writer;
  for (int k = 0; k < 300; ++k) {
    random_update<V>(writer, nullptr, rng, false);
    random_update<V>(other_writer, nullptr, rng, false);
  }
  for (const auto& [key, value] : contents(base)) {
    if (key % 5 == 0) writer.erase(key);
  }
  const auto bytes = delta_bytes(writer);
  const auto other_bytes = delta_bytes(other_writer);

  TrackedMap<V> one_step = base;
  ByteReader r1(bytes);
  one_step.apply_delta(r1);

  TrackedMap<V> two_steps = base;
  TrackedMap<V> other = other_base;
  const double divergence_before = two_steps.divergence();
  const auto contents_before = contents(two_steps);
  std::vector<std::uint8_t> payload = bytes;
  payload.insert(payload.end(), other_bytes.begin(), other_bytes.end());
  ByteReader r2(payload);
  const auto d = two_steps.read_delta(r2);
  const auto od = other.read_delta(r2);
  r2.expect_end("both deltas");
  EXPECT_EQ(contents(two_steps), contents_before);  // nothing applied yet
  EXPECT_EQ(two_steps.divergence(), divergence_before);
  two_steps.apply_delta(d);
  other.apply_delta(od);

  EXPECT_EQ(contents(one_step), contents(writer));
  EXPECT_EQ(contents(two_steps), contents(writer));
  EXPECT_EQ(contents(other), contents(other_writer));
  EXPECT_EQ(two_steps.divergence(), 0.0);  // counts as backed up
  EXPECT_EQ(two_steps.dirty_count(), 0u);
  EXPECT_EQ(two_steps.distance(writer), 0.0);
}

TYPED_TEST(TrackedMapTest, CorruptFullLeavesMapUnchanged) {
  using V = TypeParam;
  std::mt19937_64 rng(31);
  TrackedMap<V> a(Metric::L2);
  for (int k = 0; k < 300; ++k) random_update<V>(a, nullptr, rng, false);
  TrackedMap<V> target(Metric::L2);
  target.add(3, V{4});
  auto read = [](auto& c, ByteReader& r) { c.read_full(r); };
  expect_prefixes_rejected(target, full_bytes(a), read);
  const std::uint16_t tag = std::is_same_v<V, std::int64_t> ? 0x0301 : 0x0401;
  ByteWriter w;
  w.put<std::uint16_t>(tag);
  w.put<std::uint16_t>(1);
  w.put<std::uint64_t>(2);
  w.put_array<std::uint64_t>(std::vector<std::uint64_t>{5, 5});
  w.put_array<V>(std::vector<V>{V{1}, V{2}});
  expect_rejected(target, w.take(), read);  // duplicate key
  expect_rejected(target, delta_bytes(a), read);
}

TEST(TrackedMap, WrongValueTypeIsRejected) {
  TrackedMap<double> d(Metric::L1);
  d.add(1, 2.5);
  TrackedMap<std::int64_t> i(Metric::L1);
  expect_rejected(i, full_bytes(d), [](auto& c, ByteReader& r) { c.read_full(r); });
  expect_rejected(i, delta_bytes(d), [](auto& c, ByteReader& r) { c.apply_delta(r); });
}

}  // namespace
}  // namespace afs
