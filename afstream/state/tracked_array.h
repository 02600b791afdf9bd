// TrackedArray<T>: a fixed array of counters (sketch rows, histograms) whose divergence from its last backup is
// maintained in O(1) per update and whose changes since that backup can be written as a delta.
//
// DESIGN.md section 3 (Theta): the runtime compares divergence() with theta after each update and, when exceeded,
// backs up write_delta() (or write_full()) and calls mark_backed_up(). Restore is read_full() of the last full
// backup followed by apply_delta() of each later delta, in order.
#pragma once

#include <cassert>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/state/container_format.h"
#include "afstream/state/divergence.h"

namespace afs {

// A fixed-size array of T (std::int64_t or double) with incremental divergence tracking (DESIGN.md section 3).
//
// Metric (fixed at construction): MaxAbs, L1 or L2 over v_i - b_i, where b is the array at the last backup.
//  - L1 = sum_i |v_i - b_i| and L2 = sqrt(sum_i (v_i - b_i)^2) are maintained exactly for int64 (64-bit magnitudes,
//    128-bit sums; any int64 values) and accurate to rounding for double
//    (a running sum, recomputed from the dirty slots if cancellation makes it negative; error bound in
//    divergence.h, RunningSum).
//  - MaxAbs is a high-water mark: the largest |v_i - b_i| any counter reached since the last backup. It equals the
//    current max_i |v_i - b_i| when counters only move one way between backups (Count-Min: increments only) and is an
//    upper bound otherwise, so a Theta test on it never under-reports.
// Cost: add/set are O(1) and branch-free (2.5-4 ns in state_benchmark, the same before and after a backup: a slot's
// first change since the backup costs nothing extra); mark_backed_up and write_delta are O(dirty slots). Memory:
// 2n*sizeof(T) (the values, and the backed-up value of each slot written since the backup, captured at its first
// change) plus one bit per slot. Sizes are limited to 2^32 - 2 slots. Untracked (stop_tracking(), for a run that never
// backs up: mode none), an update only writes the value and every delta holds every slot.
template <typename T>
class TrackedArray {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>,
                "TrackedArray holds std::int64_t or double counters");

 public:
  using value_type = T;

  // n counters, all 0 and counting as backed up. Throws ConfigError if m is NewKeys (keyed containers only) or n
  // exceeds the size limit. Assigned over an array in use, it makes the zeros its backup base (divergence and deltas
  // then no longer refer to what the store holds): reset in place with set(i, 0) instead.
  TrackedArray(std::size_t n, Metric m);

  // v_i += delta. O(1).
  void add(std::size_t i, T delta) {
    assert(i < values_.size());
    update(i, values_[i] + delta);
  }
  // v_i = v. O(1).
  void set(std::size_t i, T v) {
    assert(i < values_.size());
    update(i, v);
  }
  T get(std::size_t i) const {
    assert(i < values_.size());
    return values_[i];
  }
  T operator[](std::size_t i) const { return get(i); }
  std::size_t size() const { return values_.size(); }
  Metric metric() const { return div_.metric(); }
  std::span<const T> values() const { return values_; }

  // Distance from the state at the last backup, in metric(). O(1). Infinite once untracked (not known).
  double divergence() const { return untracked_ ? std::numeric_limits<double>::infinity() : div_.value(); }
  // Number of slots changed (written) since the last backup: the entries of the next delta (every slot, untracked).
  // O(words with a dirty slot): counted when asked, so that an update writes no counter of its own.
  std::size_t dirty_count() const;

  // For good: no more divergence or change tracking (its memory is released). Updates then only write the value;
  // divergence() is infinite, every delta (partial ones too) holds every slot, and mark_backed_up() changes nothing.
  // For an operator whose runtime never backs it up (Operator::stop_tracking, mode none: DESIGN 3 wants that mode to
  // pay nothing for backups).
  void stop_tracking();
  bool tracking() const { return !untracked_; }
  // The current state is now the backed-up state: divergence() becomes 0 and the delta empty. O(dirty).
  void mark_backed_up();

  // A partial delta (metric MaxAbs only; DESIGN 3 with proofs/general-bounds.md §3.6): writes, in write_delta's
  // format, only the slots that moved more than the residual watched since the previous partial delta, and marks
  // them backed up. Every other slot is then within that watched residual of its backed-up value, and within
  // divergence() (the high-water mark, which bounded the distance to the store before this delta and only shrinks
  // with it). Returns the smaller of the two, the divergence left (0 when it wrote everything): at most `residual`,
  // and at least max_i |v_i - b_i| over every slot against the state the store now holds; divergence() restarts from
  // it instead of 0. It equals that maximum when counters only move one way and no slot crossed the watched residual
  // since the last whole backup (Count-Min with a residual above the counts' growth); once one did, it is the watched
  // residual until the next whole backup. It writes everything (write_delta then mark_backed_up) when the metric is
  // not MaxAbs, residual <= 0, or residual is smaller than the one this array has been watching for since its
  // previous partial delta (or nothing was watched yet: the first call after a whole backup). Which slots moved that
  // far is known without scanning: an update that takes a slot across the watched residual records it (one compare
  // per update, O(1)), so the cost is O(slots written) and updates cost nothing extra. Slots left unwritten stay in
  // the dirty set, so a later write_delta still carries them.
  double backup_partial_delta(ByteWriter& w, double residual);

  // Whole array: header (tag, version, n) then the n values.
  void write_full(ByteWriter& w) const;
  // Changes since the last backup: header (tag, version, n) then the dirty indices (u32) and their current values.
  // Applied to the backed-up state it reproduces the current state exactly.
  void write_delta(ByteWriter& w) const;
  // Replace the values by a write_full payload of the same size. Validates everything before changing anything:
  // on FormatError the array is unchanged. Afterwards the array counts as backed up. Reads exactly this container's
  // payload from r (a payload may hold several containers; the caller checks for trailing bytes).
  void read_full(ByteReader& r);
  // Apply a write_delta payload (same all-or-nothing contract as read_full); afterwards the array counts as backed up.
  void apply_delta(ByteReader& r);
  // The same in two steps, for an operator that restores several containers all or nothing without copying this
  // one: read_delta reads and checks a write_delta payload (FormatError on bad input, the array unchanged), and
  // apply_delta(const Delta&) applies it (it cannot fail) in O(changed slots).
  using Delta = detail::ArrayDelta<T>;  // indices (all < size()) and their values
  Delta read_delta(ByteReader& r) const;
  void apply_delta(const Delta& d);
  // Likewise for read_full: read_full_values reads and checks a write_full payload (the array unchanged), and
  // apply_full takes the values (size() of them; it cannot fail).
  std::vector<T> read_full_values(ByteReader& r) const;
  void apply_full(std::vector<T>&& values);

  // Brute-force distance to another array of the same size in metric() (MaxAbs: max |a_i - b_i|, L1: sum, L2: sqrt
  // of the sum of squares). O(n). Throws std::invalid_argument if the sizes differ.
  double distance(const TrackedArray& other) const;

 private:
  void update(std::size_t i, T now) {
    const T old = values_[i];
    values_[i] = now;
    if (untracked_) return;
    // The backed-up value is captured at a slot's first change after a backup (branch-free: the slot's old value
    // when its dirty bit is clear), so mark_backed_up only clears the bits.
    std::uint64_t& word = dirty_[i >> 6];
    if (word == 0) dirty_words_.push_back(static_cast<std::uint32_t>(i >> 6));
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    const T base = (word & bit) ? base_[i] : old;
    base_[i] = base;
    word |= bit;
    div_.change(base, old, now);
    // Partial deltas: remember the slot when it moves past the watched residual (at most once per crossing).
    if (detail::abs_diff(now, base) > watch_ && detail::abs_diff(old, base) <= watch_) [[unlikely]]
      moved_.push_back(static_cast<std::uint32_t>(i));
    if (div_.drifted()) [[unlikely]]
      recompute();
  }
  void recompute();
  template <typename F>
  void for_each_dirty(F&& f) const;  // f(index) for every slot changed since the last backup
  template <typename F>
  void write_delta_entries(ByteWriter& w, std::size_t k, F&& for_each_index) const;  // the k slots it yields

  std::vector<T> values_;
  std::vector<T> base_;                     // the values at the last backup
  std::vector<std::uint64_t> dirty_;        // bit i: slot i written since the last backup (base_[i] is meaningful)
  std::vector<std::uint32_t> dirty_words_;  // the non-zero words of dirty_ (first-change order)
  using Mag = typename detail::DivergenceTraits<T>::Mag;
  // Partial deltas: the residual watched since the last partial delta (none: the largest magnitude, never crossed),
  // and the slots that moved past it since then (may repeat a slot that crossed back and forth).
  Mag watch_ = std::numeric_limits<Mag>::max();
  static Mag watched(double residual);
  std::vector<std::uint32_t> moved_;
  detail::DivergenceTracker<T> div_;
  bool untracked_ = false;
};

extern template class TrackedArray<std::int64_t>;
extern template class TrackedArray<double>;

}  // namespace afs
