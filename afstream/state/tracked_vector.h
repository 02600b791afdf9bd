// TrackedVector: a dense vector of doubles (online-learning weights) whose L2 distance from its last backup is
// maintained incrementally and whose changes since that backup can be written as a delta.
//
// DESIGN.md section 3 (Theta): the runtime compares divergence() with theta after each update and, when exceeded,
// backs up write_delta() (or write_full()) and calls mark_backed_up(). For SGD the divergence is the L2 distance
// between the current and the backed-up model, the quantity the convergence bound of the paper is stated in.
#pragma once

#include <Eigen/Core>
#include <cassert>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/prefetch.h"
#include "afstream/state/divergence.h"

namespace afs {

// A vector of weights (read as an Eigen vector view, values()) with incremental L2 divergence tracking (DESIGN 3).
//
// While tracking, each weight is stored next to its backed-up value (w_0, b_0, w_1, b_1, ...: values() is a view
// with stride 2), with a bit per entry saying whether it changed since the last backup and the list of the changed
// entries. An update thus reads the backed-up value from the cache line it writes the weight to: no memory access
// beyond the weight's own (the KDD-like learner's 2^18 weights are updated at 11 scattered places per example; a
// separate copy cost a cache miss at each, a table of positions into a list of backed-up values two dependent ones).
// Two regimes, switched automatically:
//  - sparse (after each backup): add()/set() O(1); a first change adds the entry to the list; the delta holds only
//    the changed entries;
//  - dense: entered when an add_dense() would leave more than half of the entries changed. add_dense() is an O(n)
//    update that recomputes the divergence exactly, every entry counts as changed and the delta is a full copy
//    (flagged). mark_backed_up() returns to the sparse regime.
// A sparse-regime delta with more than half the entries changed is also written as a flagged full copy.
// Untracked (stop_tracking(), for a run that never backs up: mode none): the weights alone, stride 1; updates only
// write the value; every delta is a full copy.
// L2 is accurate to floating-point rounding (a running sum for sparse updates, recomputed from the changed entries if
// cancellation makes it negative -- see RunningSum in divergence.h; recomputed from scratch by every dense add). Sizes
// are limited to 2^32 - 2 entries.
class TrackedVector {
 public:
  // values(): the weights, read through a view that follows the stored layout (stride 2 while tracking, else 1).
  using ConstView = Eigen::Map<const Eigen::VectorXd, 0, Eigen::InnerStride<>>;

  // n weights, all 0, counting as backed up. Throws ConfigError for a metric other than L2 or an oversized n.
  // A vector from either constructor, assigned over one in use, makes its weights the backup base (divergence and
  // deltas then no longer refer to what the store holds): reset in place with set(i, 0) instead.
  explicit TrackedVector(std::size_t n, Metric m = Metric::L2);
  // Starts from the given weights, which count as backed up.
  explicit TrackedVector(const Eigen::VectorXd& initial, Metric m = Metric::L2);

  // w_i += delta. O(1).
  void add(std::size_t i, double delta) {
    assert(i < size());
    update(i, get(i) + delta);
  }
  // w_i = v. O(1).
  void set(std::size_t i, double v) {
    assert(i < size());
    update(i, v);
  }
  // w_index[k] += delta[k] for k in order (an index may repeat; every index < size()): what add() entry by entry
  // gives, the divergence to rounding (a learner's sparse step): the divergence's running sum takes the entries'
  // changes once, summed in two independent chains instead of one. O(entries).
  void add_all(std::span<const std::uint32_t> index, std::span<const double> delta) {
    assert(index.size() == delta.size());
    if (untracked_ || dense_) {
      for (std::size_t k = 0; k < index.size(); ++k) add(index[k], delta[k]);
      return;
    }
    double change0 = 0, change1 = 0;  // two chains of additions, in registers
    std::size_t k = 0;
    for (; k + 1 < index.size(); k += 2) {
      change0 += add_tracked(index[k], delta[k]);
      change1 += add_tracked(index[k + 1], delta[k + 1]);
    }
    if (k < index.size()) change0 += add_tracked(index[k], delta[k]);
    div_.add_sum(change0 + change1);
    if (div_.drifted()) [[unlikely]]
      recompute();
  }
  // Asks the CPU to bring the given entries (each < size()), with their backed-up values, into the cache ahead of
  // reading or updating them (afs::prefetch). Changes nothing.
  void prefetch(std::span<const std::uint32_t> index) const {
    for (const std::uint32_t i : index) afs::prefetch(data_.data() + (std::size_t{i} << shift_));
  }
  // The same for entry i alone (a caller about to read backed_up() at scattered entries).
  void prefetch(std::size_t i) const {
    assert(i < size());
    afs::prefetch(data_.data() + (i << shift_));
  }
  // w += d (d.size() == size(), else std::invalid_argument). O(n).
  void add_dense(const Eigen::VectorXd& d);
  double get(std::size_t i) const {
    assert(i < size());
    return data_[i << shift_];
  }
  double operator[](std::size_t i) const { return get(i); }
  ConstView values() const { return ConstView(data_.data(), static_cast<Eigen::Index>(n_), stride()); }
  // w_i as the last backup holds it (the current value when it has not changed since). O(1).
  // Only while tracking().
  double backed_up(std::size_t i) const {
    assert(i < size() && tracking());
    return data_[2 * i + 1];
  }
  std::size_t size() const { return n_; }
  Metric metric() const { return Metric::L2; }

  // L2 distance from the state at the last backup. O(1). Infinite once untracked (not known).
  double divergence() const { return untracked_ ? std::numeric_limits<double>::infinity() : div_.value(); }
  // Entries changed since the last backup (all of them in the dense regime, or untracked).
  std::size_t dirty_count() const { return dense_ || untracked_ ? size() : changed_.size(); }

  // For good: no more divergence or change tracking (its memory is released). Updates then only write the value, as
  // a plain vector would; divergence() is infinite, every delta a full copy, and mark_backed_up() changes nothing.
  // For an operator whose runtime never backs it up (Operator::stop_tracking, mode none): DESIGN 3 wants that mode
  // to pay nothing for backups, and the tracking of a KDD-like learner's 2^18 scattered weights made its examples
  // about 20% slower.
  void stop_tracking();
  bool tracking() const { return !untracked_; }
  // The current state is now the backed-up state: divergence() becomes 0 and the delta empty. O(dirty), or O(1)
  // when leaving the dense regime.
  void mark_backed_up();

  // Whole vector: header (tag, version, n) then the n values.
  void write_full(ByteWriter& w) const;
  // Changes since the last backup: header (tag, version, n), a u8 flag (0 = sparse: indices u32 + values;
  // 1 = full copy of all n values; 2 = bitmap: ceil(n / 64) u64 words with a bit per changed entry, then their
  // values in index order, written when the indices would take more room than the bits: a KDD-like learner's 36,000
  // changed weights in 2^18 take 32 KB of bits instead of 144 KB of indices). Applied to the backed-up state it
  // reproduces the current state exactly.
  void write_delta(ByteWriter& w) const;
  // A delta that changes no entry (read and applied like any other): for a partial backup that leaves every change
  // unwritten (SgdLearnerOperator::backup_partial_delta). Nothing counts as backed up.
  void write_empty_delta(ByteWriter& w) const;
  // write_delta(w), then mark_backed_up(), in one pass: each changed entry is read once, written and made its own
  // backed-up value (a second scattered pass over a KDD-like learner's ~45,000 changed weights cost its thread about
  // 1.5 points, experiments/results/learner-backup-delta). The same bytes as write_delta.
  void backup_delta(ByteWriter& w);
  // Replace the weights by a write_full payload of the same size; all-or-nothing (unchanged on FormatError).
  // Afterwards the vector counts as backed up.
  void read_full(ByteReader& r);
  // Apply a write_delta payload; all-or-nothing. Afterwards the vector counts as backed up.
  void apply_delta(ByteReader& r);
  // The same in two steps, for an operator that restores several containers all or nothing without copying this
  // one (a copy per delta made a restore O(chain x size)): read_delta reads and checks a write_delta payload
  // (FormatError on bad input, the vector unchanged), and apply_delta(Delta&&) applies it (it cannot fail) in
  // O(changed entries), or O(n) for a full-copy delta.
  struct Delta {
    bool full_copy = false;
    // In place in the payload read_delta read (apply the delta while that buffer lives): a full copy's n values, or
    // the changed entries' values and where they go: their indices (all < size()), or a bitmap delta's bits (one
    // per entry, as many set as there are values, in index order).
    ArrayView<std::uint32_t> indices;
    ArrayView<std::uint64_t> bits;
    ArrayView<double> entries;
  };
  Delta read_delta(ByteReader& r) const;
  Delta read_full_values(ByteReader& r) const;  // a write_full payload, read and checked as a full-copy Delta
  void apply_delta(Delta&& d);

  // Brute-force L2 distance to another vector of the same size (else std::invalid_argument). O(n).
  double distance(const TrackedVector& other) const;

 private:
  using View = Eigen::Map<Eigen::VectorXd, 0, Eigen::InnerStride<>>;
  Eigen::InnerStride<> stride() const { return Eigen::InnerStride<>(Eigen::Index{1} << shift_); }
  View weights() { return View(data_.data(), static_cast<Eigen::Index>(n_), stride()); }
  // While tracking: the backed-up values.
  ConstView backup() const {
    return ConstView(data_.data() + 1, static_cast<Eigen::Index>(n_), Eigen::InnerStride<>(2));
  }
  View backup() { return View(data_.data() + 1, static_cast<Eigen::Index>(n_), Eigen::InnerStride<>(2)); }

  void update(std::size_t i, double now) {
    double* const slot = data_.data() + (i << shift_);
    const double old = slot[0];
    slot[0] = now;
    if (untracked_) return;
    if (!dense_) note_changed(static_cast<std::uint32_t>(i));
    div_.change(slot[1], old, now);
    if (div_.drifted()) [[unlikely]]
      recompute();
  }
  // add_all's update in the sparse regime: w_i += d; returns the change of the squared distance (inlined: a call per
  // entry cost a KDD-like learner's approx 4% of its time).
  [[gnu::always_inline]] double add_tracked(std::uint32_t i, double d) {
    assert(i < size());
    double* const pair = data_.data() + 2 * std::size_t{i};  // the weight, then its backed-up value
    const double old = pair[0];
    const double now = old + d;
    pair[0] = now;
    const double base = pair[1];
    note_changed(i);
    return (now - base) * (now - base) - (old - base) * (old - base);
  }
  // Sparse regime: entry i joins the list of changed entries at its first change since the last backup.
  void note_changed(std::uint32_t i) {
    std::uint64_t& word = changed_bits_[i >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if ((word & bit) == 0) {
      word |= bit;
      changed_.push_back(i);
    }
  }
  // The sparse regime's bookkeeping empty: no entry changed. O(changed), or O(n / 64) when many changed.
  void clear_changed();
  void put_weights(ByteWriter& w) const;
  // A delta is a flagged full copy: dense regime, untracked, or more than half the entries changed.
  bool full_copy_delta() const { return dense_ || untracked_ || 2 * changed_.size() > size(); }
  void recompute();
  void enter_dense();

  std::size_t n_ = 0;
  // The weights, each followed by its backed-up value while tracking (shift_ 1); the weights alone once untracked
  // (shift_ 0).
  std::vector<double> data_;
  unsigned shift_ = 1;
  // Sparse regime: a bit per entry changed since the last backup, and those entries in the order of their first change.
  std::vector<std::uint64_t> changed_bits_;
  std::vector<std::uint32_t> changed_;
  detail::DivergenceTracker<double> div_;
  bool dense_ = false;
  bool untracked_ = false;
};

}  // namespace afs
