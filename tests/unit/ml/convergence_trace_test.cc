// Tests of the sgd-learner's convergence trace (issue 5, item 4): a point every trace-every examples with the L1
// model change since the previous point (checked against the core learner's iterates), the progressive counters and
// the wall time; the trace survives snapshot / restore (conformance kit) and the model-merge sink combines the
// copies' traces; a detector on the trace of the HIGGS-like data converges where the L1 change settles.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/testing/conformance.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"

namespace afs::ml {
namespace {

using afs::testing::RecordingEmitter;

Params traced(const std::string& data, const std::string& optimizer, std::int64_t every, const char* clock = "off") {
  Params p;
  p.set("data", data).set("examples", std::uint64_t{50000}).set("seed", std::uint64_t{3});
  p.set("task", "logistic").set("optimizer", optimizer).set("eta0", 0.5).set("l2", 1e-4).set("clip", 1e9);
  if (data == "kdd") p.set("hash-bits", std::int64_t{10});
  p.set("trace-every", every).set("trace-clock", std::string(clock));
  return p;
}

std::vector<Item> indices(std::uint64_t begin, std::uint64_t end) {
  std::vector<Item> v;
  for (std::uint64_t n = begin; n < end; ++n) v.push_back({n, static_cast<std::int64_t>(n), 0, 0});
  return v;
}

// The trace against an independent computation: learn() on the same examples, with the weights kept at every
// 500th example. Counts, L1 changes (the first one from the all-zero start), loss sums and correct counts agree.
TEST(ConvergenceTrace, PointsEveryNExamplesWithTheL1ModelChange) {
  for (const std::string data : {"higgs", "kdd"}) {
    const Params p = traced(data, "sgd", 500);
    SgdLearnerOperator op(p, {});
    const auto d = dataset_from(p);
    Learner l = make_learner(learner_config_from(p, d->info()));
    Eigen::VectorXd prev = Eigen::VectorXd::Zero(l.weights.size());
    std::vector<double> l1, norms, loss_sums, corrects;
    double loss_sum = 0, correct = 0;
    Example x;
    RecordingEmitter out;
    for (const auto& item : indices(0, 3200)) {
      op.process(item, out);
      d->example(item.key, x);
      const Outcome o = learn(l, x);
      loss_sum += o.loss;
      correct += o.correct ? 1 : 0;
      if ((item.key + 1) % 500 == 0) {
        l1.push_back((l.weights - prev).lpNorm<1>());
        norms.push_back(l.weights.lpNorm<1>());
        prev = l.weights;
        loss_sums.push_back(loss_sum);
        corrects.push_back(correct);
      }
    }
    const auto& t = op.trace();
    ASSERT_EQ(t.size(), 6u) << data;  // 500, 1000, ..., 3000 (not 3200)
    for (std::size_t k = 0; k < t.size(); ++k) {
      EXPECT_EQ(t[k].count, 500.0 * static_cast<double>(k + 1)) << data;
      // The operator sums only the entries that moved, in the order they first moved: the same terms as the
      // brute-force norm, added in another order (so equal to rounding).
      EXPECT_NEAR(t[k].l1, l1[k], 1e-12 * l1[k]) << data << " point " << k;
      // The weights' L1 norm over a view of the tracked vector (stride 2), which Eigen sums in another order than
      // a plain vector's: equal to rounding.
      EXPECT_NEAR(t[k].norm, norms[k], 1e-12 * norms[k]) << data;
      EXPECT_DOUBLE_EQ(t[k].loss_sum, loss_sums[k]) << data;
      EXPECT_EQ(t[k].correct, corrects[k]) << data;
      EXPECT_EQ(t[k].seconds, 0) << data;  // trace-clock = off
    }
    EXPECT_GT(t[0].l1, t[5].l1) << data;  // SGD's steps shrink like eta0 / sqrt(t)
  }
}

// The wall clock: seconds since trace-start-ns, non-decreasing.
TEST(ConvergenceTrace, SecondsSinceTheJobStart) {
  Params p = traced("higgs", "sgd", 100, "wall");
  const auto ten_s_ago = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch() - std::chrono::seconds(10))
                             .count();
  p.set("trace-start-ns", static_cast<std::int64_t>(ten_s_ago));
  SgdLearnerOperator op(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 1000)) op.process(item, out);
  ASSERT_EQ(op.trace().size(), 10u);
  for (std::size_t k = 0; k < op.trace().size(); ++k) {
    EXPECT_GE(op.trace()[k].seconds, 10.0);
    EXPECT_LT(op.trace()[k].seconds, 100.0);
    if (k > 0) {
      EXPECT_GE(op.trace()[k].seconds, op.trace()[k - 1].seconds);
    }
  }
}

// The trace is state: the conformance kit's snapshot / restore / continue gives the same bytes (trace points and
// the weights at the last point included) as an uninterrupted run, delta chains reproduce it, truncations rejected.
TEST(ConvergenceTrace, SurvivesSnapshotAndRestore) {
  for (const auto& [data, optimizer] : {std::pair{"higgs", "sgd"}, std::pair{"kdd", "adagrad"}}) {
    const Params p = traced(data, optimizer, 97);
    afs::testing::ConformanceOptions o;
    o.max_truncations = 64;
    EXPECT_TRUE(afs::testing::OperatorConforms([&] { return std::make_unique<SgdLearnerOperator>(p, InstanceInfo{}); },
                                               indices(100, 1600), o))
        << data;
  }
  // Restoring an older backup rolls the trace back with the weights: the trace is that of the restored history.
  const Params p = traced("higgs", "sgd", 100);
  SgdLearnerOperator a(p, {}), b(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 250)) a.process(item, out);
  ByteWriter w;
  a.snapshot_full(w);
  for (const auto& item : indices(250, 600)) a.process(item, out);
  ASSERT_EQ(a.trace().size(), 6u);
  const auto bytes = w.take();
  ByteReader r(bytes);
  b.restore_full(r);
  ASSERT_EQ(b.trace().size(), 2u);
  for (const auto& item : indices(250, 600)) b.process(item, out);
  EXPECT_EQ(b.trace(), a.trace());
}

// A backup of op as a worker takes it (the snapshot, then mark_backed_up), and a full snapshot alone.
// A backup as the runtime takes it: snapshot_full and mark_backed_up, or backup_delta, whose bytes must be
// snapshot_delta's.
std::vector<std::uint8_t> backup_of(SgdLearnerOperator& op, bool full) {
  ByteWriter w;
  if (full) {
    op.snapshot_full(w);
    op.mark_backed_up();
    return w.take();
  }
  op.snapshot_delta(w);
  ByteWriter fused;
  op.backup_delta(fused);
  EXPECT_EQ(fused.buffer(), w.buffer()) << "backup_delta wrote other bytes than snapshot_delta";
  return w.take();
}
std::vector<std::uint8_t> full_snapshot(const SgdLearnerOperator& op) {
  ByteWriter w;
  op.snapshot_full(w);
  return w.take();
}
// A copy restored from a chain: a full snapshot, then deltas.
std::unique_ptr<SgdLearnerOperator> restored_from(const Params& p,
                                                  const std::vector<std::vector<std::uint8_t>>& chain) {
  auto b = std::make_unique<SgdLearnerOperator>(p, InstanceInfo{});
  for (std::size_t k = 0; k < chain.size(); ++k) {
    ByteReader r(chain[k]);
    k == 0 ? b->restore_full(r) : b->apply_delta(r);
  }
  return b;
}

// A backup ends with the trace's moved entries: u64 kept (entries of the state it applies to that stay), u64 n, n u32
// indices, u64 (n + 7) / 8, the derived bits, u64 m, m doubles (the values not derived; m = n less the bits set).
struct TraceTail {
  std::uint64_t kept = 0, count = 0;
  std::size_t first = 0;      // offset of the first index
  std::uint64_t derived = 0;  // entries whose value the delta leaves to the state it applies to
};
TraceTail trace_tail(const std::vector<std::uint8_t>& bytes) {
  const auto u64_at = [&](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
  };
  for (std::size_t m = 0; 8 * m + 8 <= bytes.size(); ++m) {
    const std::size_t values = bytes.size() - 8 * m;  // the m doubles start here
    if (u64_at(values - 8) != m) continue;
    for (std::size_t nb = 0; nb + 16 + 8 * m <= bytes.size() && nb <= (bytes.size() / 4 + 7) / 8; ++nb) {
      const std::size_t bits = values - 8 - nb;
      if (bits < 8 || u64_at(bits - 8) != nb) continue;
      std::uint64_t set = 0;
      for (std::size_t b = 0; b < nb; ++b) set += static_cast<std::uint64_t>(std::popcount(bytes[bits + b]));
      for (std::size_t n = nb == 0 ? 0 : 8 * nb - 7; n <= 8 * nb; ++n) {
        if (n != set + m || bits - 8 < 4 * n + 16) continue;
        const std::size_t first = bits - 8 - 4 * n;
        if (u64_at(first - 8) != n) continue;
        return TraceTail{u64_at(first - 16), n, first, set};
      }
    }
  }
  ADD_FAILURE() << "no trace entries at the end of the backup";
  return {};
}

// The trace's moved entries in a snapshot are checked before anything changes: an index out of range or repeated
// is a FormatError naming it, and the operator keeps its state.
TEST(ConvergenceTrace, RejectsCorruptTraceEntries) {
  const Params p = traced("kdd", "sgd", 100);
  SgdLearnerOperator a(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 150)) a.process(item, out);  // 50 examples after the last point: some moved
  ByteWriter w;
  a.snapshot_full(w);
  const auto bytes = w.take();
  const auto tail = trace_tail(bytes);
  EXPECT_EQ(tail.kept, 0u);  // a full snapshot keeps nothing
  const std::uint64_t k = tail.count;
  ASSERT_GE(k, 2u) << "entries moved since the last trace point";
  const std::size_t first = tail.first;
  const auto rejects = [&](std::vector<std::uint8_t> corrupt, const std::string& what) {
    SgdLearnerOperator b(p, {});
    ByteReader r(corrupt);
    try {
      b.restore_full(r);
      ADD_FAILURE() << "accepted a trace entry " << what;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(b.trace().empty());  // unchanged
  };
  auto out_of_range = bytes;
  const std::uint32_t big = 1u << 20;  // 2^10 weights
  std::memcpy(out_of_range.data() + first, &big, sizeof big);
  rejects(out_of_range, "out of range");
  auto repeated = bytes;
  std::memcpy(repeated.data() + first + 4, repeated.data() + first, 4);
  rejects(repeated, "repeated");
  auto derives = bytes;  // a full snapshot has no state to derive a value from
  derives[first + 4 * k + 8] |= 1;
  rejects(derives, "a full snapshot derives trace values");
  auto stray_bit = bytes;  // a bit past the entries
  if (k % 8 != 0) {
    stray_bit[first + 4 * k + 8 + (k - 1) / 8] |= static_cast<std::uint8_t>(0x80);
    rejects(stray_bit, "derived bits set past the trace entries");
  }
  SgdLearnerOperator c(p, {});
  ByteReader r(bytes);
  c.restore_full(r);  // the intact snapshot is accepted
  EXPECT_EQ(c.trace(), a.trace());
}

// The sink keeps each copy's trace and combines them: counts, loss sums and correct counts summed, the mean L1.
TEST(ConvergenceTrace, ModelMergeCombinesTheCopies) {
  Params p = traced("higgs", "sgd", 200);
  p.set("parallelism", std::int64_t{2});
  SgdLearnerOperator a(p, InstanceInfo{.index = 0, .parallelism = 2}), b(p, InstanceInfo{.index = 1, .parallelism = 2});
  RecordingEmitter out;
  for (const auto& item : indices(0, 1000)) a.process(item, out);
  for (const auto& item : indices(1000, 1900)) b.process(item, out);  // 4 points, a has 5
  a.finish(out);
  b.finish(out);
  ModelMerge m(p);
  RecordingEmitter none;
  for (const auto& e : out.items) m.process(Item{e.key, e.value, e.time, 0}, none);
  EXPECT_EQ(m.trace(0), a.trace());
  EXPECT_EQ(m.trace(1), b.trace());
  const auto all = m.trace(-1);
  ASSERT_EQ(all.size(), 4u);  // the points both copies reached
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].count, a.trace()[k].count + b.trace()[k].count);
    EXPECT_DOUBLE_EQ(all[k].l1, (a.trace()[k].l1 + b.trace()[k].l1) / 2);
    EXPECT_DOUBLE_EQ(all[k].norm, (a.trace()[k].norm + b.trace()[k].norm) / 2);
    EXPECT_DOUBLE_EQ(all[k].loss_sum, a.trace()[k].loss_sum + b.trace()[k].loss_sum);
    EXPECT_EQ(all[k].correct, a.trace()[k].correct + b.trace()[k].correct);
  }
  EXPECT_THROW((void)m.trace(2), std::out_of_range);
}

// Convergence detection on a real trace, as the learn job wires it (the relative change l1 / norm, a point per 1% of
// the input, a window of 5): on 4e4 HIGGS-like examples the change falls from about 1 to 0.15-0.25 (noisy) and
// settles below a tolerance of 0.3 (the job's default 0.2 is for 1e6 examples); the
// detector reports the first point of the final run below it (every later point below, the one before not), and a
// tolerance below every change never converges.
TEST(ConvergenceTrace, DetectorFindsWhereTheChangeSettles) {
  const Params p = traced("higgs", "sgd", 400);
  SgdLearnerOperator op(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 40000)) op.process(item, out);
  const auto& t = op.trace();
  ASSERT_EQ(t.size(), 100u);
  const auto rel = [](const TracePoint& q) { return q.l1 / q.norm; };
  ConvergenceDetector det(0.3, 5);
  double min_rel = rel(t[0]);
  for (const auto& q : t) {
    det.observe(static_cast<std::uint64_t>(q.count), q.seconds, rel(q));
    min_rel = std::min(min_rel, rel(q));
  }
  ASSERT_TRUE(det.converged());
  const auto at = det.items_at_convergence();
  std::size_t k = 0;
  while (t[k].count != static_cast<double>(at)) ++k;
  for (std::size_t j = k; j < t.size(); ++j) EXPECT_LT(rel(t[j]), 0.3) << j;
  ASSERT_GT(k, 5u);  // not converged from the start: the first changes are large
  EXPECT_GE(rel(t[k - 1]), 0.3);
  EXPECT_LT(k, 90u);
  ConvergenceDetector never(min_rel * 0.999, 1);
  for (const auto& q : t) never.observe(static_cast<std::uint64_t>(q.count), q.seconds, rel(q));
  EXPECT_FALSE(never.converged());
}

TEST(ConvergenceTrace, RejectsBadOptions) {
  const auto message = [](const Params& p) {
    try {
      SgdLearnerOperator op(p, {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(traced("higgs", "sgd", -1)).find("trace-every"), std::string::npos);
  EXPECT_NE(message(traced("higgs", "sgd", 10, "sundial")).find("trace-clock"), std::string::npos);
}

// A delta carries only the entries that first moved since the last backup, and says how many of the state's it keeps
// (0 after a trace point: the list starts again). Applied to any other state it is a FormatError, nothing changed.
TEST(ConvergenceTrace, DeltasCarryTheEntriesMovedSinceTheLastBackup) {
  const Params p = traced("kdd", "sgd", 100);
  SgdLearnerOperator a(p, {});
  RecordingEmitter out;
  const auto backup = [&](bool full) { return backup_of(a, full); };
  for (const auto& item : indices(0, 150)) a.process(item, out);
  const auto full = backup(true);
  const auto at_full = trace_tail(full).count;  // entries moved in examples 100..149
  for (const auto& item : indices(150, 160)) a.process(item, out);
  const auto d1 = backup(false);  // no trace point since the full snapshot
  for (const auto& item : indices(160, 170)) a.process(item, out);
  const auto d2 = backup(false);
  for (const auto& item : indices(170, 210)) a.process(item, out);  // a trace point at 200
  const auto d3 = backup(false);
  const auto t1 = trace_tail(d1), t2 = trace_tail(d2), t3 = trace_tail(d3);
  EXPECT_EQ(t1.kept, at_full);
  EXPECT_GT(t1.count, 0u);
  EXPECT_EQ(t2.kept, at_full + t1.count);
  EXPECT_GT(t2.count, 0u);
  EXPECT_EQ(t3.kept, 0u);  // examples 200..209 moved these entries since the trace point
  EXPECT_GT(t3.count, 0u);
  // The values a delta derives: every entry of d1 and d2 (no trace point since the previous backup, so each entry's
  // value at the last point is its value in that backup), those of d3 that did not move between d2 and the point at
  // 200; a full snapshot derives none.
  EXPECT_EQ(trace_tail(full).derived, 0u);
  EXPECT_EQ(t1.derived, t1.count);
  EXPECT_EQ(t2.derived, t2.count);
  EXPECT_GT(t3.derived, 0u);
  EXPECT_LT(t3.derived, t3.count);
  // The chain reproduces the state: its trace now and after ten more examples each.
  SgdLearnerOperator b(p, {});
  for (const auto* bytes : {&full, &d1, &d2, &d3}) {
    ByteReader r(*bytes);
    if (bytes == &full) {
      b.restore_full(r);
    } else {
      b.apply_delta(r);
    }
  }
  // The restored list is the original's before anything is processed (d3 started it again: its entries wait in b
  // until the list is used, here by a snapshot).
  EXPECT_EQ(full_snapshot(b), full_snapshot(a));
  for (const auto& item : indices(210, 320)) {
    a.process(item, out);
    b.process(item, out);
  }
  EXPECT_EQ(b.trace(), a.trace());
  EXPECT_EQ(full_snapshot(b), full_snapshot(a));
  ASSERT_EQ(a.trace().size(), 3u);
  // A delta applied to a state that does not hold the entries it keeps: d2 right after the full snapshot.
  SgdLearnerOperator c(p, {});
  {
    ByteReader r(full);
    c.restore_full(r);
  }
  ByteReader r2(d2);
  try {
    c.apply_delta(r2);
    ADD_FAILURE() << "applied a delta to a state it does not follow";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("keeps " + std::to_string(t2.kept) + " trace entries but the state holds " +
                                         std::to_string(at_full)),
              std::string::npos)
        << e.what();
  }
  // Nothing changed: d1 and d2 still apply, and the trace is a's at 170.
  for (const auto* bytes : {&d1, &d2}) {
    ByteReader r(*bytes);
    c.apply_delta(r);
  }
  EXPECT_EQ(c.trace().size(), 1u);
}

// backup_delta writes snapshot_delta's bytes (its trace entries' derived bits were found as the entries first moved,
// not read at the backup) and leaves mark_backed_up's state, through random backups, trace points and restores:
// the restored copy goes on from the chain and takes its own backups.
TEST(ConvergenceTrace, BackupDeltaWritesTheBytesOfSnapshotDelta) {
  for (const char* optimizer : {"sgd", "adagrad"}) {
    for (const char* data : {"kdd", "higgs"}) {
      const Params p = traced(data, optimizer, 97);
      SgdLearnerOperator a(p, {});
      RecordingEmitter out;
      std::mt19937_64 rng(5);
      std::vector<std::vector<std::uint8_t>> chain{backup_of(a, true)};
      std::unique_ptr<SgdLearnerOperator> b;
      std::uint64_t n = 0;
      for (int round = 0; round < 60; ++round) {
        for (const auto& item : indices(n, n + 1 + rng() % 150)) {
          a.process(item, out);
          if (b) b->process(item, out);
        }
        n = a.count();
        const bool full = rng() % 8 == 0;
        chain.push_back(backup_of(a, full));
        if (full) chain.erase(chain.begin(), chain.end() - 1);
        if (b) (void)backup_of(*b, rng() % 8 == 0);
        if (round == 20) {  // a copy restored from the chain, which then runs alongside
          b = restored_from(p, chain);
        }
        ASSERT_EQ(a.divergence(), 0.0);
        if (HasFailure()) return;
      }
      ASSERT_TRUE(b);
      EXPECT_EQ(full_snapshot(*b), full_snapshot(a)) << data << "/" << optimizer;
      EXPECT_GT(a.trace().size(), 20u);
    }
  }
}

// Partial backups (proofs/general-bounds.md §3.6): while the weights are within the residual of the store's, a
// backup writes no weight and leaves the divergence where it was; beyond it, a whole delta. A chain of both restores
// the scalars and the trace points as they are and the weights as the store holds them (exactly divergence() away), and
// a whole delta after it brings the copy to the state, byte for byte. AdaGrad's backups are always whole.
TEST(ConvergenceTrace, PartialBackupsWriteNoWeightWithinTheResidual) {
  for (const char* optimizer : {"sgd", "adagrad"}) {
    for (const char* data : {"kdd", "higgs"}) {
      SCOPED_TRACE(std::string(data) + "/" + optimizer);
      const bool sgd = std::string(optimizer) == "sgd";
      const Params p = traced(data, optimizer, 97);
      SgdLearnerOperator a(p, {});
      RecordingEmitter out;
      std::mt19937_64 rng(7);
      std::vector<std::vector<std::uint8_t>> chain{backup_of(a, true)};
      const auto restored = [&] { return restored_from(p, chain); };
      std::uint64_t n = 0;
      int partial = 0, whole = 0, lagged = 0;
      for (int round = 0; round < 60; ++round) {
        for (const auto& item : indices(n, n + 1 + rng() % 150)) a.process(item, out);
        n = a.count();
        const double d = a.divergence();
        const double residual = d * (rng() % 2 ? 1.5 : 0.5);
        ByteWriter w;
        const double left = a.backup_partial_delta(w, residual);
        chain.push_back(w.take());
        if (sgd && d <= residual) {
          ++partial;
          EXPECT_EQ(left, d);
          EXPECT_EQ(a.divergence(), d);
        } else {
          ++whole;
          EXPECT_EQ(left, 0.0);
          EXPECT_EQ(a.divergence(), 0.0);
        }
        if (round % 10 == 9) {
          const auto b = restored();
          EXPECT_EQ(b->count(), a.count());
          EXPECT_EQ(b->trace().size(), a.trace().size());
          const double apart = (b->weights() - a.weights()).norm();
          EXPECT_NEAR(apart, a.divergence(), 1e-9 * std::max(1.0, apart));
          lagged += apart > 0 ? 1 : 0;
        }
        if (HasFailure()) return;
      }
      chain.push_back(backup_of(a, false));
      EXPECT_EQ(full_snapshot(*restored()), full_snapshot(a));
      EXPECT_GT(whole, 10);
      if (sgd) {
        EXPECT_GT(partial, 10);
        EXPECT_GT(lagged, 0) << "no restore found the store's weights behind the state's";
      }
      EXPECT_GT(a.trace().size(), 20u);
    }
  }
}

// A weight-less backup carries no trace entry (in the KDD-like job they were nine tenths of its bytes). Restored
// from it, the list is the store's, with the store's weights: without a trace point since the last backup with
// weights, the next point's change and norm are exactly those of the restored weights' history (the last point's
// weights, the backed-up ones, then what follows); after a point, the list starts again from the weights as
// restored, and the next point measures the change from them and their norm.
TEST(ConvergenceTrace, WeightlessBackupsCarryNoTraceEntries) {
  const Params p = traced("kdd", "sgd", 100);
  for (const bool point_since : {false, true}) {
    SCOPED_TRACE(point_since ? "a trace point since the backup with weights" : "no trace point since");
    SgdLearnerOperator a(p, {});
    RecordingEmitter out;
    std::vector<std::vector<std::uint8_t>> chain{backup_of(a, true)};
    const std::uint64_t whole_at = point_since ? 90 : 120;
    Eigen::VectorXd at_point;
    for (const auto& item : indices(0, whole_at)) {
      a.process(item, out);
      if (a.count() == 100) at_point = a.weights();
    }
    chain.push_back(backup_of(a, false));
    const Eigen::VectorXd backed = a.weights();
    for (const auto& item : indices(whole_at, 150)) a.process(item, out);
    ASSERT_EQ(a.trace().size(), 1u);
    const double d = a.divergence();
    ASSERT_GT(d, 0);
    ByteWriter w;
    EXPECT_EQ(a.backup_partial_delta(w, 2 * d), d);
    chain.push_back(w.take());
    const auto tail = trace_tail(chain.back());
    EXPECT_EQ(tail.count, 0u);
    EXPECT_EQ(tail.kept, point_since ? ~std::uint64_t{0} : trace_tail(chain[1]).kept + trace_tail(chain[1]).count);
    EXPECT_LT(chain.back().size(), chain[1].size() / 4);  // scalars and empty deltas
    auto restored = restored_from(p, chain);
    SgdLearnerOperator& b = *restored;
    EXPECT_EQ(b.count(), a.count());
    EXPECT_EQ(b.trace(), a.trace());
    EXPECT_EQ(Eigen::VectorXd(b.weights()), backed);
    // A snapshot of the restored copy carries where its next point's norm comes from.
    SgdLearnerOperator again(p, {});
    {
      const auto bytes = full_snapshot(b);
      ByteReader r(bytes);
      again.restore_full(r);
    }
    for (const auto& item : indices(150, 200)) {
      b.process(item, out);
      again.process(item, out);
    }
    EXPECT_EQ(again.trace(), b.trace());
    ASSERT_EQ(b.trace().size(), 2u);
    const Eigen::VectorXd now = b.weights();
    const double l1 = (now - (point_since ? backed : at_point)).lpNorm<1>();
    EXPECT_NEAR(b.trace()[1].l1, l1, 1e-12 * l1);
    EXPECT_NEAR(b.trace()[1].norm, now.lpNorm<1>(), 1e-12 * now.lpNorm<1>());
    // A backup with weights after it carries the entries, and the chain gives the state byte for byte.
    for (const auto& item : indices(150, 200)) a.process(item, out);
    chain.push_back(backup_of(a, false));
    EXPECT_EQ(full_snapshot(*restored_from(p, chain)), full_snapshot(a));
  }
  // Only a delta starts the list again from the weights as restored.
  SgdLearnerOperator a(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 150)) a.process(item, out);
  auto full = full_snapshot(a);
  const auto tail = trace_tail(full);
  std::memset(full.data() + tail.first - 16, 0xff, 8);
  SgdLearnerOperator b(p, {});
  ByteReader r(full);
  try {
    b.restore_full(r);
    ADD_FAILURE() << "a full snapshot started its trace from the weights as restored";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("full snapshot starts its trace"), std::string::npos) << e.what();
  }
}

// Random chains: items, full snapshots, whole deltas, partial backups (weight-less or whole), restores from the chain
// (a crash: the copy goes on from what it restored) and compactions (the chain replaced by the full snapshot of its
// restore), in random order, for both optimizers and both datasets, with trace points every example, every 13, 97
// or none. Every restore and apply succeeds and gives the store's weights; every trace point's change is measured
// from the weights at the last point of the copy's own history (after a restore from a weight-less backup that
// followed a point: the restored weights) and its norm is ||w||_1; a whole delta reproduces the copy byte for byte.
TEST(ConvergenceTrace, RandomChainsKeepTheTraceOfTheRestoredHistory) {
  int weightless = 0, restarts = 0, restores = 0, compactions = 0;
  for (const char* optimizer : {"sgd", "adagrad"}) {
    for (const char* data : {"kdd", "higgs"}) {
      for (const std::int64_t every : {1, 13, 97, 0}) {
        for (std::uint64_t seed = 1; seed <= 12; ++seed) {
          SCOPED_TRACE(std::string(data) + "/" + optimizer + " every " + std::to_string(every) + " seed " +
                       std::to_string(seed));
          const bool sgd = std::string(optimizer) == "sgd";
          const Params p = traced(data, optimizer, every);
          auto a = std::make_unique<SgdLearnerOperator>(p, InstanceInfo{});
          RecordingEmitter out;
          std::mt19937_64 rng(seed * 7919 + static_cast<std::uint64_t>(every));
          std::vector<std::vector<std::uint8_t>> chain{backup_of(*a, true)};
          // A restore applies about a third of the deltas twice in a row, as after a put that a restarted backup
          // server stored twice (Operator::snapshot_delta): it must restore what the chain without repeats does.
          std::mt19937_64 repeats(seed);
          const auto restored = [&] {
            std::vector<std::vector<std::uint8_t>> stored;
            for (std::size_t k = 0; k < chain.size(); ++k) {
              stored.push_back(chain[k]);
              if (k > 0 && repeats() % 3 == 0) stored.push_back(chain[k]);
            }
            return restored_from(p, stored);
          };
          // The weights the next point is measured from (live), the store's weights, and what a restore from the
          // chain will measure from; whether a point was taken since the store's weights were written.
          Eigen::VectorXd live_base = Eigen::VectorXd(a->weights());
          Eigen::VectorXd store_w = live_base, chain_base = live_base;
          bool point_since = false;
          for (int round = 0; round < 80; ++round) {
            const std::uint64_t n = a->count();
            const auto k = 1 + rng() % (rng() % 3 == 0 ? 200 : 20);
            for (const auto& item : indices(n, n + k)) {
              const auto points = a->trace().size();
              a->process(item, out);
              if (a->trace().size() == points) continue;
              const Eigen::VectorXd w = a->weights();
              const auto& t = a->trace().back();
              const double l1 = (w - live_base).lpNorm<1>(), norm = w.lpNorm<1>();
              ASSERT_NEAR(t.l1, l1, 1e-9 * std::max(1.0, l1)) << "point at " << t.count;
              ASSERT_NEAR(t.norm, norm, 1e-9 * std::max(1.0, norm)) << "point at " << t.count;
              live_base = w;
              point_since = true;
            }
            const auto what = rng() % 10;
            if (what == 0) {
              chain = {backup_of(*a, true)};
              store_w = a->weights();
              chain_base = live_base;
              point_since = false;
            } else if (what <= 3) {
              chain.push_back(backup_of(*a, false));
              store_w = a->weights();
              chain_base = live_base;
              point_since = false;
              if (rng() % 3 == 0) {
                ASSERT_EQ(full_snapshot(*restored()), full_snapshot(*a)) << "round " << round;
              }
            } else if (what <= 7) {
              const double d = a->divergence();
              const double residual = rng() % 4 == 0 ? d * 0.5 : d * 2 + 1e-300;
              ByteWriter w;
              a->backup_partial_delta(w, residual);
              chain.push_back(w.take());
              if (sgd && d <= residual) {
                ++weightless;
                restarts += point_since ? 1 : 0;
                chain_base = point_since ? store_w : live_base;
              } else {
                store_w = a->weights();
                chain_base = live_base;
                point_since = false;
              }
            } else if (what == 8) {
              ++restores;
              a = restored();
              ASSERT_EQ(Eigen::VectorXd(a->weights()), store_w) << "round " << round;
              live_base = chain_base;
              point_since = false;
            } else {
              ++compactions;
              chain = {full_snapshot(*restored())};
            }
          }
          chain.push_back(backup_of(*a, false));
          EXPECT_EQ(full_snapshot(*restored()), full_snapshot(*a));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  EXPECT_GT(weightless, 500);
  EXPECT_GT(restarts, 100);
  EXPECT_GT(restores, 500);
  EXPECT_GT(compactions, 500);
}

// A put a restarted backup server stored twice can lie on either side of a compaction: the backup server compacted
// the chain up to the first copy (ChainCompactor: the full snapshot of its restore) before the resent put came. The
// copy after the compacted full snapshot is then the delta that snapshot already holds, applied a second time: it
// must change nothing, as it does after the delta itself (a delta that keeps trace entries found more than it keeps,
// and the restore failed; one that starts the list again took, for its derived entries, the weights it wrote).
TEST(ConvergenceTrace, ADeltaRepeatedAfterACompactionChangesNothing) {
  std::uint64_t derived = 0, added = 0;
  for (const char* data : {"higgs", "kdd"}) {
    SCOPED_TRACE(data);
    const Params p = traced(data, "sgd", 100);
    SgdLearnerOperator a(p, {});
    RecordingEmitter out;
    for (const auto& item : indices(0, 150)) a.process(item, out);
    const auto full = backup_of(a, true);
    for (const auto& item : indices(150, 260)) a.process(item, out);  // a trace point at 200
    const auto d1 = backup_of(a, false);                              // starts the list again
    for (const auto& item : indices(260, 290)) a.process(item, out);
    const auto d2 = backup_of(a, false);  // keeps the list
    ASSERT_EQ(trace_tail(d1).kept, 0u);
    derived += trace_tail(d1).derived;  // the entries a repeat of d1 took the weights it wrote for (kdd's)
    ASSERT_GT(trace_tail(d2).kept, 0u);
    added += trace_tail(d2).count;  // entries a repeat of d2 found more than it keeps (kdd's)
    for (const auto& [upto, repeat] : {std::pair{&d1, &d1}, std::pair{&d2, &d2}}) {
      std::vector<std::vector<std::uint8_t>> chain{full, d1};
      if (upto == &d2) chain.push_back(d2);
      const auto compacted = full_snapshot(*restored_from(p, chain));
      std::unique_ptr<SgdLearnerOperator> b;
      EXPECT_NO_THROW(b = restored_from(p, {compacted, *repeat})) << (repeat == &d1 ? "d1" : "d2");
      if (!b) continue;
      EXPECT_EQ(full_snapshot(*b), compacted) << (repeat == &d1 ? "d1" : "d2");
      if (upto == &d2) {
        for (const auto& item : indices(290, 420)) {
          a.process(item, out);
          b->process(item, out);
        }
        EXPECT_EQ(b->trace(), a.trace());
        EXPECT_EQ(full_snapshot(*b), full_snapshot(a));
      }
    }
  }
  EXPECT_GT(derived, 0u);
  EXPECT_GT(added, 0u);
}

// A delta's trace entries are inserted all or none: one that repeats an entry the state holds (a delta that keeps
// the list) or another entry of the same delta (one that starts it again) is a FormatError naming it, and the state,
// trace entries included, is what it was (the list that started again is put back).
TEST(ConvergenceTrace, RefusedTraceEntriesOfADeltaLeaveTheStateAsItWas) {
  const Params p = traced("kdd", "sgd", 100);
  SgdLearnerOperator a(p, {});
  RecordingEmitter out;
  const auto backup = [&](bool full) { return backup_of(a, full); };
  for (const auto& item : indices(0, 150)) a.process(item, out);
  const auto full = backup(true);
  for (const auto& item : indices(150, 160)) a.process(item, out);
  const auto d1 = backup(false);                                    // keeps the list
  for (const auto& item : indices(160, 210)) a.process(item, out);  // a trace point at 200
  const auto d2 = backup(false);                                    // starts it again
  const auto tf = trace_tail(full), t1 = trace_tail(d1), t2 = trace_tail(d2);
  ASSERT_GT(t1.kept, 0u);
  ASSERT_GT(t1.count, 0u);
  ASSERT_EQ(t2.kept, 0u);
  ASSERT_GE(t2.count, 2u);
  SgdLearnerOperator b(p, {});
  ByteReader rf(full);
  b.restore_full(rf);
  const auto refused = [&](std::vector<std::uint8_t> corrupt, const std::string& what) {
    const auto before = full_snapshot(b);
    ByteReader r(corrupt);
    try {
      b.apply_delta(r);
      ADD_FAILURE() << "accepted a trace entry " << what;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_EQ(full_snapshot(b), before) << what;
  };
  auto held = d1;  // its first new entry is the full snapshot's first
  std::memcpy(held.data() + t1.first, full.data() + tf.first, 4);
  refused(held, "already held");
  ByteReader r1(d1);
  b.apply_delta(r1);
  auto repeated = d2;  // its last entry is its first again
  std::memcpy(repeated.data() + t2.first + 4 * (t2.count - 1), repeated.data() + t2.first, 4);
  refused(repeated, "repeated");
  ByteReader r2(d2);
  b.apply_delta(r2);
  EXPECT_EQ(full_snapshot(b), full_snapshot(a));
}

}  // namespace
}  // namespace afs::ml
