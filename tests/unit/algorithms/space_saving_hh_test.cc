// Unit tests of the Space-Saving heavy-hitter operator (algorithms/heavy_hitters/space_saving_hh.h): the conformance
// kit (with and without the replacing delta), divergence against a brute-force recomputation of its sketch and the
// largest weight one key received since the last backup, a log delta applied once and only to its base (and carrying
// the failure count of a recovery that added nothing), backup/restore/continue equal to an uninterrupted run, the
// compensation of Theorem SS (exact amount, once per failure, kept in the snapshot) and a simulated failure it covers,
// copies partitioned by key whose reports, unioned, miss no heavy hitter, and bad input.
#include "algorithms/heavy_hitters/space_saving_hh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "afstream/testing/conformance.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "tests/unit/algorithms/operator_test_util.h"

namespace afs::hh {
namespace {

using afs::testing::full_of;
using afs::testing::NullEmitter;
using afs::testing::recovery;

constexpr std::uint64_t kKeys = 500;

std::vector<Item> zipf_items(std::uint64_t seed, Weights weights, std::uint64_t n) {
  ZipfGenerator gen({.num_keys = kKeys, .skew = 1.1, .total_items = n, .seed = seed});
  std::vector<Item> items(n);
  gen.fill(0, items);
  if (weights == Weights::Packet) {
    for (std::uint64_t p = 0; p < n; ++p) items[p].value = packet_bytes(seed, p);
  }
  return items;
}

std::unordered_map<std::uint64_t, std::int64_t> exact_of(const std::vector<Item>& items) {
  std::unordered_map<std::uint64_t, std::int64_t> m;
  for (const Item& it : items) m[it.key] += it.value;
  return m;
}

Params ss_params(Weights weights, double phi, std::uint64_t capacity) {
  Params p;
  p.set("capacity", capacity).set("phi", phi).set("max-weight", max_weight(weights));
  return p;
}

double total_of(const std::vector<Item>& items) {
  double t = 0;
  for (const Item& it : items) t += static_cast<double>(it.value);
  return t;
}

// Every bound of Theorem SS on one summary against exact weights: count - error <= true <= count for a monitored
// key, true <= min_count() for any other.
void expect_bounds(const SpaceSaving& s, const std::unordered_map<std::uint64_t, std::int64_t>& exact,
                   const std::string& at) {
  for (const auto& [key, w] : exact) {
    ASSERT_GE(s.upper_bound(key), w) << at << " key " << key;
    ASSERT_LE(s.lower_bound(key), w) << at << " key " << key;
  }
}

// capacity 64: many backups come after more items than the capacity (the replacing delta); capacity 400: few do (the
// log of updates).
TEST(SpaceSavingHhConformance, UnitAndPacketWeights) {
  for (const Weights w : {Weights::Unit, Weights::Packet}) {
    for (const std::uint64_t capacity : {64u, 400u}) {
      const auto items = zipf_items(3, w, 4000);
      const Params p = ss_params(w, total_of(items) / 100, capacity);
      const testing::OperatorMaker make = [&] { return std::make_unique<SpaceSavingHeavyHitters>(p); };
      testing::ConformanceOptions o;
      o.exact_divergence = false;  // distance() is a lower bound computed from the states alone
      o.seed = capacity;
      EXPECT_TRUE(testing::OperatorConforms(make, items, o)) << "capacity " << capacity;
      o.backup_every_max = 40;
      o.seed += 1;
      EXPECT_TRUE(testing::OperatorConforms(make, items, o)) << "capacity " << capacity;
    }
  }
}

// divergence() is the largest estimate any key updated since the last backup had in the divergence sketch (recomputed
// by brute force from the items since then), never below the largest weight one key received since then, as long
// as no more items came than the capacity; after that an upper bound of it.
TEST(SpaceSavingHh, DivergenceBoundsTheLargestWeightOneKeyReceivedSinceTheBackup) {
  using Op = SpaceSavingHeavyHitters;
  const auto items = zipf_items(7, Weights::Packet, 6000);
  for (const std::uint64_t capacity : {32u, 1000u}) {
    Op op(ss_params(Weights::Packet, 1e12, capacity));
    NullEmitter out;
    std::unordered_map<std::uint64_t, std::int64_t> since;
    std::vector<std::int64_t> counters(Op::kSinceRows * Op::kSinceWidth, 0);
    std::size_t n_since = 0, exact = 0, bounded = 0, above_true_max = 0;
    std::int64_t sketch_max = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      op.process(items[i], out);
      const auto key = items[i].key;
      since[key] += items[i].value;
      ++n_since;
      std::int64_t estimate = std::numeric_limits<std::int64_t>::max();
      for (int r = 0; r < Op::kSinceRows; ++r) {
        estimate = std::min(estimate, counters[Op::since_counter(key, r)] += items[i].value);
      }
      sketch_max = std::max(sketch_max, estimate);
      std::int64_t brute = 0;
      for (const auto& [k, w] : since) brute = std::max(brute, w);
      ASSERT_GE(op.divergence(), static_cast<double>(brute)) << "item " << i;
      if (n_since <= capacity) {  // the log has not overflowed: the sketch's value
        ASSERT_EQ(op.divergence(), static_cast<double>(sketch_max)) << "item " << i;
        ++exact;
        above_true_max += sketch_max > brute ? 1 : 0;
      } else {
        ++bounded;
      }
      if (i % 97 == 96) {
        op.mark_backed_up();
        since.clear();
        std::fill(counters.begin(), counters.end(), 0);
        n_since = 0;
        sketch_max = 0;
        ASSERT_EQ(op.divergence(), 0);
      }
    }
    EXPECT_GT(exact, 1000u) << capacity;
    // 500 keys in 2 x 2048 counters: collisions in both rows are rare, so the bound is mostly tight.
    EXPECT_LT(above_true_max, exact / 20) << capacity;
    if (capacity == 32) {
      EXPECT_GT(bounded, 1000u);
    }
  }
}

// op after `first` unit-weight Zipf items, backed up, and copy restored from that backup: the two states a log delta
// of op's next items goes from.
void backed_up_pair(const std::vector<Item>& items, std::size_t first, SpaceSavingHeavyHitters& op,
                    SpaceSavingHeavyHitters& copy) {
  NullEmitter out;
  for (std::size_t i = 0; i < first; ++i) op.process(items[i], out);
  const auto full = full_of(op);
  ByteReader r(full);
  copy.restore_full(r);
  op.mark_backed_up();
}

// A log delta names the state it follows: stored twice, it is applied once; applied to a state it does not follow,
// it is refused with the state left as it was.
TEST(SpaceSavingHh, ALogDeltaAppliesOnceAndOnlyToTheStateItFollows) {
  const auto items = zipf_items(5, Weights::Unit, 300);
  const Params p = ss_params(Weights::Unit, 1e12, 64);
  SpaceSavingHeavyHitters op(p), copy(p), behind(p);
  NullEmitter out;
  backed_up_pair(items, 100, op, copy);
  for (std::size_t i = 100; i < 140; ++i) op.process(items[i], out);  // 40 updates: a log, not a replacing delta
  ByteWriter w;
  op.snapshot_delta(w);
  const auto delta = w.take();
  EXPECT_LT(delta.size(), 40 * 9 + 64u);  // packed: the key's 8 bytes and a unit weight's 1
  for (int twice = 0; twice < 2; ++twice) {
    ByteReader r(delta);
    copy.apply_delta(r);
    EXPECT_EQ(full_of(copy), full_of(op)) << "application " << twice + 1;
  }
  for (std::size_t i = 0; i < 99; ++i) behind.process(items[i], out);  // one item short of the delta's base
  const auto before = full_of(behind);
  ByteReader r(delta);
  EXPECT_THROW(behind.apply_delta(r), FormatError);
  EXPECT_EQ(full_of(behind), before);
}

// The log as it was written before it was packed (kind 0: key, weight as 16 bytes each) still applies, and a packed
// log with a weight above max-weight, a count the bytes cannot hold or a truncated varint is refused, the state as
// it was.
TEST(SpaceSavingHh, UnpackedLogDeltasStillApplyAndBadPackedOnesAreRefused) {
  const auto items = zipf_items(5, Weights::Unit, 300);
  const Params p = ss_params(Weights::Unit, 1e12, 64);
  SpaceSavingHeavyHitters op(p), copy(p);
  NullEmitter out;
  backed_up_pair(items, 100, op, copy);
  const auto full = full_of(copy);  // the state the deltas below go from
  for (std::size_t i = 100; i < 110; ++i) op.process(items[i], out);
  ByteWriter w;
  op.snapshot_delta(w);
  const auto packed = w.take();
  const std::size_t header = 4 + 4 * 8 + 1;  // tag, from, to, compensation, failures, kind
  ASSERT_EQ(packed.at(header - 1), 2);       // packed log
  // The same delta, unpacked.
  ByteWriter u;
  u.buffer().assign(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(header));
  u.buffer().back() = 0;
  u.put<std::uint64_t>(10);
  for (std::size_t i = 100; i < 110; ++i) {
    u.put<std::uint64_t>(items[i].key);
    u.put<std::int64_t>(items[i].value);
  }
  const auto unpacked = u.take();
  {
    SpaceSavingHeavyHitters a(p);
    ByteReader rf(full);
    a.restore_full(rf);
    ByteReader r(unpacked);
    a.apply_delta(r);
    EXPECT_EQ(full_of(a), full_of(op));
  }
  const auto refused = [&](std::vector<std::uint8_t> bytes, const char* what) {
    const auto before = full_of(copy);
    ByteReader r(bytes);
    EXPECT_THROW(copy.apply_delta(r), FormatError) << what;
    EXPECT_EQ(full_of(copy), before) << what;
  };
  auto heavy = packed;
  heavy.back() = 2;  // the last update's weight (unit weights: one byte, the last): 2 > max-weight 1
  refused(heavy, "weight above max-weight");
  auto count = packed;
  const std::uint64_t many = 1000;
  std::memcpy(count.data() + header, &many, sizeof many);
  refused(count, "more updates than the bytes hold");
  auto cut = packed;
  cut.back() = 0x81;  // the last byte now says another follows
  refused(cut, "truncated varint");
  ByteReader r(packed);
  copy.apply_delta(r);
  EXPECT_EQ(full_of(copy), full_of(op));
}

// A recovery whose measured loss is 0 adds nothing but counts its failure as compensated; the log delta after it
// carries that count onto the backup it follows (CI, 2026-12-01: the chain's restore refused such a delta).
TEST(SpaceSavingHh, ALogDeltaAfterARecoveryThatAddedNothingCarriesItsFailureCount) {
  const auto items = zipf_items(6, Weights::Unit, 200);
  const Params p = ss_params(Weights::Unit, 1e12, 64);
  SpaceSavingHeavyHitters op(p), copy(p);
  NullEmitter out;
  for (std::size_t i = 0; i < 100; ++i) op.process(items[i], out);
  const auto base = full_of(op);
  op.mark_backed_up();
  RecoveryInfo nothing_lost = recovery({1000.75}, {3}, 1);
  nothing_lost.missing_by_failure = {std::uint64_t{0}};
  nothing_lost.residual_by_failure = {0};
  op.on_recovered(nothing_lost);
  ASSERT_EQ(op.compensation(), 0);
  ASSERT_EQ(op.compensated_failures(), 1);
  for (std::size_t i = 100; i < 140; ++i) op.process(items[i], out);
  ByteWriter w;
  op.snapshot_delta(w);
  const auto delta = w.take();
  ASSERT_LT(delta.size(), 41 * 16 + 64u);  // a log, not a replacing delta
  ByteReader rb(base);
  copy.restore_full(rb);
  ByteReader rd(delta);
  copy.apply_delta(rd);
  EXPECT_EQ(copy.compensated_failures(), 1);
  EXPECT_EQ(full_of(copy), full_of(op));
  copy.on_recovered(nothing_lost);  // the same failure again: nothing more
  EXPECT_EQ(full_of(copy), full_of(op));

  // A log delta cannot take a failure count back, nor carry a compensation its updates do not contain.
  SpaceSavingHeavyHitters ahead(p);
  for (std::size_t i = 0; i < 100; ++i) ahead.process(items[i], out);
  ahead.mark_backed_up();
  RecoveryInfo two = recovery({1000.75, 500.375}, {3, 1}, 1);
  two.missing_by_failure = {std::uint64_t{0}, std::uint64_t{0}};
  two.residual_by_failure = {0, 0};
  ahead.on_recovered(two);
  const auto before = full_of(ahead);
  ByteReader again(delta);
  EXPECT_THROW(ahead.apply_delta(again), FormatError);
  EXPECT_EQ(full_of(ahead), before);
}

// DESIGN.md section 9: restore the first full snapshot, apply every later delta, continue: the same state (bytes) and
// the same final report as the operator that never stopped.
TEST(SpaceSavingHh, BackupRestoreContinueEqualsAnUninterruptedRun) {
  for (const std::uint64_t capacity : {48u, 600u}) {
    const auto items = zipf_items(11, Weights::Unit, 8000);
    const Params p = ss_params(Weights::Unit, total_of(items) / 200, capacity);
    SpaceSavingHeavyHitters op(p), recovered(p);
    NullEmitter out;
    {
      const auto first = full_of(op);
      ByteReader r(first);
      recovered.restore_full(r);
    }
    for (std::size_t i = 0; i < 5000; ++i) {
      op.process(items[i], out);
      if ((i + 1) % 250 == 0) {
        ByteWriter w;
        op.snapshot_delta(w);
        op.mark_backed_up();
        const auto delta = w.take();
        ByteReader r(delta);
        recovered.apply_delta(r);
        ByteReader again(delta);  // idempotent: a delta stored twice is applied twice
        recovered.apply_delta(again);
      }
    }
    ASSERT_EQ(full_of(recovered), full_of(op)) << capacity;
    for (std::size_t i = 5000; i < items.size(); ++i) {
      op.process(items[i], out);
      recovered.process(items[i], out);
    }
    EXPECT_EQ(full_of(recovered), full_of(op)) << capacity;
    testing::RecordingEmitter want, got;
    op.finish(want);
    recovered.finish(got);
    EXPECT_GE(want.items.size(), 5u);
    EXPECT_EQ(got.items, want.items);
  }
}

// A per-failure Theta of 2^63 or more once gave a negative loss bound (undefined cast; INT64_MIN on x86), recorded as
// a negative compensation that the next snapshot's reader refused: `afstream run --hh.algorithm space-saving
// --ft.theta 1e20 --fail.count 2` ended with "space-saving-hh: negative compensation". Now it saturates.
TEST(SpaceSavingHh, HugeThetaSaturatesTheCompensation) {
  const auto items = zipf_items(9, Weights::Packet, 3000);
  const Params p = ss_params(Weights::Packet, 1e12, 100);
  SpaceSavingHeavyHitters op(p);
  NullEmitter out;
  for (const Item& it : items) op.process(it, out);
  op.mark_backed_up();
  RecoveryInfo measured = recovery({2.5e19}, {250}, 1500);
  measured.missing_by_failure = {std::uint64_t{0}};
  measured.residual_by_failure = {0};
  op.on_recovered(measured);
  EXPECT_EQ(op.compensation(), 0);
  op.on_recovered(recovery({2.5e19, 1.25e19}, {250, 125}, 1500));
  EXPECT_EQ(op.compensation(), RecoveryInfo::kLossBoundCap);
  op.on_recovered(recovery({2.5e19, 1.25e19, 6e18}, {250, 125, 60}, 1500));
  EXPECT_EQ(op.compensation(), RecoveryInfo::kLossBoundCap);
  const auto snap = full_of(op);
  SpaceSavingHeavyHitters restored(p);
  ByteReader r(snap);
  EXPECT_NO_THROW(restored.restore_full(r));
  EXPECT_EQ(restored.compensation(), RecoveryInfo::kLossBoundCap);
}

TEST(SpaceSavingHh, CompensationAddsFloorThetaPlusLTimesMaxWeightOncePerFailure) {
  const auto items = zipf_items(9, Weights::Packet, 3000);
  const Params p = ss_params(Weights::Packet, 1e12, 100);
  SpaceSavingHeavyHitters op(p);
  NullEmitter out;
  for (const Item& it : items) op.process(it, out);
  op.mark_backed_up();
  const auto before = op.summary().entries();
  const auto floor_before = op.summary().min_count();

  // Failure 1: theta_1 = 1000.75, l_1 = 3 -> floor(1000.75) + 3 * 1500 = 5500 on every count and error.
  const RecoveryInfo first = recovery({1000.75}, {3}, 1500);
  op.on_recovered(first);
  EXPECT_EQ(op.compensation(), 5500);
  EXPECT_EQ(op.compensated_failures(), 1);
  EXPECT_EQ(op.divergence(), 5500);
  EXPECT_EQ(op.summary().min_count(), floor_before + 5500);
  auto after = op.summary().entries();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].key, before[i].key);
    EXPECT_EQ(after[i].count, before[i].count + 5500);
    EXPECT_EQ(after[i].error, before[i].error + 5500);  // the lower bound count - error does not move
  }
  op.on_recovered(first);  // the same failure again: nothing more
  EXPECT_EQ(op.compensation(), 5500);

  // The delta after compensation carries every entry; a snapshot restores the record, so a recovery from it does
  // not repeat the compensation.
  const auto snap = full_of(op);
  SpaceSavingHeavyHitters restored(p);
  ByteReader r(snap);
  restored.restore_full(r);
  EXPECT_EQ(restored.compensation(), 5500);
  restored.on_recovered(first);
  EXPECT_EQ(full_of(restored), snap);

  // Failure 2 (halved thresholds): only floor(500.375) + 1 * 1500 = 2000 more.
  const RecoveryInfo second = recovery({1000.75, 500.375}, {3, 1}, 1500);
  restored.on_recovered(second);
  EXPECT_EQ(restored.compensation(), 7500);
  EXPECT_EQ(restored.compensated_failures(), 2);

  // Measured loss smaller than the bound: 2 items missing -> 2 * 1500 = 3000 < 5500.
  SpaceSavingHeavyHitters measured(p);
  for (const Item& it : items) measured.process(it, out);
  RecoveryInfo m = first;
  m.missing_by_failure = {std::uint64_t{2}};
  m.residual_by_failure = {0};
  measured.on_recovered(m);
  EXPECT_EQ(measured.compensation(), 3000);
}

// Theorem SS on one worker: back up whenever divergence() exceeds theta, crash, restore the last backup, lose the
// items since then and the next l, continue. Without compensation some count falls below the true weight; the loss of
// any key is at most floor(theta) + l * max-weight, and after the compensation every bound holds again.
TEST(SpaceSavingHh, CompensationCoversASimulatedFailure) {
  for (const std::uint64_t capacity : {60u, 300u}) {
    const auto items = zipf_items(33, Weights::Packet, 8000);
    const auto exact = exact_of(items);
    const double theta = 20000.5;
    const std::size_t l = 4;
    const Params p = ss_params(Weights::Packet, 1e12, capacity);
    SpaceSavingHeavyHitters op(p);
    NullEmitter out;
    std::vector<std::uint8_t> backup = full_of(op);
    std::size_t last_backup = 0;
    const std::size_t crash = 5000;
    for (std::size_t i = 0; i < crash; ++i) {
      op.process(items[i], out);
      if (op.divergence() > theta) {
        backup = full_of(op);
        op.mark_backed_up();
        last_backup = i + 1;
      }
    }
    ASSERT_LT(last_backup, crash) << "the crash must lose some processed items";
    SpaceSavingHeavyHitters recovered(p);
    ByteReader r(backup);
    recovered.restore_full(r);
    std::unordered_map<std::uint64_t, std::int64_t> lost;
    for (std::size_t i = last_backup; i < crash + l; ++i) lost[items[i].key] += items[i].value;
    for (std::size_t i = crash + l; i < items.size(); ++i) recovered.process(items[i], out);
    const auto bound = static_cast<std::int64_t>(std::floor(theta)) + static_cast<std::int64_t>(l) * 1500;
    std::int64_t worst_lost = 0;
    for (const auto& [k, w] : lost) worst_lost = std::max(worst_lost, w);
    EXPECT_LE(worst_lost, bound) << capacity;  // Lemma SS1
    std::int64_t worst = 0;
    for (const auto& [k, v] : exact) worst = std::min(worst, recovered.summary().upper_bound(k) - v);
    EXPECT_LT(worst, 0) << capacity;  // uncompensated, some upper bound is wrong
    recovered.on_recovered(recovery({theta}, {static_cast<double>(l)}, 1500));
    EXPECT_EQ(recovered.compensation(), bound);
    expect_bounds(recovered.summary(), exact, "capacity " + std::to_string(capacity));
    // The error widened by at most the compensation: min_count <= N / k + E.
    const auto n = static_cast<std::int64_t>(total_of(items));
    EXPECT_LE(recovered.summary().min_count(), n / static_cast<std::int64_t>(capacity) + 1 + bound);
  }
}

// Copies partitioned by key (key_partition, as the runtime's key_by) see disjoint keys: each report bounds its own
// keys, and their union (what hh-merge keeps) contains every key heavier than phi with a count at or above its weight.
TEST(SpaceSavingHh, CopiesPartitionedByKeyUnionToAReportWithoutFalseNegatives) {
  const auto items = zipf_items(21, Weights::Unit, 30000);
  const auto exact = exact_of(items);
  const double phi = total_of(items) / 200;
  const std::size_t n = 3;
  std::vector<SpaceSavingHeavyHitters> copies(n, SpaceSavingHeavyHitters(ss_params(Weights::Unit, phi, 128)));
  std::vector<std::unordered_map<std::uint64_t, std::int64_t>> part(n);
  NullEmitter none;
  for (const Item& it : items) {
    const auto c = key_partition(it.key, n);
    copies[c].process(it, none);
    part[c][it.key] += it.value;
  }
  HeavyHitterMerge sink(Params().set("items", 1000000));
  for (std::size_t c = 0; c < n; ++c) {
    expect_bounds(copies[c].summary(), part[c], "copy " + std::to_string(c));
    ASSERT_LT(static_cast<double>(copies[c].summary().min_count()), phi) << "phi above N_p / k";
    testing::RecordingEmitter out;
    copies[c].finish(out);
    for (const auto& e : out.items) sink.process({e.key, e.value, 0, 0}, none);
  }
  const auto report = sink.results();
  std::size_t heavy = 0;
  for (const auto& [k, w] : exact) {
    if (static_cast<double>(w) <= phi) continue;
    ++heavy;
    ASSERT_TRUE(report.count(k)) << "heavy key " << k << " missed";
    EXPECT_GE(report.at(k), w);
  }
  EXPECT_GE(heavy, 10u);
  for (const auto& [k, v] : report) EXPECT_GT(static_cast<double>(v), phi);
}

TEST(SpaceSavingHh, BadParametersAndItemsAreErrors) {
  EXPECT_THROW(SpaceSavingHeavyHitters(Params().set("phi", 0)), ConfigError);
  EXPECT_THROW(SpaceSavingHeavyHitters(Params().set("max-weight", 0)), ConfigError);
  EXPECT_THROW(SpaceSavingHeavyHitters(Params().set("epsilon", 1.5)), ConfigError);
  EXPECT_THROW(SpaceSavingHeavyHitters(Params().set("capacity", std::uint64_t{1} << 40)), ConfigError);
  EXPECT_EQ(SpaceSavingHeavyHitters::capacity_of(Params().set("epsilon", 0.01)), 100u);
  EXPECT_EQ(SpaceSavingHeavyHitters::capacity_of(Params().set("capacity", 77)), 77u);
  SpaceSavingHeavyHitters op(ss_params(Weights::Unit, 10, 8));
  NullEmitter out;
  EXPECT_THROW(op.process({1, 2, 0, 0}, out), InputError);  // above max-weight 1
  EXPECT_THROW(op.process({1, -1, 0, 0}, out), InputError);
  // A snapshot of another capacity is refused, and the state is left as it was.
  SpaceSavingHeavyHitters other(ss_params(Weights::Unit, 10, 9));
  other.process({5, 1, 0, 0}, out);
  const auto snap = full_of(other);
  const auto mine = full_of(op);
  ByteReader r(snap);
  EXPECT_THROW(op.restore_full(r), FormatError);
  EXPECT_EQ(full_of(op), mine);
}

}  // namespace
}  // namespace afs::hh
