// Unit tests for TrackedVector (DESIGN.md section 3, and section 9: "every tracked container's divergence equals a
// brute-force recomputation; every snapshot/restore/continue equals an uninterrupted run").
#include "afstream/state/tracked_vector.h"

#include <gtest/gtest.h>

#include <cmath>
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

constexpr std::size_t kDeltaModeOffset = 12;  // after the u16 tag, u16 version and u64 size

void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-9 * (1.0 + std::fabs(want))); }

bool same_values(const TrackedVector& a, const Eigen::VectorXd& v) { return a.values() == v; }

// A TrackedVector delta's header (tag, version, size) and mode byte, for hand-made payloads.
ByteWriter delta_header(std::uint64_t size, std::uint8_t mode) {
  ByteWriter w;
  w.put<std::uint16_t>(0x0502);
  w.put<std::uint16_t>(1);
  w.put<std::uint64_t>(size);
  w.put<std::uint8_t>(mode);
  return w;
}

// A gradient with `nnz` random nonzero entries (all entries when nnz >= n).
Eigen::VectorXd random_gradient(std::size_t n, std::size_t nnz, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::VectorXd d = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(n));
  if (nnz >= n) {
    for (Eigen::Index i = 0; i < d.size(); ++i) d[i] = u(rng);
  } else {
    for (std::size_t k = 0; k < nnz; ++k) d[static_cast<Eigen::Index>(rng() % n)] = u(rng);
  }
  return d;
}

struct VectorModel {
  Eigen::VectorXd cur, base;
  std::set<std::size_t> touched;
  bool dense = false;
};

// One random operation on the vector and (if given) the model: sparse add, set, sparse add_dense, dense add_dense.
void random_update(TrackedVector& a, VectorModel* model, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-10.0, 10.0);
  const std::size_t n = a.size();
  const auto op = rng() % 100;
  if (op < 70) {
    const std::size_t i = rng() % n;
    const double d = u(rng);
    a.add(i, d);
    if (model) {
      model->cur[static_cast<Eigen::Index>(i)] += d;
      model->touched.insert(i);
    }
  } else if (op < 85) {
    const std::size_t i = rng() % n;
    const double v = u(rng);
    a.set(i, v);
    if (model) {
      model->cur[static_cast<Eigen::Index>(i)] = v;
      model->touched.insert(i);
    }
  } else {
    const Eigen::VectorXd d = random_gradient(n, op < 97 ? 4 : n, rng);
    a.add_dense(d);
    if (model) {
      model->cur += d;
      std::size_t nnz = 0;
      for (Eigen::Index i = 0; i < d.size(); ++i) nnz += d[i] != 0.0;
      if (!model->dense && 2 * (model->touched.size() + nnz) > n) model->dense = true;
      for (Eigen::Index i = 0; i < d.size(); ++i) {
        if (d[i] != 0.0) model->touched.insert(static_cast<std::size_t>(i));
      }
    }
  }
}

TEST(TrackedVector, DivergenceMatchesBruteForce) {
  std::mt19937_64 rng(1);
  const std::size_t n = 200;
  TrackedVector a(n);
  TrackedVector backed_up = a;
  VectorModel model{Eigen::VectorXd::Zero(n), Eigen::VectorXd::Zero(n), {}, false};
  int dense_deltas = 0, sparse_deltas = 0, bitmap_deltas = 0, fused = 0;
  for (int step = 0; step < 6000; ++step) {
    const auto r = rng() % 100;
    if (r < 3) {
      if (r == 0) {  // backup_delta: write_delta's bytes, then mark_backed_up's state (checked below)
        const auto want = delta_bytes(a);
        ByteWriter w;
        a.backup_delta(w);
        ASSERT_EQ(w.take(), want) << "step " << step;
        ++fused;
      } else {
        a.mark_backed_up();
      }
      backed_up = a;
      model.base = model.cur;
      model.touched.clear();
      model.dense = false;
    } else if (r < 7) {
      const auto d = delta_bytes(a);
      // A full copy past half the entries; else indices (4 bytes each) or a bitmap (8 bytes per 64 entries).
      const bool full_copy = model.dense || 2 * model.touched.size() > n;
      const bool bitmap = !full_copy && 4 * model.touched.size() > 8 * ((n + 63) / 64);
      ASSERT_EQ(d.at(kDeltaModeOffset), full_copy ? 1 : bitmap ? 2 : 0);
      (full_copy ? dense_deltas : bitmap ? bitmap_deltas : sparse_deltas)++;
      TrackedVector c = backed_up;
      ByteReader rd(d);
      c.apply_delta(rd);
      rd.expect_end("delta");
      ASSERT_TRUE(same_values(c, model.cur));
      EXPECT_EQ(c.divergence(), 0.0);
      EXPECT_EQ(c.dirty_count(), 0u);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(c.backed_up(i), model.cur[static_cast<Eigen::Index>(i)]);
    } else {
      random_update(a, &model, rng);
    }
    const double now = (model.cur - model.base).norm();
    expect_close(a.divergence(), now);
    EXPECT_EQ(a.dirty_count(), model.dense ? n : model.touched.size());
    if (step % 50 == 0) {
      ASSERT_TRUE(same_values(a, model.cur));
      expect_close(a.distance(backed_up), now);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(a.backed_up(i), model.base[static_cast<Eigen::Index>(i)]);
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(dense_deltas, 10);
  EXPECT_GT(sparse_deltas, 10);
  EXPECT_GT(bitmap_deltas, 10);
  EXPECT_GT(fused, 20);
}

// A delta applied over changes that were never backed up (a restore into a live vector): afterwards everything
// counts as backed up, the entries the delta did not hold too, and later changes are measured from there.
TEST(TrackedVector, ApplyingADeltaOverUnbackedChangesMakesEverythingBackedUp) {
  for (const bool dense_before : {false, true}) {
    TrackedVector source(100);
    source.add(3, 1.5);
    source.add(70, -2.0);
    const auto delta = delta_bytes(source);

    TrackedVector v(100);
    v.add(5, 4.0);  // not in the delta
    if (dense_before) v.add_dense(Eigen::VectorXd::Constant(100, 0.25));
    ByteReader rd(delta);
    v.apply_delta(rd);
    EXPECT_EQ(v.divergence(), 0.0);
    EXPECT_EQ(v.dirty_count(), 0u);
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v.backed_up(i), v.get(i)) << i;
    EXPECT_EQ(v.get(3), 1.5);
    EXPECT_EQ(v.get(5), dense_before ? 4.25 : 4.0);

    v.add(5, 3.0);
    v.add(3, 4.0);
    expect_close(v.divergence(), 5.0);
    EXPECT_EQ(v.dirty_count(), 2u);
    EXPECT_EQ(v.backed_up(5), dense_before ? 4.25 : 4.0);
  }
}

TEST(TrackedVector, SparseDeltaStaysSparse) {
  TrackedVector a(100000);
  for (std::size_t i = 0; i < 100; ++i) a.add(i * 991, 0.5);
  Eigen::VectorXd d = Eigen::VectorXd::Zero(100000);
  d[3] = 1.0;
  a.add_dense(d);  // few nonzeros: stays in the sparse regime
  EXPECT_EQ(a.dirty_count(), 101u);
  EXPECT_LT(delta_bytes(a).size(), 101u * 12 + 64);
  expect_close(a.divergence(), std::sqrt(100 * 0.25 + 1.0));
}

TEST(TrackedVector, DenseUpdateSwitchesToFullCopyDelta) {
  std::mt19937_64 rng(2);
  TrackedVector a(Eigen::VectorXd::Constant(1000, 2.0));  // initial weights count as backed up
  EXPECT_EQ(a.divergence(), 0.0);
  a.add(5, 1.0);
  const Eigen::VectorXd g = random_gradient(1000, 1000, rng);
  a.add_dense(g);
  EXPECT_EQ(a.dirty_count(), 1000u);
  Eigen::VectorXd expected = Eigen::VectorXd::Constant(1000, 2.0) + g;
  expected[5] += 1.0;
  expect_close(a.divergence(), (expected - Eigen::VectorXd::Constant(1000, 2.0)).norm());
  a.add(7, -3.0);  // sparse add in the dense regime
  expected[7] -= 3.0;
  expect_close(a.divergence(), (expected - Eigen::VectorXd::Constant(1000, 2.0)).norm());
  const auto d = delta_bytes(a);
  EXPECT_EQ(d.at(kDeltaModeOffset), 1);
  TrackedVector c(Eigen::VectorXd::Constant(1000, 2.0));
  ByteReader r(d);
  c.apply_delta(r);
  EXPECT_TRUE(same_values(c, a.values()));
  a.mark_backed_up();  // back to the sparse regime
  a.add(9, 1.0);
  EXPECT_EQ(a.dirty_count(), 1u);
  EXPECT_EQ(a.divergence(), 1.0);
}

// add_all (a learner's sparse step in one call) gives add()'s values bit for bit and its divergence to rounding, with
// repeated indices, after backups, and in the dense regime.
TEST(TrackedVector, AddAllEqualsAddEntryByEntry) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  TrackedVector batched(64), single(64);
  for (int step = 0; step < 400; ++step) {
    std::vector<std::uint32_t> index(1 + rng() % 12);
    std::vector<double> delta(index.size());
    for (std::size_t k = 0; k < index.size(); ++k) {
      index[k] = static_cast<std::uint32_t>(rng() % 64);
      if (k > 0 && rng() % 4 == 0) index[k] = index[k - 1];  // a hash collision: the same weight twice in a step
      delta[k] = u(rng);
    }
    batched.add_all(index, delta);
    for (std::size_t k = 0; k < index.size(); ++k) single.add(index[k], delta[k]);
    ASSERT_TRUE(same_values(batched, single.values())) << "step " << step;
    expect_close(batched.divergence(), single.divergence());
    EXPECT_EQ(batched.dirty_count(), single.dirty_count());
    if (step % 50 == 49) {  // a backup
      batched.mark_backed_up();
      single.mark_backed_up();
    }
    if (step == 300) {  // into the dense regime
      const Eigen::VectorXd d = random_gradient(64, 64, rng);
      batched.add_dense(d);
      single.add_dense(d);
    }
  }
  EXPECT_EQ(delta_bytes(batched), delta_bytes(single));
}

// Mode none (Operator::stop_tracking): an untracked vector holds the same values as a tracked one fed the same
// updates, divergence is unknown (infinite), and every delta it writes is a full copy that restores it exactly.
TEST(TrackedVector, UntrackedHoldsTheSameValuesAndWritesFullCopies) {
  std::mt19937_64 rng(11), same(11);
  TrackedVector tracked(500), untracked(500);
  for (int k = 0; k < 50; ++k) random_update(untracked, nullptr, rng);  // some changes before tracking stops
  for (int k = 0; k < 50; ++k) random_update(tracked, nullptr, same);
  untracked.stop_tracking();
  EXPECT_FALSE(untracked.tracking());
  EXPECT_TRUE(tracked.tracking());
  for (int k = 0; k < 3000; ++k) {  // sparse adds and sets, and dense adds (which a tracked vector takes densely)
    random_update(untracked, nullptr, rng);
    random_update(tracked, nullptr, same);
  }
  EXPECT_TRUE(same_values(untracked, tracked.values()));
  EXPECT_EQ(untracked.divergence(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(untracked.dirty_count(), untracked.size());
  untracked.mark_backed_up();  // changes nothing: still untracked
  EXPECT_EQ(untracked.divergence(), std::numeric_limits<double>::infinity());
  const auto d = delta_bytes(untracked);
  ByteWriter fused;
  untracked.backup_delta(fused);  // the same full copy, and still untracked
  EXPECT_EQ(fused.take(), d);
  EXPECT_EQ(untracked.divergence(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(d.at(kDeltaModeOffset), 1);  // a full copy, whatever changed
  TrackedVector restored(500);
  restored.add(3, 1.0);
  ByteReader r(d);
  restored.apply_delta(r);
  r.expect_end("delta");
  EXPECT_TRUE(same_values(restored, tracked.values()));
  EXPECT_EQ(restored.divergence(), 0.0);  // the restored vector still tracks
}

TEST(TrackedVector, FullRoundTrip) {
  std::mt19937_64 rng(3);
  TrackedVector a(300);
  for (int k = 0; k < 500; ++k) random_update(a, nullptr, rng);
  TrackedVector b(300);
  b.add(1, 1.0);
  const auto full = full_bytes(a);
  ByteReader r(full);
  b.read_full(r);
  r.expect_end("full");
  EXPECT_TRUE(same_values(b, a.values()));
  EXPECT_EQ(b.divergence(), 0.0);
  EXPECT_EQ(b.dirty_count(), 0u);
  EXPECT_EQ(b.distance(a), 0.0);
}

TEST(TrackedVector, SnapshotRestoreContinueEqualsUninterrupted) {
  const std::uint32_t type_id = type_id_of("test.tracked_vector");
  const double theta = 25.0;
  TrackedVector a(128);
  std::vector<std::vector<std::uint8_t>> chain;
  chain.push_back(seal_snapshot(type_id, SnapshotKind::Full, full_bytes(a)));
  a.mark_backed_up();
  std::mt19937_64 ops(4);
  auto step = [&](TrackedVector& c, std::vector<std::vector<std::uint8_t>>* log) {
    random_update(c, nullptr, ops);
    if (c.divergence() > theta) {
      log->push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(c)));
      c.mark_backed_up();
    }
  };
  for (int k = 0; k < 1500; ++k) step(a, &chain);
  chain.push_back(seal_snapshot(type_id, SnapshotKind::Delta, delta_bytes(a)));
  a.mark_backed_up();
  ASSERT_GT(chain.size(), 3u);

  TrackedVector b(128);
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
  ASSERT_TRUE(same_values(b, a.values()));

  const auto ops_state = ops;
  std::vector<std::vector<std::uint8_t>> log_a, log_b;
  for (int k = 0; k < 1500; ++k) step(a, &log_a);
  ops = ops_state;
  for (int k = 0; k < 1500; ++k) step(b, &log_b);
  EXPECT_TRUE(same_values(b, a.values()));
  EXPECT_EQ(log_b, log_a);
  EXPECT_TRUE(fingerprint(b) == fingerprint(a));
}

TEST(TrackedVector, CorruptDeltaLeavesVectorUnchanged) {
  std::mt19937_64 rng(5);
  TrackedVector writer(64);
  for (int k = 0; k < 100; ++k) random_update(writer, nullptr, rng);
  writer.mark_backed_up();
  TrackedVector target = writer;
  target.add(2, 4.0);
  auto apply = [](auto& c, ByteReader& r) { c.apply_delta(r); };
  TrackedVector sparse_writer = writer;
  sparse_writer.add(3, 1.0);
  sparse_writer.add(9, 2.0);
  const auto sparse = delta_bytes(sparse_writer);
  ASSERT_EQ(sparse.at(kDeltaModeOffset), 0);
  expect_prefixes_rejected(target, sparse, apply);
  TrackedVector dense_writer = writer;
  dense_writer.add_dense(random_gradient(64, 64, rng));
  const auto dense = delta_bytes(dense_writer);
  ASSERT_EQ(dense.at(kDeltaModeOffset), 1);
  expect_prefixes_rejected(target, dense, apply);

  auto bad_mode = sparse;
  bad_mode[kDeltaModeOffset] = 7;
  expect_rejected(target, bad_mode, apply);
  auto craft = [](std::uint64_t size, std::vector<std::uint32_t> idx, std::vector<double> vals) {
    ByteWriter w = delta_header(size, 0);
    w.put_array<std::uint32_t>(idx);
    w.put_array<double>(vals);
    return w.take();
  };
  expect_rejected(target, craft(64, {64}, {1.0}), apply);    // index out of range
  expect_rejected(target, craft(64, {1, 2}, {1.0}), apply);  // count mismatch
  expect_rejected(target, craft(65, {1}, {1.0}), apply);     // wrong size
  expect_rejected(target, full_bytes(writer), apply);        // a full payload is not a delta
  expect_rejected(target, delta_bytes(TrackedVector(63)), apply);
  // A full-copy delta with the wrong number of values.
  ByteWriter w = delta_header(64, 1);
  w.put_array<double>(std::vector<double>(63, 1.0));
  expect_rejected(target, w.take(), apply);
}

// Deltas with more changed entries than a bitmap of all of them would take bits (a learner's sparse steps between
// backups): written as a bitmap and the values in index order, restored exactly; a truncated or inconsistent one is
// rejected with the vector unchanged.
TEST(TrackedVector, BitmapDeltaRoundTripsAndRejectsCorruption) {
  std::mt19937_64 rng(17);
  TrackedVector writer(1000);
  for (int k = 0; k < 300; ++k) random_update(writer, nullptr, rng);
  writer.mark_backed_up();
  TrackedVector target = writer;
  for (std::size_t i = 0; i < 1000; i += 7) writer.add(i, 0.25);  // 143 entries: 572 bytes of indices, 128 of bits
  const auto d = delta_bytes(writer);
  ASSERT_EQ(d.at(kDeltaModeOffset), 2);
  EXPECT_LT(d.size(), 143u * 8 + 16 * 8 + 64);
  TrackedVector restored = target;
  ByteReader r(d);
  restored.apply_delta(r);
  r.expect_end("delta");
  EXPECT_TRUE(same_values(restored, writer.values()));
  EXPECT_EQ(restored.divergence(), 0.0);

  target.add(2, 4.0);
  auto apply = [](auto& c, ByteReader& rd) { c.apply_delta(rd); };
  expect_prefixes_rejected(target, d, apply);
  auto craft = [](std::uint64_t size, std::vector<std::uint64_t> bits, std::vector<double> vals) {
    ByteWriter w = delta_header(size, 2);
    w.put_array<std::uint64_t>(bits);
    w.put_array<double>(vals);
    return w.take();
  };
  TrackedVector small(100);
  small.add(1, 1.0);
  const Eigen::VectorXd unchanged = small.values();
  expect_rejected(small, craft(100, {1}, {1.0}), apply);                          // too few words
  expect_rejected(small, craft(100, {1, 0, 0}, {1.0}), apply);                    // too many words
  expect_rejected(small, craft(100, {3, 0}, {1.0}), apply);                       // more bits than values
  expect_rejected(small, craft(100, {1, 0}, {1.0, 2.0}), apply);                  // fewer bits than values
  expect_rejected(small, craft(100, {0, std::uint64_t{1} << 40}, {1.0}), apply);  // bit 104 of 100 entries
  expect_rejected(small, craft(100, {0, std::uint64_t{1} << 36}, {1.0}), apply);  // bit 100: one past the last
  EXPECT_TRUE(same_values(small, unchanged));
  TrackedVector ok = small;
  const auto last = craft(100, {0, std::uint64_t{1} << 35}, {7.0});  // entry 99
  ByteReader rd(last);
  ok.apply_delta(rd);
  EXPECT_EQ(ok.get(99), 7.0);
  EXPECT_EQ(ok.get(1), 1.0);
}

// read_delta only reads: the vector is unchanged until apply_delta(Delta&&), which then gives what
// apply_delta(ByteReader&) gives, for a sparse and for a full-copy delta.
TEST(TrackedVector, ReadDeltaThenApplyEqualsApplyDelta) {
  std::mt19937_64 rng(8);
  TrackedVector base(5000);
  for (int k = 0; k < 200; ++k) random_update(base, nullptr, rng);
  base.mark_backed_up();
  TrackedVector sparse_writer = base, dense_writer = base;
  sparse_writer.add(17, 2.5);
  sparse_writer.add(4999, -1.0);
  dense_writer.add_dense(random_gradient(5000, 5000, rng));
  for (const auto* writer : {&sparse_writer, &dense_writer}) {
    const auto bytes = delta_bytes(*writer);
    TrackedVector one_step = base, two_steps = base;
    ByteReader r1(bytes), r2(bytes);
    one_step.apply_delta(r1);
    auto d = two_steps.read_delta(r2);
    EXPECT_TRUE(same_values(two_steps, base.values()));  // nothing applied yet
    two_steps.apply_delta(std::move(d));
    EXPECT_TRUE(same_values(two_steps, writer->values()));
    EXPECT_TRUE(same_values(one_step, writer->values()));
    EXPECT_EQ(two_steps.divergence(), 0.0);  // counts as backed up
  }
}

TEST(TrackedVector, CorruptFullLeavesVectorUnchanged) {
  std::mt19937_64 rng(6);
  TrackedVector a(40);
  for (int k = 0; k < 100; ++k) random_update(a, nullptr, rng);
  TrackedVector target(40);
  target.add(3, 4.0);
  auto read = [](auto& c, ByteReader& r) { c.read_full(r); };
  expect_prefixes_rejected(target, full_bytes(a), read);
  expect_rejected(target, full_bytes(TrackedVector(41)), read);
  expect_rejected(target, delta_bytes(a), read);
}

TEST(TrackedVector, RejectsBadArguments) {
  EXPECT_THROW(TrackedVector(4, Metric::L1), ConfigError);
  EXPECT_THROW(TrackedVector(Eigen::VectorXd::Zero(4), Metric::MaxAbs), ConfigError);
  TrackedVector a(4);
  EXPECT_THROW(a.add_dense(Eigen::VectorXd::Zero(5)), std::invalid_argument);
  EXPECT_THROW(static_cast<void>(a.distance(TrackedVector(3))), std::invalid_argument);
  EXPECT_EQ(a.metric(), Metric::L2);
}

}  // namespace
}  // namespace afs
