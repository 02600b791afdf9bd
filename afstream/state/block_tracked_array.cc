// BlockTrackedArray<T>: backups, restores and brute-force distance (DESIGN.md section 3).
#include "afstream/state/block_tracked_array.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "afstream/core/errors.h"

namespace afs {

namespace {
constexpr std::size_t kMaxSlots = 0xFFFFFFFEu;  // indices in deltas are u32
}  // namespace

template <typename T>
BlockTrackedArray<T>::BlockTrackedArray(std::size_t n, std::size_t block)
    : n_(n), shift_(static_cast<unsigned>(std::countr_zero(block))) {
  if (block == 0 || !std::has_single_bit(block)) {
    throw ConfigError("BlockTrackedArray block size " + std::to_string(block) + " is not a power of two");
  }
  if (n > kMaxSlots) {
    throw ConfigError("BlockTrackedArray size " + std::to_string(n) + " exceeds the limit of " +
                      std::to_string(kMaxSlots) + " slots");
  }
  packed_ = per_slot();
  data_.assign(n, packed_ ? pack(T{}, 0) : T{});
  if (!packed_) bounds_.assign(blocks(), Bound{});
  if (!per_slot()) base_.assign(n, T{});
  crossed_.assign(blocks() + 1, 0);  // each block at most once, and the slot an unlisting bump<true> writes
}

template <typename T>
std::vector<T> BlockTrackedArray<T>::values() const {
  std::vector<T> v(n_);
  for (std::size_t i = 0; i < n_; ++i) v[i] = value(i);
  return v;
}

template <typename T>
bool BlockTrackedArray<T>::differs(std::size_t i) const {
  if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<std::uint64_t>(value(i)) != std::bit_cast<std::uint64_t>(base_[i]);
  } else {
    return value(i) != base_[i];
  }
}

template <typename T>
template <typename F>
void BlockTrackedArray<T>::for_each_changed(std::size_t b, F&& f) const {
  if (per_slot()) {  // the slot's bound is its distance from the backed-up value (or more, for two-way changes)
    if (bound(b) != 0) f(static_cast<std::uint32_t>(b));
    return;
  }
  const std::size_t end = std::min(n_, (b + 1) << shift_);
  for (std::size_t i = b << shift_; i < end; ++i) {
    if (differs(i)) f(static_cast<std::uint32_t>(i));
  }
}

template <typename T>
template <typename F>
void BlockTrackedArray<T>::for_each_moved_block(F&& f) const {
  if (watch_ == 0) {  // the list holds every block changed since the last whole backup
    for (std::size_t k = 0; k < ncrossed_; ++k) f(crossed_[k]);
    return;
  }
  for (std::size_t b = 0; b < blocks(); ++b) {
    if (bound(b) != 0) f(static_cast<std::uint32_t>(b));
  }
}

template <typename T>
void BlockTrackedArray<T>::set(std::size_t i, T v) {
  assert(i < n_);
  // An int64 change may reach 2^64 - 1, which bump's sum would wrap: any change past kSaturated saturates the
  // bound all the same, so it counts as 2^63.
  Mag m = detail::abs_diff(v, value(i));
  if constexpr (std::is_same_v<T, std::int64_t>) {
    m = std::min(m, Mag{1} << 63);
    if (packed_) {
      if (const Mag reach = detail::abs_diff(v, T{}); reach <= kReach / 2 && packed_bounds_room(m)) {
        data_[i] = pack(v, packed_bound(data_[i]));
        reach_ = std::max(reach_, reach);
        grow_packed(i, m);
        return;
      }
      unpack_layout();
    }
  }
  data_[i] = v;
  if (!plain_) grow(i >> shift_, m);
}

template <typename T>
T BlockTrackedArray<T>::add_each_slow(std::span<const std::uint32_t> slots, T delta) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    const Mag m = magnitude(delta);
    // A value, and a bound, move by at most m per listing of its slot.
    if (m <= kReach && slots.size() <= kReach / std::max<Mag>(m, 1) && packed_bounds_room(m * slots.size()) &&
        packed_room(m * slots.size())) {
      reach_ += m * slots.size();
      T least = std::numeric_limits<T>::max();
      for (const std::uint32_t i : slots) {
        assert(i < n_);
        const T now = unpack(data_[i]) + delta;
        data_[i] = pack(now, packed_bound(data_[i]));
        grow_packed(i, m);
        least = std::min(least, now);
      }
      return least;
    }
    unpack_layout();
    return add_each(slots, delta);
  }
  return add_each(slots, delta);  // not reached: only int64 arrays are packed
}

template <typename T>
void BlockTrackedArray<T>::grow_packed(std::size_t i, Mag m) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    const Mag bound = packed_bound(data_[i]), next = bound + m;
    assert(next <= kPackedBoundMax);  // packed_bounds_room said so
    data_[i] = pack(unpack(data_[i]), next);
    if ((bound <= watch_) & (next > watch_)) crossed_[ncrossed_++] = static_cast<std::uint32_t>(i);
    high_ = std::max(high_, next);
  }
}

template <typename T>
bool BlockTrackedArray<T>::packed_room(Mag add) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (add <= kReach && reach_ <= kReach - add) return true;
    Mag most = 0;
    for (std::size_t i = 0; i < n_; ++i) most = std::max(most, detail::abs_diff(value(i), T{}));
    reach_ = most;
    // Far from the limit, or the separate layout: a recount at every call near it would cost O(n) each.
    return add <= kReach && most <= kReach / 2 && most <= kReach - add;
  }
  return false;
}

template <typename T>
void BlockTrackedArray<T>::unpack_layout() {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (!packed_) return;
    bounds_.assign(blocks(), Bound{});
    for (std::size_t i = 0; i < n_; ++i) {
      bounds_[i] = static_cast<Bound>(packed_bound(data_[i]));  // below 2^24
      data_[i] = unpack(data_[i]);
    }
    packed_ = false;
  }
}

template <typename T>
void BlockTrackedArray<T>::add_to_all(T delta) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (packed_) {
      if (const Mag m = magnitude(delta); m <= kReach && packed_bounds_room(m) && packed_room(m)) {
        reach_ += m;
        for (std::size_t i = 0; i < n_; ++i) {
          data_[i] = pack(unpack(data_[i]) + delta, packed_bound(data_[i]));
          grow_packed(i, m);
        }
        return;
      }
      unpack_layout();
    }
  }
  for (std::size_t i = 0; i < n_; ++i) data_[i] += delta;
  if (plain_) return;
  for (std::size_t b = 0; b < blocks(); ++b) grow(b, magnitude(delta));
}

template <typename T>
std::size_t BlockTrackedArray<T>::dirty_count() const {
  if (untracked_) return n_;
  std::size_t n = 0;
  if (plain_) {  // measured at backups
    for (std::size_t i = 0; i < n_; ++i) n += differs(i) ? 1 : 0;
    return n;
  }
  for_each_moved_block([&](std::uint32_t b) { for_each_changed(b, [&](std::uint32_t) { ++n; }); });
  return n;
}

template <typename T>
void BlockTrackedArray<T>::stop_tracking() {
  if (packed_) {
    for (std::size_t i = 0; i < n_; ++i) data_[i] = unpack(data_[i]);
    packed_ = false;
  }
  plain_ = untracked_ = true;  // the values alone from now on
  base_ = std::vector<T>();
  bounds_ = std::vector<Bound>();
  crossed_ = std::vector<std::uint32_t>();
  high_ = 0;
}

template <typename T>
void BlockTrackedArray<T>::measure_at_backups() {
  if (plain_) return;  // untracked already, or measured
  if (packed_) {
    for (std::size_t i = 0; i < n_; ++i) data_[i] = unpack(data_[i]);
    packed_ = false;
  }
  plain_ = true;
  base_ = data_;  // before the first change: the state as it stands counts as backed up
  bounds_ = std::vector<Bound>();
  crossed_.assign(n_ + 1, 0);  // a backup's list of the slots it writes (list_measured)
  high_ = 0;
  ncrossed_ = 0;
  watch_ = 0;
}

template <typename T>
std::size_t BlockTrackedArray<T>::list_measured(Mag keep, bool whole, Mag& left) {
  const T* const v = data_.data();
  const T* const b = base_.data();
  std::uint32_t* const out = crossed_.data();
  std::size_t k = 0;
  Mag most = 0;
  // Without a branch per slot (about a tenth of Count-Min's counters pass the job's residual between its backups):
  // every index is stored, and the count moves past it only for a listed slot.
  for (std::size_t i = 0; i < n_; ++i) {
    const Mag d = detail::abs_diff(v[i], b[i]);
    bool past;
    if constexpr (std::is_same_v<T, double>) {
      const bool same = std::bit_cast<std::uint64_t>(v[i]) == std::bit_cast<std::uint64_t>(b[i]);
      past = !same && (whole || !(d <= keep));  // a NaN distance is past any residual
      if (!same && !past) most = std::max(most, d);
    } else {
      past = d > keep;  // whole: keep is 0
      most = std::max(most, past ? Mag{0} : d);
    }
    out[k] = static_cast<std::uint32_t>(i);
    k += past ? 1 : 0;
  }
  left = most;
  return k;
}

template <typename T>
void BlockTrackedArray<T>::write_measured(ByteWriter& w, Mag keep, bool whole, Mag& left) {
  const std::size_t k = list_measured(keep, whole, left);
  const std::uint32_t* const listed = crossed_.data();
  detail::write_array_delta<T>(w, view(), k, [&](auto&& f) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::uint32_t i = listed[j];
      f(i);
      base_[i] = data_[i];
    }
  });
}

template <typename T>
double BlockTrackedArray<T>::measured_divergence() const {
  Mag most = 0;
  for (std::size_t i = 0; i < n_; ++i) {
    if constexpr (std::is_same_v<T, double>) {
      if (!differs(i)) continue;  // the same bits (a NaN written as it is, or infinities) are no distance
    }
    const Mag d = detail::abs_diff(data_[i], base_[i]);
    if constexpr (std::is_same_v<T, double>) {
      if (!(d <= most)) most = d == d ? d : std::numeric_limits<Mag>::infinity();
    } else {
      most = std::max(most, d);
    }
  }
  return static_cast<double>(most);
}

template <typename T>
void BlockTrackedArray<T>::mark_backed_up() {
  if (untracked_) return;
  if (plain_) {  // measured at backups
    std::copy(data_.begin(), data_.end(), base_.begin());
    return;
  }
  for_each_moved_block([&](std::uint32_t b) {
    if (!per_slot()) for_each_changed(b, [&](std::uint32_t i) { base_[i] = value(i); });
    set_bound(b, 0);
  });
  high_ = 0;
  ncrossed_ = 0;  // every bound is 0, within any watched residual: the next partial delta looks at what crosses it
}

template <typename T>
double BlockTrackedArray<T>::backup_partial_delta(ByteWriter& w, double residual) {
  if (plain_ && !untracked_ && !(residual > 0)) {  // measured at backups: a whole delta
    Mag left = 0;
    write_measured(w, 0, true, left);
    return 0;
  }
  if (untracked_ || !(residual > 0)) {
    write_delta(w);
    mark_backed_up();
    // Whole deltas from now on (until a residual again): the list then holds every block changed since, so that
    // the next one costs O(changed blocks), not a pass over all (thresholds halved by failures end up here).
    watch_ = 0;
    return 0;
  }
  // Rounded down for int64, and kept below kSaturated so that a saturating bound is always listed (a residual that
  // large only writes more than it had to).
  const Mag keep = std::is_same_v<T, double>                     ? static_cast<Mag>(residual)
                   : residual >= static_cast<double>(kSaturated) ? kSaturated - 1
                                                                 : static_cast<Mag>(residual);
  if (plain_) {  // measured at backups: the slots farther than the residual, found by a pass
    Mag left = 0;
    write_measured(w, keep, false, left);
    return static_cast<double>(left);
  }
  // The blocks to look at: those whose bound passed the residual watched since the previous partial delta (listed
  // as they crossed it); every other block is within that residual. A smaller residual than that one: every block
  // past it, found by a pass over the bounds.
  if (keep < watch_) {
    ncrossed_ = 0;
    for (std::size_t b = 0; b < blocks(); ++b) {
      if (bound(b) > keep) crossed_[ncrossed_++] = static_cast<std::uint32_t>(b);
    }
  }
  const std::span<const std::uint32_t> look(crossed_.data(), ncrossed_);
  // In a block looked at, the slots more than `settle` from their stored value are written and become stored; the
  // block's bound becomes the largest distance of the slots left, which their stored values now measure exactly.
  // A block's bound sums its slots' drifts, so the block of a fast-moving slot that kept neighbours near the
  // residual would reach theta again after half the room (twice the backups). So a block far past the residual (it
  // got there fast since the last partial delta: beyond 1.5 times it) is written whole, and in the others (they
  // crossed it lately) the slots past half of it: one whose bound only summed small drifts is re-measured, not
  // written. (Half rather than a quarter, in hh_benchmark's BM_CountMinHhProcess/50000/8: 4.6 against 7.5 KB a
  // backup, a backup every 1,797 against 1,830 items; blocks of one: 2.8 KB every 1,942.)
  auto settle = [&](std::uint32_t b) { return bound(b) > keep + keep / 2 ? Mag{0} : keep / 2; };
  std::size_t k = 0;
  for (const std::uint32_t b : look) {
    const Mag s = settle(b);
    for_each_changed(b, [&](std::uint32_t i) { k += distance_of(i) > s ? 1 : 0; });
  }
  // Every block is now within the residual (looked at: within half of it) and within the old maximum (for
  // double, a re-measured block may exceed its old bound by rounding: the maximum takes it in).
  Mag left = std::min(high_, keep);
  detail::write_array_delta<T>(w, view(), k, [&](auto&& f) {
    for (const std::uint32_t b : look) {
      const Mag s = settle(b);
      Mag rest = 0;
      for_each_changed(b, [&](std::uint32_t i) {
        const Mag d = distance_of(i);
        if (d > s) {
          f(i);
          if (!per_slot()) base_[i] = value(i);
        } else {
          rest = std::max(rest, d);
        }
      });
      set_bound(b, rest);  // rest <= keep / 2, below the saturation
      left = std::max(left, rest);
    }
  });
  high_ = left;
  watch_ = keep;
  ncrossed_ = 0;
  return static_cast<double>(left);
}

template <typename T>
void BlockTrackedArray<T>::write_full(ByteWriter& w) const {
  if (packed_) {  // write_array_full's payload, the values unpacked
    detail::write_container_header(w, detail::array_tag<T>() | detail::kTagFull, n_);
    detail::put_array_gathered<T>(w, view());
    return;
  }
  detail::write_array_full<T>(w, std::span<const T>(data_));
}

template <typename T>
void BlockTrackedArray<T>::write_delta(ByteWriter& w) const {
  if (plain_) {  // untracked: every slot; measured at backups: those that differ, found by a pass
    detail::write_array_delta<T>(w, view(), dirty_count(), [&](auto&& f) {
      for (std::uint32_t i = 0; i < n_; ++i) {
        if (untracked_ || differs(i)) f(i);
      }
    });
    return;
  }
  detail::write_array_delta<T>(w, view(), dirty_count(), [&](auto&& f) {
    for_each_moved_block([&](std::uint32_t b) { for_each_changed(b, f); });
  });
}

template <typename T>
void BlockTrackedArray<T>::read_full(ByteReader& r) {
  apply_full(read_full_values(r));
}

template <typename T>
std::vector<T> BlockTrackedArray<T>::read_full_values(ByteReader& r) const {
  return detail::read_array_full<T>(r, n_);
}

template <typename T>
void BlockTrackedArray<T>::apply_full(std::vector<T>&& values) {
  assert(values.size() == n_);
  if (plain_) {
    if (!untracked_) base_ = values;  // measured at backups
    data_.swap(values);
    return;
  }
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (packed_) {
      Mag most = 0;
      for (const T v : values) most = std::max(most, detail::abs_diff(v, T{}));
      if (most <= kReach / 2) {
        for (T& v : values) v = pack(v, 0);
        reach_ = most;
        data_.swap(values);
        high_ = 0;
        ncrossed_ = 0;
        return;
      }
      packed_ = false;  // the separate layout, for good
      bounds_.assign(blocks(), Bound{});
    }
  }
  if (!per_slot()) base_ = values;
  data_.swap(values);
  std::fill(bounds_.begin(), bounds_.end(), Bound{});
  high_ = 0;
  ncrossed_ = 0;  // every bound is 0, within any watched residual: the next partial delta looks at what crosses it
}

template <typename T>
typename BlockTrackedArray<T>::Delta BlockTrackedArray<T>::read_delta(ByteReader& r) const {
  return detail::read_array_delta<T>(r, n_);
}

template <typename T>
void BlockTrackedArray<T>::apply_delta(const Delta& d) {
  assert(d.indices.size() == d.values.size());
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (packed_) {
      Mag most = 0;
      for (const T v : d.values) most = std::max(most, detail::abs_diff(v, T{}));
      if (most <= kReach / 2) {
        reach_ = std::max(reach_, most);
      } else {
        unpack_layout();
      }
    }
  }
  for (std::size_t k = 0; k < d.indices.size(); ++k) {
    const std::uint32_t i = d.indices[k];
    assert(i < n_);
    if (packed_) {
      data_[i] = pack(d.values[k], packed_bound(data_[i]));
    } else {
      data_[i] = d.values[k];
    }
    if (!plain_ && !per_slot()) base_[i] = d.values[k];
  }
  mark_backed_up();  // slots changed before the delta and not in it
}

template <typename T>
void BlockTrackedArray<T>::apply_delta(ByteReader& r) {
  apply_delta(read_delta(r));
}

template <typename T>
double BlockTrackedArray<T>::distance(const BlockTrackedArray& other) const {
  if (other.size() != size()) {
    throw std::invalid_argument("BlockTrackedArray::distance: sizes differ (" + std::to_string(size()) + " vs " +
                                std::to_string(other.size()) + ")");
  }
  detail::DivergenceTracker<T> acc(Metric::MaxAbs);
  for (std::size_t i = 0; i < n_; ++i) acc.accumulate(other.value(i), value(i));
  return acc.value();
}

template class BlockTrackedArray<std::int64_t>;
template class BlockTrackedArray<double>;

}  // namespace afs
