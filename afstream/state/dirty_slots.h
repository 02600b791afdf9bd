// DirtySlots: which slots of a fixed-size array changed since some point (the learner's last convergence-trace
// point), with each one's value at that point.
//
// Per slot we keep one u32 (0 = clean, else 1 + position in the dirty list); a slot's value at that point is stored
// only while the slot is dirty, in a list parallel to the dirty indices, written when the slot first changes. A clean
// array of n slots costs 4n extra bytes instead of the 8n of a full copy; clearing costs O(dirty). The price is a
// lookup in the table per update, and a second, dependent one in the list to read a dirty slot's value by slot
// (base_for): TrackedVector, updated on every example and reading that value each time, gave this up for values
// stored next to their weights (tracked_vector.h); the trace, a measurement that reads its values in list order
// (remember), keeps the smaller table.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "afstream/core/prefetch.h"

namespace afs {

template <typename T>
class DirtySlots {
 public:
  // Slot positions are u32 with 0 reserved for "clean".
  static constexpr std::size_t kMaxSlots = 0xFFFFFFFEu;

  explicit DirtySlots(std::size_t n) : pos_(n, 0) {}

  // A clean slot i becomes dirty with `current` (its value before the current change) remembered as its backed-up
  // value (true); a dirty one stays as it is (false). One lookup in the table; the list is only appended to.
  [[gnu::always_inline]] bool remember(std::size_t i, T current) {  // inlined: a call per moved entry
    if (pos_[i] != 0) return false;
    idx_.push_back(static_cast<std::uint32_t>(i));
    base_.push_back(current);
    pos_[i] = static_cast<std::uint32_t>(idx_.size());
    return true;
  }
  // remember(i, current), then slot i's backed-up value (a second lookup, in the list, for a dirty slot).
  T base_for(std::size_t i, T current) { return remember(i, current) ? current : base_of(i); }

  // Makes the slots indices[k] dirty with backed-up values bases[k] (a restored list of entries), all or none: every
  // index must be below slots() (not checked), clean, and given once. Returns indices.size() when all were made
  // dirty; otherwise the position of the first index that was dirty already or repeated, with the slots as before
  // the call. The indices are scattered over the table, so each lookup would miss the cache: the loop prefetches
  // ahead (a KDD-like learner's restore spent a third of its time waiting on these lookups).
  // Indices and Bases: anything with size() and operator[] (vectors, or ArrayViews of a backup in place).
  template <typename Indices, typename Bases>
  std::size_t insert_clean(const Indices& indices, const Bases& bases) {
    const std::size_t before = idx_.size();
    reserve_more(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (k + kPrefetchAhead < indices.size()) __builtin_prefetch(&pos_[indices[k + kPrefetchAhead]], 1);
      const std::uint32_t i = indices[k];
      if (pos_[i] != 0) {
        truncate(before);
        return k;
      }
      idx_.push_back(i);
      base_.push_back(bases[k]);
      pos_[i] = static_cast<std::uint32_t>(idx_.size());
    }
    return indices.size();
  }

  // Asks the CPU to bring the table entries of the given slots (each < slots()) into the cache: remember's lookup
  // of a scattered slot otherwise waits on memory, one slot after the other, as its branch on the entry is
  // unpredictable. For a caller that knows an update's slots ahead of it (a learner's example, before it predicts).
  void prefetch(std::span<const std::uint32_t> slots) const {
    for (const std::uint32_t i : slots) afs::prefetch(&pos_[i]);
  }

  bool is_dirty(std::size_t i) const { return pos_[i] != 0; }
  // The backed-up value of a dirty slot i (not checked).
  T base_of(std::size_t i) const { return base_[pos_[i] - 1]; }
  std::size_t count() const { return idx_.size(); }
  std::size_t slots() const { return pos_.size(); }
  const std::vector<std::uint32_t>& indices() const { return idx_; }
  const std::vector<T>& bases() const { return base_; }

  // Every slot is clean again. O(dirty) (a sequential fill when more than 1/8 of the slots are dirty, which is
  // cheaper than scattered stores); releases the dirty lists' memory after an unusually large burst.
  void clear() {
    clean_slots();
    const bool shrink = idx_.capacity() > (1u << 16) && idx_.size() < idx_.capacity() / 8;
    idx_.clear();
    base_.clear();
    if (shrink) {
      idx_.shrink_to_fit();
      base_.shrink_to_fit();
    }
  }

  // Every slot is clean again, and the dirty entries (indices, values) are handed over, e.g. to put back with
  // insert_clean.
  std::pair<std::vector<std::uint32_t>, std::vector<T>> take_all() {
    clean_slots();
    std::pair<std::vector<std::uint32_t>, std::vector<T>> out{std::move(idx_), std::move(base_)};
    idx_.clear();  // moved from: valid, now also empty
    base_.clear();
    return out;
  }

 private:
  static constexpr std::size_t kPrefetchAhead = 16;

  // pos_ all 0 (the lists unchanged).
  void clean_slots() {
    if (idx_.size() > pos_.size() / 8) {
      std::fill(pos_.begin(), pos_.end(), 0u);
    } else {
      clean_from(0);
    }
  }
  // The slots of the dirty entries from the n-th on are 0 (the lists unchanged).
  void clean_from(std::size_t n) {
    for (std::size_t k = n; k < idx_.size(); ++k) {
      if (k + kPrefetchAhead < idx_.size()) __builtin_prefetch(&pos_[idx_[k + kPrefetchAhead]], 1);
      pos_[idx_[k]] = 0;
    }
  }
  // Every slot made dirty after the first n is clean again.
  void truncate(std::size_t n) {
    clean_from(n);
    idx_.resize(n);
    base_.resize(n);
  }
  // Room for `more` entries, growing geometrically (a restore inserts delta after delta).
  void reserve_more(std::size_t more) {
    const std::size_t need = idx_.size() + more;
    if (need <= idx_.capacity()) return;
    const std::size_t cap = std::max(need, 2 * idx_.capacity());
    idx_.reserve(cap);
    base_.reserve(cap);
  }

  std::vector<std::uint32_t> pos_;
  std::vector<std::uint32_t> idx_;
  std::vector<T> base_;
};

}  // namespace afs
