// Unit tests of the heavy-hitter operators (algorithms/heavy_hitters/hh_operators.h): the conformance kit
// (afstream/testing) on count-min-hh (unit and packet weights) and hh-merge, Theorem 2's compensation after a
// recovery (exact amount, idempotent, kept in the snapshot, enough to cover a simulated failure), and "estimate()
// never underestimates".
#include "algorithms/heavy_hitters/hh_operators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/testing/conformance.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "tests/unit/algorithms/operator_test_util.h"

namespace afs::hh {
namespace {

using afs::testing::full_of;
using afs::testing::NullEmitter;
using afs::testing::recovery;

constexpr std::uint64_t kItems = 4000;
constexpr std::uint64_t kKeys = 500;

// A seeded Zipf(500, 1.1) stream; packet weights give each position a size of 40..1500 bytes.
std::vector<Item> zipf_items(std::uint64_t seed, Weights weights, std::uint64_t n = kItems) {
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

Params cm_params(Weights weights, double phi, std::uint64_t width = 128, std::uint64_t depth = 4) {
  Params p;
  p.set("width", width).set("depth", depth).set("seed", 7).set("phi", phi).set("max-weight", max_weight(weights));
  return p;
}

// phi = 1% of the stream's weight: with Zipf(1.1) over 500 keys a dozen or so keys exceed it.
double phi_for(const std::vector<Item>& items) {
  double total = 0;
  for (const Item& it : items) total += static_cast<double>(it.value);
  return total / 100;
}

std::size_t keys_above(const std::unordered_map<std::uint64_t, std::int64_t>& exact, double phi) {
  std::size_t n = 0;
  for (const auto& [k, v] : exact) n += static_cast<double>(v) > phi ? 1 : 0;
  return n;
}

TEST(ExactWeights, EqualTheWeightsSummedKeyByKey) {
  for (const Weights w : {Weights::Unit, Weights::Packet}) {
    Params p;
    p.set("items", kItems).set("keys", kKeys).set("skew", 1.1).set("seed", 3);
    p.set("weights", w == Weights::Packet ? "packet" : "unit");
    const auto items = zipf_items(3, w);
    const auto exact = exact_weights(p);
    EXPECT_EQ(exact, exact_of(items));
    EXPECT_GT(exact.size(), kKeys / 2);  // most keys are drawn: the map is not trivially empty
  }
}

// With blocks of one counter the divergence is each counter's drift, exactly (counters only grow); with the default
// blocks it is an upper bound (BlockTrackedArray), which the kit checks as such.
TEST(CountMinHhConformance, UnitWeights) {
  const auto items = zipf_items(3, Weights::Unit);
  const double phi = phi_for(items);
  ASSERT_GE(keys_above(exact_of(items), phi), 5u) << "the stream must report some keys";
  for (const std::uint64_t block : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << "divergence-block " << block);
    Params p = cm_params(Weights::Unit, phi);
    p.set("divergence-block", block);
    const testing::OperatorMaker make = [&] { return std::make_unique<CountMinHeavyHitters>(p); };
    testing::ConformanceOptions o;
    o.exact_divergence = block == 1;
    EXPECT_TRUE(testing::OperatorConforms(make, items, o));
    // Every other check holds when equal states may serialize differently (see FinishAfterRecovery... below).
    o.canonical_snapshots = false;
    EXPECT_TRUE(testing::OperatorConforms(make, items, o));
  }
}

TEST(CountMinHhConformance, PacketWeights) {
  const auto items = zipf_items(5, Weights::Packet);
  const double phi = phi_for(items);
  ASSERT_GE(keys_above(exact_of(items), phi), 5u);
  for (const std::uint64_t block : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << "divergence-block " << block);
    Params p = cm_params(Weights::Packet, phi);
    p.set("divergence-block", block);
    testing::ConformanceOptions o;
    o.seed = 11;
    o.backup_every_max = 100;
    o.exact_divergence = block == 1;
    const testing::OperatorMaker make = [&] { return std::make_unique<CountMinHeavyHitters>(p); };
    EXPECT_TRUE(testing::OperatorConforms(make, items, o));
    o.canonical_snapshots = false;
    EXPECT_TRUE(testing::OperatorConforms(make, items, o));
  }
}

// Measured at backups (the runtime behind replayable sources with a remote store,
// Operator::measure_divergence_at_backups): the divergence is exact whatever the divergence block, and every check
// of the kit holds as in the tracked layout.
TEST(CountMinHhConformance, MeasuredAtBackups) {
  for (const auto weights : {Weights::Unit, Weights::Packet}) {
    const auto items = zipf_items(weights == Weights::Unit ? 3 : 5, weights);
    const double phi = phi_for(items);
    ASSERT_GE(keys_above(exact_of(items), phi), 5u);
    for (const std::uint64_t block : {1, 8}) {
      SCOPED_TRACE(::testing::Message() << "divergence-block " << block << " unit weights "
                                        << (weights == Weights::Unit));
      Params p = cm_params(weights, phi);
      p.set("divergence-block", block);
      const testing::OperatorMaker make = [&] {
        auto op = std::make_unique<CountMinHeavyHitters>(p);
        op->measure_divergence_at_backups();
        return op;
      };
      testing::ConformanceOptions o;
      o.seed = 17;
      o.backup_every_max = 100;
      EXPECT_TRUE(testing::OperatorConforms(make, items, o));
    }
  }
}

TEST(CountMinHeavyHitters, DivergenceBlockMustBeAPowerOfTwoAndDividesTheWidth) {
  Params p = cm_params(Weights::Unit, 1e12, 100);
  p.set("divergence-block", 6);
  EXPECT_THROW(CountMinHeavyHitters::validate(p), ConfigError);
  EXPECT_THROW(CountMinHeavyHitters{p}, ConfigError);
  p.set("divergence-block", 0);
  EXPECT_THROW(CountMinHeavyHitters::validate(p), ConfigError);
  // Width 100 = 4 * 25: blocks of 8 become blocks of 4, so the rows' last counters never share a block with the
  // next row's first: one item (four rows, one counter each) moves the divergence by at most its weight.
  p.set("divergence-block", 8);
  CountMinHeavyHitters op(p);
  EXPECT_EQ(op.divergence_block(), 4u);
  EXPECT_EQ(CountMinHeavyHitters(cm_params(Weights::Unit, 1e12, 128)).divergence_block(), kCountMinDivergenceBlock);
  NullEmitter out;
  for (std::uint64_t k = 0; k < 5000; ++k) {
    const double before = op.divergence();
    op.process(Item{k * 0x9E3779B97F4A7C15ULL, 1, 0, 0}, out);
    ASSERT_LE(op.divergence() - before, 1.0) << "item " << k;
  }
}

// hh-merge receives (key, estimate) reports; estimates of a key grow, and several keys interleave.
TEST(HhMergeConformance, InterleavedReports) {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<std::uint64_t> key(1, 200);
  std::uniform_int_distribution<std::int64_t> step(1, 1000);
  std::unordered_map<std::uint64_t, std::int64_t> latest;
  std::vector<Item> items(3000);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto k = key(rng) * 0x9E3779B97F4A7C15ULL;
    latest[k] += step(rng);
    items[i] = {k, latest[k], static_cast<std::int64_t>(i), 0};
  }
  Params p;
  p.set("items", 1000000);  // alpha: the largest estimate one report can carry
  const testing::OperatorMaker make = [&] { return std::make_unique<HeavyHitterMerge>(p); };
  EXPECT_TRUE(testing::OperatorConforms(make, items));
  testing::ConformanceOptions by_distance;
  by_distance.canonical_snapshots = false;
  EXPECT_TRUE(testing::OperatorConforms(make, items, by_distance));

  HeavyHitterMerge merge(p);
  NullEmitter out;
  for (const Item& it : items) merge.process(it, out);
  EXPECT_EQ(merge.results(), latest);
}

// DESIGN.md section 9: snapshot/restore/continue equals an uninterrupted run. Recovery restores the last full backup
// and applies the later deltas (DESIGN.md section 5); the recovered operator's finish() must report the same final
// heavy hitters in the same order as the operator that never failed.
TEST(CountMinHh, FinishAfterRecoveryFromTheBackupChainMatchesAFailureFreeRun) {
  auto items = zipf_items(3, Weights::Unit);
  const Params p = cm_params(Weights::Unit, phi_for(items));
  items.resize(3000);
  CountMinHeavyHitters op(p), recovered(p);
  {
    const auto first = full_of(op);
    ByteReader r(first);
    recovered.restore_full(r);
  }
  testing::RecordingEmitter reports;
  for (std::size_t i = 0; i < items.size(); ++i) {
    op.process(items[i], reports);
    if ((i + 1) % 500 == 0) {  // back up every 500 items: delta, then mark
      ByteWriter w;
      op.snapshot_delta(w);
      op.mark_backed_up();
      const auto delta = w.take();
      ByteReader r(delta);
      recovered.apply_delta(r);
    }
  }
  ASSERT_EQ(recovered.distance(op), 0);
  ASSERT_EQ(op.distance(recovered), 0);
  testing::RecordingEmitter want, got;
  op.finish(want);
  recovered.finish(got);
  ASSERT_GE(want.items.size(), 5u);
  EXPECT_TRUE(std::is_permutation(want.items.begin(), want.items.end(), got.items.begin(), got.items.end()));
  EXPECT_EQ(got.items, want.items) << "same heavy hitters, reported in a different order after recovery";
  EXPECT_TRUE(full_of(recovered) == full_of(op)) << "equal states, different snapshot bytes";
}

TEST(CountMinHh, CompensationAddsFloorThetaPlusLTimesMaxWeightOncePerFailure) {
  const auto items = zipf_items(9, Weights::Packet, 2000);
  CountMinHeavyHitters op(cm_params(Weights::Packet, 1e12));
  NullEmitter out;
  for (const Item& it : items) op.process(it, out);
  op.mark_backed_up();
  std::vector<std::uint64_t> keys;
  for (std::uint64_t r = 0; r < kKeys; ++r) keys.push_back(ZipfGenerator::key_of_rank(r));
  keys.push_back(12345);  // never seen
  std::vector<std::int64_t> before;
  for (auto k : keys) before.push_back(op.estimate(k));
  ASSERT_EQ(op.compensation(), 0);

  // Failure 1: theta_1 = 1000.75, l_1 = 3 -> floor(1000.75) + 3 * 1500 = 5500 on every counter.
  const RecoveryInfo first = recovery({1000.75}, {3}, 1500);
  op.on_recovered(first);
  EXPECT_EQ(op.compensation(), 5500);
  EXPECT_EQ(op.divergence(), 5500);  // every counter moved by 5500 since the backup (max-abs)
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(op.estimate(keys[i]), before[i] + 5500) << i;

  // The same failure reported again (e.g. the hook runs twice) adds nothing.
  op.on_recovered(first);
  EXPECT_EQ(op.compensation(), 5500);
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(op.estimate(keys[i]), before[i] + 5500) << i;

  // A snapshot taken after compensation restores the compensated counters and the compensated failure count.
  const auto snap = full_of(op);
  CountMinHeavyHitters restored(cm_params(Weights::Packet, 1e12));
  ByteReader r(snap);
  restored.restore_full(r);
  EXPECT_EQ(restored.compensation(), 5500);
  EXPECT_EQ(restored.distance(op), 0);
  restored.on_recovered(first);  // recovered again from that snapshot: failure 1 is already compensated
  EXPECT_EQ(restored.compensation(), 5500);
  EXPECT_EQ(full_of(restored), snap);

  // Failure 2 (thresholds halved): only its own term, floor(500.375) + 1 * 1500 = 2000, is added.
  const RecoveryInfo second = recovery({1000.75, 500.375}, {3, 1}, 1500);
  restored.on_recovered(second);
  EXPECT_EQ(restored.compensation(), 7500);
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(restored.estimate(keys[i]), before[i] + 7500) << i;
  restored.on_recovered(second);
  EXPECT_EQ(restored.compensation(), 7500);

  // A snapshot from before failure 1's compensation, recovered after failure 2: both terms are added at once.
  CountMinHeavyHitters late(cm_params(Weights::Packet, 1e12));
  for (const Item& it : items) late.process(it, out);
  late.on_recovered(second);
  EXPECT_EQ(late.compensation(), 7500);
  EXPECT_EQ(late.distance(restored), 0);
}

// Theta and L are any finite numbers >= 0: a per-failure Theta of 2^63 or more (--ft.theta 1e20 with 2 copies), or an
// l_j * alpha past int64, once made the loss bound undefined (INT64_MIN on x86: no compensation at all, and a
// negative one recorded). Now the bound saturates at kLossBoundCap: the measured loss wins when there is one, and the
// total compensation over any number of failures stays at most the cap.
TEST(CountMinHh, HugeThetaOrLSaturatesTheLossBound) {
  const auto items = zipf_items(9, Weights::Packet, 2000);
  CountMinHeavyHitters op(cm_params(Weights::Packet, 1e12));
  NullEmitter out;
  for (const Item& it : items) op.process(it, out);
  op.mark_backed_up();
  const auto key = ZipfGenerator::key_of_rank(0);
  const std::int64_t before = op.estimate(key);

  // Measured (behind a replayable source: nothing missing, a residual of 7): the measurement, not the bound.
  RecoveryInfo measured = recovery({2.5e19}, {2.5e16}, 1500);
  measured.missing_by_failure = {std::uint64_t{0}};
  measured.residual_by_failure = {7.5};
  op.on_recovered(measured);
  EXPECT_EQ(op.compensation(), 7);
  EXPECT_EQ(op.estimate(key), before + 7);

  // Not measured: the cap, once in all, whatever more failures add.
  CountMinHeavyHitters big(cm_params(Weights::Packet, 1e12));
  for (const Item& it : items) big.process(it, out);
  big.on_recovered(recovery({2.5e19}, {250}, 1500));
  EXPECT_EQ(big.compensation(), RecoveryInfo::kLossBoundCap);
  EXPECT_EQ(big.estimate(key), before + RecoveryInfo::kLossBoundCap);
  big.on_recovered(recovery({2.5e19, 1.25e19}, {250, 125}, 1500));
  EXPECT_EQ(big.compensation(), RecoveryInfo::kLossBoundCap);
  EXPECT_EQ(big.estimate(key), before + RecoveryInfo::kLossBoundCap);

  // L alone: 2.5e16 * 1500 is past int64.
  CountMinHeavyHitters big_l(cm_params(Weights::Packet, 1e12));
  big_l.on_recovered(recovery({10}, {2.5e16}, 1500));
  EXPECT_EQ(big_l.compensation(), RecoveryInfo::kLossBoundCap);
}

// The residual a partial delta leaves comes back as compensation on every counter after a failure, so count-min-hh
// caps it at residual-share * phi / 2^(k + 1) after k compensated failures (theorem2-count-min.md, "Residual cap"):
// the residuals of any number of failures add at most residual-share * phi (phi / 256 by default). A phi far above
// the residual asked changes nothing; a share outside (0, 1/4] is refused.
TEST(CountMinHh, PartialResidualIsCappedBelowPhi) {
  const auto items = zipf_items(3, Weights::Unit, 20000);
  const double phi = 200 / kResidualShare;  // the first cap: 100
  CountMinHeavyHitters op(cm_params(Weights::Unit, phi, 64, 2));
  NullEmitter out;
  std::size_t next = 0;
  auto feed = [&](std::size_t n) {
    for (std::size_t i = 0; i < n; ++i, ++next) op.process(items[next % items.size()], out);
  };
  op.mark_backed_up();
  for (int k = 0; k < 4; ++k) {
    const double cap = kResidualShare * phi / std::ldexp(1.0, k + 1);  // 100, 50, 25, 12.5
    for (int b = 0; b < 5; ++b) {
      feed(3000);
      ByteWriter w;
      const double left = op.backup_partial_delta(w, 1e9);
      EXPECT_LE(left, cap) << "after " << k << " failures";
      EXPECT_LE(op.divergence(), cap);
    }
    std::vector<double> thetas(static_cast<std::size_t>(k + 1), 10), ls(static_cast<std::size_t>(k + 1), 0);
    op.on_recovered(recovery(thetas, ls, 1));  // compensates failure k + 1
  }
  // With phi far above it, the residual asked is what is left at most (the counters moved less than it).
  CountMinHeavyHitters loose(cm_params(Weights::Unit, 1e12, 64, 2));
  ByteWriter first;
  EXPECT_EQ(loose.backup_partial_delta(first, 1e9), 0);  // no watch level yet: a whole delta, which sets it
  for (std::size_t i = 0; i < 3000; ++i) loose.process(items[i], out);
  const double moved = loose.divergence();
  ASSERT_GT(moved, 100);  // past the first cap of the phi above
  ByteWriter w;
  EXPECT_EQ(loose.backup_partial_delta(w, 1e9), moved);
  // The share is the option's: a quarter (the old cap) at most, which the watch margin phi / 4 covers.
  for (const double share : {0.0, -0.1, 0.3}) {
    EXPECT_THROW(CountMinHeavyHitters(cm_params(Weights::Unit, 800, 64, 2).set("residual-share", share)), ConfigError)
        << share;
  }
  CountMinHeavyHitters quarter(cm_params(Weights::Unit, 800, 64, 2).set("residual-share", 0.25));
  for (std::size_t i = 0; i < 3000; ++i) quarter.process(items[i], out);
  ByteWriter q;
  EXPECT_LE(quarter.backup_partial_delta(q, 1e9), 100);  // 0.25 * 800 / 2
}

TEST(CountMinHh, NeverUnderestimatesAndReportsEveryKeyAbovePhi) {
  for (const Weights w : {Weights::Unit, Weights::Packet}) {
    const auto items = zipf_items(21, w, 20000);
    const double phi = phi_for(items) / 4;
    // A narrow sketch (64 x 3) so that collisions inflate many estimates.
    CountMinHeavyHitters op(cm_params(w, phi, 64, 3));
    testing::RecordingEmitter out;
    for (const Item& it : items) op.process(it, out);
    const auto exact = exact_of(items);
    std::size_t inflated = 0;
    for (const auto& [k, v] : exact) {
      ASSERT_GE(op.estimate(k), v) << "key " << k;
      inflated += op.estimate(k) > v ? 1 : 0;
    }
    EXPECT_GT(inflated, exact.size() / 2) << "the sketch is narrow enough for collisions";
    std::set<std::uint64_t> reported;
    for (const auto& e : out.items) {
      EXPECT_TRUE(reported.insert(e.key).second) << "key " << e.key << " reported twice";
      EXPECT_GT(static_cast<double>(e.value), phi);
    }
    const std::size_t heavy = keys_above(exact, phi);
    ASSERT_GE(heavy, 5u);
    for (const auto& [k, v] : exact) {
      if (static_cast<double>(v) > phi) {
        EXPECT_TRUE(reported.count(k)) << "heavy key " << k << " missed";
      }
    }
    // finish() reports the final estimate of every reported key.
    testing::RecordingEmitter final_out;
    op.finish(final_out);
    ASSERT_EQ(final_out.items.size(), reported.size());
    for (const auto& e : final_out.items) EXPECT_EQ(e.value, op.estimate(e.key));
  }
}

// Theorem 2 on one worker: back up whenever divergence() exceeds theta, crash, restore the last backup, lose the
// items since then and the next l unbacked ones, compensate: no estimate is below the exact weight of what the
// worker should have counted.
TEST(CountMinHh, CompensationCoversASimulatedFailure) {
  const auto items = zipf_items(33, Weights::Packet, 6000);
  const auto exact = exact_of(items);
  const double theta = 20000.5;  // runtime theta at the failure
  const std::size_t l = 4;       // runtime l: unbacked, unprocessed items lost
  const Params p = cm_params(Weights::Packet, 1e12, 256, 4);
  CountMinHeavyHitters op(p);
  NullEmitter out;
  std::vector<std::uint8_t> backup = full_of(op);
  const std::size_t crash = 4000;
  std::size_t lost_since_backup = 0;
  for (std::size_t i = 0; i < crash; ++i) {
    op.process(items[i], out);
    ++lost_since_backup;
    if (op.divergence() > theta) {
      backup = full_of(op);
      op.mark_backed_up();
      lost_since_backup = 0;
    }
  }
  ASSERT_GT(lost_since_backup, 0u) << "the crash must lose some processed items";
  CountMinHeavyHitters recovered(p);
  ByteReader r(backup);
  recovered.restore_full(r);
  for (std::size_t i = crash + l; i < items.size(); ++i) recovered.process(items[i], out);
  // Without compensation some estimate is too low (the failure lost real weight) ...
  std::int64_t worst = 0;
  for (const auto& [k, v] : exact) worst = std::min(worst, recovered.estimate(k) - v);
  EXPECT_LT(worst, 0);
  // ... and by at most floor(theta) + l * max-weight, which is exactly what the compensation adds.
  const auto bound = static_cast<std::int64_t>(std::floor(theta)) + static_cast<std::int64_t>(l) * 1500;
  EXPECT_GE(worst, -bound);
  recovered.on_recovered(recovery({theta}, {static_cast<double>(l)}, 1500));
  EXPECT_EQ(recovered.compensation(), bound);
  for (const auto& [k, v] : exact) ASSERT_GE(recovered.estimate(k), v) << "key " << k;
}

// The runtime's whole deltas (residual 0: ft.delta-residual 0, or thresholds halved below the room for one) go
// through backup_delta: the counters' whole-delta path, with snapshot_delta's payload, tracked or measured at
// backups, after partial deltas too, and the state counts as backed up after it.
TEST(CountMinHh, BackupDeltaWritesSnapshotDeltasPayload) {
  const auto items = zipf_items(9, Weights::Packet, 20000);
  for (const bool measured : {false, true}) {
    for (const std::uint64_t block : {1, 8}) {
      SCOPED_TRACE(::testing::Message() << "measured " << measured << " block " << block);
      Params p = cm_params(Weights::Packet, 1e12, 256, 4);
      p.set("divergence-block", block);
      CountMinHeavyHitters op(p);
      if (measured) op.measure_divergence_at_backups();
      NullEmitter out;
      for (std::size_t i = 0; i < items.size(); ++i) {
        op.process(items[i], out);
        if (i % 1500 == 700) {  // a partial delta now and then, so that whole ones follow partial ones
          ByteWriter w;
          op.backup_partial_delta(w, 1e9);
        }
        if (i % 1000 == 999) {
          ByteWriter expected;
          op.snapshot_delta(expected);
          ByteWriter w;
          op.backup_delta(w);
          ASSERT_EQ(w.buffer(), expected.buffer()) << "item " << i;
          ASSERT_EQ(op.divergence(), 0) << "item " << i;
          ByteWriter empty, none;
          op.snapshot_delta(empty);
          CountMinHeavyHitters fresh(p);
          fresh.snapshot_delta(none);
          ASSERT_EQ(empty.buffer(), none.buffer()) << "nothing left to write after a whole delta";
        }
      }
    }
  }
}
}  // namespace
}  // namespace afs::hh
