// BlockTrackedArray<T>: a fixed array of counters whose max-abs divergence from its last backup is bounded, not
// measured per slot, so that an update costs little more than the counter's own write (Count-Min rows).
//
// DESIGN.md section 3 (Theta): the runtime compares divergence() with theta and, when exceeded, backs up a delta and
// marks the array backed up. TrackedArray measures max_i |v_i - b_i| exactly for one-way counters, at the cost of a
// second memory access per update (the slot's backed-up value) and its bookkeeping; on Count-Min that was most of
// approx's cost over mode none (experiments/results/none-untracked). This container keeps the backed-up copy b but
// touches it only at backups (and int64 blocks of one slot keep none). Per update it adds |change| to its block's bound
// (one bound per block of slots).
#pragma once

#include <algorithm>
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

// A fixed-size array of T (std::int64_t or double) in blocks of `block` consecutive slots (a power of two; the last
// block may be shorter), with metric max-abs.
//  - Bound: each block keeps the sum of |changes| made to its slots since they last matched the backed-up state. By
//    the triangle inequality every slot of the block is within that sum of its backed-up value, so
//    divergence() = max over blocks of the sum >= max_i |v_i - b_i|: a Theta test on it never under-reports
//    (proofs/general-bounds.md wants an upper bound; for double, to the rounding of the values' own sums). With block 1
//    and counters that only move one way between backups it equals max_i |v_i - b_i|, as TrackedArray's does. With
//    bigger blocks it exceeds the true maximum by at most what the block's other slots moved (Count-Min 4 x 8,000,
//    Zipf 0.9 keys, blocks of 8: a backup every 1,800 items instead of 1,942; experiments/results/count-min-blocks).
//  - One update moves one block's bound by |change|, so divergence() rises by at most that: a caller whose item
//    updates several slots keeps them in different blocks to keep divergence_bounded_by_alpha (Count-Min: a block
//    that divides the width, so rows never share a block).
//  - Payloads are TrackedArray<T>'s (same tag and layout): either container reads the other's backups.
// Cost: add/set are O(1), with rarely taken branches (a new highest bound, a block passing the residual); the
// backed-up copy is not read. mark_backed_up and write_delta compare the slots of the blocks that moved with the
// backed-up copy and write only the ones that differ: O(those slots) while no partial delta watches a residual (before
// the first, and after one given residual 0), else also a pass over the n / block bounds. backup_partial_delta looks
// only at the blocks that passed the residual. Layout: the values as in mode none (one array, so that reading them
// costs what it costs untracked), the bounds in an array of their own (32 bits each for int64: Count-Min's 128 KB
// beside 256 KB of counters), the backed-up copy in a third; see experiments/results/count-min-bounds for what this
// layout saved against 64-bit bounds interleaved with the values. Memory: 2n*sizeof(T) + (n / block) * 4 bytes for
// int64 (8 for double). Sizes are limited to 2^32 - 2 slots. Untracked (stop_tracking(), mode none): the values
// alone, an update only writes the value and every delta holds every slot. Measured at backups (measure_at_backups(),
// for a caller that reads the divergence only when it backs up): the values and a full backed-up copy, no bounds; an
// update only writes the value, and the divergence and deltas come from a pass over both (exact).
// int64 blocks of one slot (Count-Min's default) keep no backed-up copy: a slot's bound is then
// its own distance from the backed-up value, exactly for one-way counters (else an upper bound), and the backups
// decide what to write from it instead of reading a cold copy, which cost Count-Min's operator a tenth of approx's
// time (hh_benchmark BM_CountMinHhApproxOverNone 1.75-1.78 -> 1.65-1.69 in
// experiments/results/count-min-no-copy/bench.txt; the same bytes a backup). A slot whose changes cancelled out
// (bound > 0, value as backed up) is written again; a slot that moved both ways keeps its bound, not its distance,
// after a partial delta that leaves it. They also keep each bound in the top 24 bits of its value's word (the packed
// layout: one add updates both, in the cache line the value is in; memory n*8 bytes and the list) while the values
// stay within 2^39 of 0 and the bounds below 2^24, else in the separate array (for good): the same divergence,
// backups and payloads either way (experiments/results/count-min-packed: BM_CountMinHhApproxOverNone's approx
// 25.6-35.9 -> 23.2-31.2 ns an item, with add_each returning the estimate).
template <typename T>
class BlockTrackedArray {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>,
                "BlockTrackedArray holds std::int64_t or double counters");
  using Mag = typename detail::DivergenceTraits<T>::Mag;
  // A stored bound: 32 bits for int64 counters (an update touches half the memory a 64-bit bound did), saturating at
  // kSaturated, which stands for "at least that" (its slot's distance counts as infinite until its next backup).
  using Bound = std::conditional_t<std::is_same_v<T, double>, double, std::uint32_t>;
  static constexpr Mag kSaturated =
      std::is_same_v<T, double> ? std::numeric_limits<Mag>::infinity() : Mag{std::numeric_limits<std::uint32_t>::max()};

 public:
  using value_type = T;
  using Delta = detail::ArrayDelta<T>;

  // n slots, all 0 and counting as backed up, in blocks of `block`. Throws ConfigError if block is not a power of
  // two or n exceeds the size limit. Assigned over an array in use, it makes the zeros its backup base (divergence
  // and deltas then no longer refer to what the store holds): reset in place with set(i, 0) instead.
  BlockTrackedArray(std::size_t n, std::size_t block);

  // v_i += delta. O(1).
  void add(std::size_t i, T delta) {
    assert(i < n_);
    if (packed_) {
      const auto slot = static_cast<std::uint32_t>(i);
      add_each(std::span<const std::uint32_t>(&slot, 1), delta);
      return;
    }
    data_[i] += delta;
    if (!plain_) grow(i >> shift_, magnitude(delta));
  }
  // v_i = v. O(1).
  void set(std::size_t i, T v);
  // v_i += delta for each i in slots, in order (a slot may repeat): what add() slot by slot gives, at less cost per
  // slot (Count-Min's depth counters of one item): the bookkeeping stays in registers for the whole call instead of
  // going through memory between slots. Returns the smallest value it wrote: for slots that do not repeat, the
  // smallest of their new values (Count-Min's estimate of the item's key, read as the counters are written; the
  // largest T when slots is empty). O(slots).
  T add_each(std::span<const std::uint32_t> slots, T delta) {
    T* const v = data_.data();
    T least = std::numeric_limits<T>::max();
    if (plain_) {
      for (const std::uint32_t i : slots) least = std::min(least, v[i] += delta);
      return least;
    }
    if constexpr (std::is_same_v<T, std::int64_t>) {
      if (packed_) return add_each_packed(slots, delta);
    }
    Bound* const bounds = bounds_.data();
    std::uint32_t* const crossed = crossed_.data();
    const Mag m = magnitude(delta), watch = watch_;
    const unsigned shift = shift_;
    Mag high = high_;
    std::size_t n = ncrossed_;
    auto each = [&]<bool often>() {
      for (const std::uint32_t i : slots) {
        assert(i < n_);
        least = std::min(least, v[i] += delta);
        bump<often>(bounds, crossed, n, high, watch, i >> shift, m);
      }
    };
    if (watch == 0) {  // every block's first change is listed: often, so without a branch
      each.template operator()<true>();
    } else {
      each.template operator()<false>();
    }
    high_ = high;
    ncrossed_ = n;
    return least;
  }
  // v_i += delta for every slot (a recovery's compensation). O(n).
  void add_to_all(T delta);

  T get(std::size_t i) const {
    assert(i < n_);
    return value(i);
  }
  T operator[](std::size_t i) const { return get(i); }
  std::size_t size() const { return n_; }
  std::size_t block() const { return std::size_t{1} << shift_; }
  Metric metric() const { return Metric::MaxAbs; }
  // A copy of the n values, in order. O(n).
  std::vector<T> values() const;

  // An upper bound of max_i |v_i - b_i| (see the class comment); after a partial delta, at least the value it
  // returned until the next whole backup. O(1). Infinite once untracked (not known). Measured at backups: exactly
  // max_i |v_i - b_i|, in O(n) (so after a partial delta it may fall below what that returned, as changes undo).
  double divergence() const {
    if (plain_) return untracked_ ? std::numeric_limits<double>::infinity() : measured_divergence();
    return static_cast<double>(high_);
  }
  // The slots the next write_delta writes: those that differ from the backed-up copy. O(n / block + moved blocks);
  // O(n) measured at backups.
  std::size_t dirty_count() const;

  // For good: no more divergence or change tracking (its memory is released). Updates then only write the value;
  // divergence() is infinite, every delta (partial ones too) holds every slot, and mark_backed_up() changes nothing.
  void stop_tracking();
  bool tracking() const { return !untracked_; }
  // For good, before the first change (as stop_tracking): the caller reads divergence() only at its backups and
  // recoveries, not after every update (Operator::measure_divergence_at_backups: the runtime's cost rule paces the
  // backups). Updates then only write the value, as untracked; the backed-up copy is kept in full, and divergence(),
  // dirty_count(), write_delta and backup_partial_delta compare every slot with it: O(n) each, and exact (the
  // divergence is max_i |v_i - b_i|, a partial delta writes exactly the slots farther than the residual). Same
  // payloads. Memory: 2n * sizeof(T).
  void measure_at_backups();
  bool measured_at_backups() const { return plain_ && !untracked_; }
  // The current state is now the backed-up state: divergence() becomes 0.
  void mark_backed_up();
  // A partial delta (Operator::backup_partial_delta, proofs/general-bounds.md §3.6): in write_delta's format, slots
  // of the blocks whose bound passed `residual` (rounded down for int64): every changed slot of a block beyond 1.5
  // times it, the slots more than half of it from their backed-up value in the others. It marks them backed up, and
  // a looked-at block's bound becomes the largest distance of its slots left. Every slot is then within residual of the
  // state the store holds. Returns min(divergence(), residual), which divergence() restarts from: at least max_i |v_i -
  // b_i| against that state. residual <= 0 (or not a number) writes a whole delta and returns 0. O(slots of the blocks
  // that passed the residual) when it is at least the previous partial delta's (they were listed as they passed it),
  // else also a pass over the n / block bounds.
  double backup_partial_delta(ByteWriter& w, double residual);

  // Whole array: TrackedArray<T>::write_full's payload.
  void write_full(ByteWriter& w) const;
  // The slots that differ from the backed-up copy, in TrackedArray<T>::write_delta's payload. Applied to the
  // backed-up state it reproduces the current state exactly (values compared bit for bit within the blocks that
  // moved; a change of magnitude 0, 0.0 to -0.0, moves none).
  void write_delta(ByteWriter& w) const;
  // Replace the values by a write_full payload of the same size (all or nothing: on FormatError the array is
  // unchanged); afterwards the array counts as backed up. Reads exactly this container's payload from r.
  void read_full(ByteReader& r);
  // Apply a write_delta payload (same contract); afterwards the array counts as backed up.
  void apply_delta(ByteReader& r);
  // The same in two steps, for an operator that restores several containers all or nothing without copying this
  // one: read_* reads and checks a payload (FormatError, the array unchanged), apply_* takes it (it cannot fail).
  Delta read_delta(ByteReader& r) const;
  void apply_delta(const Delta& d);
  std::vector<T> read_full_values(ByteReader& r) const;
  void apply_full(std::vector<T>&& values);

  // Brute force max_i |v_i - o_i| against another array of the same size. O(n). Throws std::invalid_argument if the
  // sizes differ.
  double distance(const BlockTrackedArray& other) const;

 private:
  static Mag magnitude(T d) {
    if constexpr (std::is_same_v<T, double>) {
      return d < 0 ? -d : d;
    } else {
      return d < 0 ? Mag{0} - static_cast<Mag>(d) : static_cast<Mag>(d);
    }
  }
  // Block b's bound += m: the block is listed when its bound passes the watched residual (for partial deltas; at
  // most once, as bounds only grow until a partial delta looks at the block and clears the list; a rarely taken
  // branch, cheaper than an unconditional store to the list), and high is raised to it. An int64 bound that reaches
  // kSaturated stays there and makes high the largest Mag (divergence() then forces a backup; watch_ is always below
  // kSaturated, so the block is listed); a NaN change of a double makes the bound +infinity. On the members (grow) or
  // on add_each's copies of them, kept in registers. Listing with watch 0 (every block that moves, after a whole
  // backup) is no rare event when backups are far apart: it is most counters' first change, and the branch
  // mispredicted at each. `often` lists with an unconditional store instead (crossed_ has room for one more than
  // every block). Whole deltas come with ft.delta-residual 0, and once halved thresholds leave no room for a residual;
  // hh_benchmark BM_CountMinHhPacedDeltasOverNone/32768/0 (whole deltas every 32,768 items) 31.3 -> 28.0 ns an item,
  // /4096/0 40.9 -> 35.9 (none 13-14 ns; the Theta-paced partial deltas' BM_CountMinHhApproxOverNone/1 23.0 -> 22.7,
  // unchanged; medians of 5 alternating runs).
  template <bool often = false>
  static void bump(Bound* bounds, std::uint32_t* crossed, std::size_t& ncrossed, Mag& high, Mag watch, std::size_t b,
                   Mag m) {
    Bound& slot = bounds[b];
    const Mag bound = slot;
    Mag next = bound + m;  // int64: bound < 2^32 and m <= 2^63, no wrap
    if constexpr (std::is_same_v<T, std::int64_t>) {
      slot = static_cast<Bound>(std::min(next, kSaturated));
      if (next >= kSaturated) [[unlikely]]
        next = std::numeric_limits<Mag>::max();
    } else {
      if (!(next >= 0)) [[unlikely]]
        next = std::numeric_limits<Mag>::infinity();
      slot = next;
    }
    if constexpr (often) {
      crossed[ncrossed] = static_cast<std::uint32_t>(b);
      ncrossed += static_cast<std::size_t>((bound <= watch) & (next > watch));
    } else if ((bound <= watch) & (next > watch)) [[unlikely]] {
      crossed[ncrossed++] = static_cast<std::uint32_t>(b);
    }
    if (next > high) [[unlikely]]
      high = next;
  }
  // Block b's bound = x (0, or what a partial delta left: below the saturation).
  void set_bound(std::size_t b, Mag x) {
    if (packed_) {
      data_[b] = pack(unpack(data_[b]), x);
    } else {
      bounds_[b] = static_cast<Bound>(x);
    }
  }
  // Block b's bound as a Mag: a saturated one is the largest Mag (+infinity for double).
  Mag bound(std::size_t b) const {
    if (packed_) return packed_bound(data_[b]);  // never saturated: packed_bounds_room
    const Mag v = bounds_[b];
    if constexpr (std::is_same_v<T, std::int64_t>) return v >= kSaturated ? std::numeric_limits<Mag>::max() : v;
    return v;
  }
  T value(std::size_t i) const { return packed_ ? unpack(data_[i]) : data_[i]; }
  std::size_t blocks() const { return (n_ + (std::size_t{1} << shift_) - 1) >> shift_; }
  // The values as write_array_delta reads them (unpacked).
  struct ValuesView {
    const BlockTrackedArray* a;
    std::size_t size() const { return a->n_; }
    T operator[](std::size_t i) const { return a->value(i); }
  };
  ValuesView view() const { return {this}; }
  void grow(std::size_t b, Mag m) { bump(bounds_.data(), crossed_.data(), ncrossed_, high_, watch_, b, m); }

  // The packed layout (int64 blocks of one, while tracking; packed_): slot i's word holds its bound in the top
  // 64 - kValueBits bits and its value plus kBias in the low kValueBits, so that one add of delta + (|delta| <<
  // kValueBits) updates both, in the cache line the value is in anyway: an update costs a read-modify-write of the
  // word mode none writes, plus the list and the maximum in registers. Values stay within kReach of 0 (reach_
  // bounds every |v_i|; add_each_packed looks at it once per call, not per slot); a value that would leave that
  // range moves the array to the separate layout for good (unpack_layout), and so does a bound that would pass
  // kPackedBoundMax (high_ bounds them all): a theta of 2^24 or more. Same divergence, backups and payloads as the
  // separate layout: only where the bounds are kept differs.
  static constexpr unsigned kValueBits = 40;
  static constexpr std::uint64_t kValueMask = (std::uint64_t{1} << kValueBits) - 1;
  static constexpr std::int64_t kBias = std::int64_t{1} << (kValueBits - 1);
  static constexpr std::uint64_t kReach = (std::uint64_t{1} << (kValueBits - 1)) - 1;
  static constexpr std::uint64_t kPackedBoundMax = (std::uint64_t{1} << (64 - kValueBits)) - 1;
  static T unpack(T w) {
    return static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(w) & kValueMask) - kBias);
  }
  static Mag packed_bound(T w) { return static_cast<Mag>(static_cast<std::uint64_t>(w) >> kValueBits); }
  static T pack(T v, Mag bound) {
    return static_cast<T>((static_cast<std::uint64_t>(bound) << kValueBits) |
                          static_cast<std::uint64_t>(static_cast<std::int64_t>(v) + kBias));
  }
  // add_each in the packed layout. The fast path, when no value can leave the range and no bound pass
  // kPackedBoundMax in this call (every bound is at most high_): one add per slot. Otherwise add_each_slow.
  T add_each_packed(std::span<const std::uint32_t> slots, T delta) {
    const Mag m = magnitude(delta);
    const std::size_t count = slots.size();
    if (m <= kReach && count <= kPackedBoundMax) [[likely]] {
      const Mag add = m * count;  // < 2^63
      if (add <= kPackedBoundMax && high_ <= kPackedBoundMax - add && reach_ <= kReach - add) [[likely]] {
        reach_ += add;
        T* const v = data_.data();
        std::uint32_t* const crossed = crossed_.data();
        const std::uint64_t inc = static_cast<std::uint64_t>(delta) + (static_cast<std::uint64_t>(m) << kValueBits);
        const Mag watch = watch_;
        Mag high = high_;
        std::size_t n = ncrossed_;
        T least = std::numeric_limits<T>::max();
        auto each = [&]<bool often>() {
          for (const std::uint32_t i : slots) {
            assert(i < n_);
            const std::uint64_t w = static_cast<std::uint64_t>(v[i]);
            v[i] = static_cast<T>(w + inc);  // the value field stays in range: no carry into the bound
            least = std::min(least, unpack(v[i]));
            const Mag bound = w >> kValueBits, next = bound + m;
            if constexpr (often) {
              crossed[n] = i;
              n += static_cast<std::size_t>((bound <= watch) & (next > watch));
            } else if ((bound <= watch) & (next > watch)) [[unlikely]] {
              crossed[n++] = i;
            }
            if (next > high) [[unlikely]]
              high = next;
          }
        };
        // (The same dispatch as add_each's: a helper shared by both, taking the lambda, was not inlined and cost
        // half as much again an item: BM_CountMinHhApproxOverNone 1.9 -> 2.7.)
        if (watch == 0) {
          each.template operator()<true>();
        } else {
          each.template operator()<false>();
        }
        high_ = high;
        ncrossed_ = n;
        return least;
      }
    }
    return add_each_slow(slots, delta);
  }
  T add_each_slow(std::span<const std::uint32_t> slots, T delta);
  // Packed: slot i's bound += m (packed_bounds_room(m) said it fits); listed and the maximum raised as bump does.
  void grow_packed(std::size_t i, Mag m);
  // Packed: whether every bound stays at most kPackedBoundMax after rising by up to `add`.
  bool packed_bounds_room(Mag add) const { return add <= kPackedBoundMax && high_ <= kPackedBoundMax - add; }
  // Packed: whether every value stays in range after changes of up to `add` in magnitude (reach_ is recomputed when
  // its running sum says no; the separate layout is taken once the values reach half the range).
  bool packed_room(Mag add);
  // Packed -> the separate layout, for good (values out of the packed range).
  void unpack_layout();
  bool differs(std::size_t i) const;  // v_i is not b_i, bit for bit (blocks of several slots)
  // Blocks of one slot keep no backed-up copy: a slot's bound, the sum of its |changes| since its last backup, is at
  // least its distance from the backed-up value (equal for counters that move one way, as Count-Min's), and a backup
  // reads it from the cache line of the value instead of a cold copy.
  bool per_slot() const { return std::is_same_v<T, std::int64_t> && shift_ == 0; }
  // Slot i's distance from its backed-up value as a backup measures it: the slot's bound for blocks of one (>= the
  // distance), else |v_i - b_i|.
  Mag distance_of(std::size_t i) const {
    return per_slot() && !plain_ ? bound(i) : detail::abs_diff(value(i), base_[i]);
  }
  // Measured at backups: max_i |v_i - b_i| by a pass (a NaN distance counts as infinite).
  double measured_divergence() const;
  // Measured at backups: lists in crossed_ the slots farther than keep from the backed-up copy (whole: every slot
  // that differs from it, bit for bit), returns how many, and sets left to the largest distance of the others.
  std::size_t list_measured(Mag keep, bool whole, Mag& left);
  // Measured at backups: a delta of list_measured's slots, which become backed up.
  void write_measured(ByteWriter& w, Mag keep, bool whole, Mag& left);
  // f(block) for every block whose bound is not 0: from the list while it holds them all (watch_ 0), else a pass.
  template <typename F>
  void for_each_moved_block(F&& f) const;
  // f(index) for every slot of block b that differs from the backed-up copy, in index order.
  template <typename F>
  void for_each_changed(std::size_t b, F&& f) const;

  std::size_t n_;
  std::vector<T> data_;        // the values (packed_: with their bounds)
  std::vector<Bound> bounds_;  // block b's bound (the sum of |changes| since its slots last matched base_)
  std::vector<T> base_;        // the backed-up copy (only read and written at backups and restores)
  Mag high_ = 0;               // >= every bound: their maximum, or since a partial delta at least what it returned
  // Every block not in crossed_[0, ncrossed_) is within watch_: the residual of the last partial delta (0 before the
  // first, and after a partial delta given none: the list then holds every block changed). A whole backup zeroes the
  // bounds and keeps it.
  Mag watch_ = 0;
  std::vector<std::uint32_t> crossed_;
  std::size_t ncrossed_ = 0;
  unsigned shift_;  // log2(block)
  // plain_: updates write the values alone (no bounds, no list). Either untracked_ (no backups at all: base_ is
  // empty) or measured at backups (base_ holds every backed-up value; measure_at_backups).
  bool plain_ = false;
  bool untracked_ = false;
  bool packed_ = false;  // the packed layout (int64 blocks of one while tracking): bounds_ is empty
  Mag reach_ = 0;        // packed_: >= max_i |v_i|
};

extern template class BlockTrackedArray<std::int64_t>;
extern template class BlockTrackedArray<double>;

}  // namespace afs
