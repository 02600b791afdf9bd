// TrackedArray<T>: serialization, backup bookkeeping and brute-force distance (DESIGN.md section 3).
#include "afstream/state/tracked_array.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "afstream/core/errors.h"
#include "afstream/state/container_format.h"

namespace afs {

namespace {
constexpr std::size_t kMaxSlots = 0xFFFFFFFEu;  // indices in deltas are u32
}  // namespace

template <typename T>
TrackedArray<T>::TrackedArray(std::size_t n, Metric m)
    : values_(n <= kMaxSlots ? n : 0, T{}), base_(values_.size(), T{}), dirty_((values_.size() + 63) / 64, 0), div_(m) {
  if (n > kMaxSlots) {
    throw ConfigError("TrackedArray size " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxSlots) +
                      " slots");
  }
  if (m == Metric::NewKeys) {
    throw ConfigError(
        "divergence metric new-keys applies to keyed state (TrackedMap), not to TrackedArray; "
        "use max-abs, l1 or l2");
  }
}

template <typename T>
template <typename F>
void TrackedArray<T>::for_each_dirty(F&& f) const {
  for (const std::uint32_t w : dirty_words_) {
    const std::uint32_t first = w * 64;
    for (std::uint64_t bits = dirty_[w]; bits != 0; bits &= bits - 1) {
      f(first + static_cast<std::uint32_t>(std::countr_zero(bits)));
    }
  }
}

template <typename T>
std::size_t TrackedArray<T>::dirty_count() const {
  if (untracked_) return values_.size();
  std::size_t n = 0;
  for (const std::uint32_t w : dirty_words_) n += static_cast<std::size_t>(std::popcount(dirty_[w]));
  return n;
}

template <typename T>
void TrackedArray<T>::stop_tracking() {
  untracked_ = true;
  base_ = std::vector<T>();
  dirty_ = std::vector<std::uint64_t>();
  dirty_words_ = std::vector<std::uint32_t>();
  moved_ = std::vector<std::uint32_t>();
  div_.reset();
}

template <typename T>
void TrackedArray<T>::mark_backed_up() {
  if (untracked_) return;
  if (dirty_words_.size() > dirty_.size() / 8) {
    std::fill(dirty_.begin(), dirty_.end(), 0);
  } else {
    for (const std::uint32_t w : dirty_words_) dirty_[w] = 0;
  }
  dirty_words_.clear();
  div_.reset();
  watch_ = std::numeric_limits<Mag>::max();
  moved_.clear();
}

// The residual watched from now on: rounded down for integer counters, so the bound stays the residual asked for.
template <typename T>
typename TrackedArray<T>::Mag TrackedArray<T>::watched(double residual) {
  return std::is_same_v<T, double> ? static_cast<Mag>(residual) : static_cast<Mag>(std::floor(residual));
}

template <typename T>
double TrackedArray<T>::backup_partial_delta(ByteWriter& w, double residual) {
  const bool partial = !untracked_ && metric() == Metric::MaxAbs && residual > 0 &&
                       watch_ != std::numeric_limits<Mag>::max() && static_cast<double>(watch_) <= residual;
  if (!partial) {
    write_delta(w);
    mark_backed_up();
    if (metric() == Metric::MaxAbs && residual > 0) {
      watch_ = watched(residual);
    }
    return 0;
  }
  // The moved slots still more than watch_ from their backed-up value (a slot listed twice, or one that came back,
  // is skipped): their current value becomes the backed-up one, and they are written. Every other slot never
  // crossed watch_ since the previous partial delta, which left it within watch_. It is also within the high-water
  // mark: that bounded its distance to the store before this delta, and the delta does not change its stored value.
  // When no slot crossed watch_ the mark is <= watch_ and, for one-way counters, the true maximum.
  const Mag left = std::min(div_.high_water(), watch_);
  std::size_t k = 0;
  for (const std::uint32_t i : moved_) {
    if (detail::abs_diff(values_[i], base_[i]) <= watch_) continue;
    base_[i] = values_[i];
    moved_[k++] = i;
  }
  write_delta_entries(w, k, [&](auto&& f) {
    for (std::size_t j = 0; j < k; ++j) f(moved_[j]);
  });
  moved_.clear();
  div_.reset_to(left);
  watch_ = watched(residual);  // >= the old watch_ (else this delta were whole): every slot is within it
  return static_cast<double>(left);
}

template <typename T>
void TrackedArray<T>::recompute() {
  div_.reset_sum();
  for_each_dirty([&](std::uint32_t i) { div_.accumulate(base_[i], values_[i]); });
}

template <typename T>
void TrackedArray<T>::write_full(ByteWriter& w) const {
  detail::write_array_full<T>(w, values_);
}

template <typename T>
template <typename F>
void TrackedArray<T>::write_delta_entries(ByteWriter& w, std::size_t k, F&& for_each_index) const {
  detail::write_array_delta<T>(w, values_, k, std::forward<F>(for_each_index));
}

template <typename T>
void TrackedArray<T>::write_delta(ByteWriter& w) const {
  if (untracked_) {  // every slot
    write_delta_entries(w, values_.size(), [&](auto&& f) {
      for (std::uint32_t i = 0; i < values_.size(); ++i) f(i);
    });
    return;
  }
  write_delta_entries(w, dirty_count(), [&](auto&& f) { for_each_dirty(f); });
}

template <typename T>
void TrackedArray<T>::read_full(ByteReader& r) {
  apply_full(read_full_values(r));
}

template <typename T>
std::vector<T> TrackedArray<T>::read_full_values(ByteReader& r) const {
  return detail::read_array_full<T>(r, values_.size());
}

template <typename T>
void TrackedArray<T>::apply_full(std::vector<T>&& values) {
  assert(values.size() == values_.size());
  values_.swap(values);
  mark_backed_up();
}

template <typename T>
typename TrackedArray<T>::Delta TrackedArray<T>::read_delta(ByteReader& r) const {
  return detail::read_array_delta<T>(r, values_.size());
}

template <typename T>
void TrackedArray<T>::apply_delta(const Delta& d) {
  assert(d.indices.size() == d.values.size());
  for (std::size_t k = 0; k < d.indices.size(); ++k) {
    assert(d.indices[k] < values_.size());
    values_[d.indices[k]] = d.values[k];
  }
  mark_backed_up();
}

template <typename T>
void TrackedArray<T>::apply_delta(ByteReader& r) {
  apply_delta(read_delta(r));
}

template <typename T>
double TrackedArray<T>::distance(const TrackedArray& other) const {
  if (other.size() != size()) {
    throw std::invalid_argument("TrackedArray::distance: sizes differ (" + std::to_string(size()) + " vs " +
                                std::to_string(other.size()) + ")");
  }
  detail::DivergenceTracker<T> acc(metric());
  for (std::size_t i = 0; i < values_.size(); ++i) acc.accumulate(other.values_[i], values_[i]);
  return acc.value();
}

template class TrackedArray<std::int64_t>;
template class TrackedArray<double>;

}  // namespace afs
