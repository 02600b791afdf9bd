// DirtySlots: which slots of a fixed-size array changed since some point (the learner's last convergence-trace
// point), with each one's value at that point.
//
// Per slot we keep one bit (set: dirty); a slot's value at that point is stored only while the slot is dirty, in a
// list parallel to the dirty indices, written when the slot first changes. A clean array of n slots costs n / 8
// extra bytes instead of the 8n of a full copy; clearing costs O(dirty). The bits of 2^18 slots (a KDD-like
// learner's weights) take 32 KB and stay in the core's caches, where a table of u32 positions into the list (1 MB)
// missed them at most updates and at every entry a restore inserts. The price: a dirty slot's value is found by
// position in the list, not by slot -- which the trace never needs: it reads its values in list order (remember,
// take_trace_point); TrackedVector, which reads a slot's backed-up value at every update, keeps it next to the slot
// (tracked_vector.h).
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
  // n slots, all clean. Slot indices are u32: n <= 2^32 (the learner's weights, TrackedVector, are fewer).
  explicit DirtySlots(std::size_t n) : n_(n), bits_((n + 63) / 64, 0) {}

  // A clean slot i becomes dirty with `current` (its value before the current change) remembered as its backed-up
  // value (true); a dirty one stays as it is (false). One bit tested; the list is only appended to.
  [[gnu::always_inline]] bool remember(std::size_t i, T current) {  // inlined: a call per moved entry
    std::uint64_t& word = bits_[i >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (word & bit) return false;
    word |= bit;
    idx_.push_back(static_cast<std::uint32_t>(i));
    base_.push_back(current);
    return true;
  }

  // Makes the slots indices[k] dirty with backed-up values bases[k] (a restored list of entries), all or none: every
  // index must be below slots() (not checked), clean, and given once. Returns indices.size() when all were made
  // dirty; otherwise the position of the first index that was dirty already or repeated, with the slots as before
  // the call. Indices and Bases: anything with size() and operator[] (vectors, or ArrayViews of a backup in place).
  template <typename Indices, typename Bases>
  std::size_t insert_clean(const Indices& indices, const Bases& bases) {
    const std::size_t before = idx_.size();
    reserve_more(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::uint32_t i = indices[k];
      std::uint64_t& word = bits_[i >> 6];
      const std::uint64_t bit = std::uint64_t{1} << (i & 63);
      if (word & bit) {
        truncate(before);
        return k;
      }
      word |= bit;
      idx_.push_back(i);
      base_.push_back(bases[k]);
    }
    return indices.size();
  }

  // Asks the CPU to bring the bits of the given slots (each < slots()) into the cache, for a caller that knows an
  // update's slots ahead of it (a learner's example, before it predicts). Changes nothing.
  void prefetch(std::span<const std::uint32_t> slots) const {
    for (const std::uint32_t i : slots) afs::prefetch(&bits_[i >> 6]);
  }

  bool is_dirty(std::size_t i) const { return (bits_[i >> 6] >> (i & 63)) & 1; }
  std::size_t count() const { return idx_.size(); }
  std::size_t slots() const { return n_; }
  // The dirty slots in the order they became dirty, and their backed-up values (parallel lists).
  const std::vector<std::uint32_t>& indices() const { return idx_; }
  const std::vector<T>& bases() const { return base_; }

  // Every slot is clean again. O(dirty) (a fill of the bits when there are more dirty slots than words); releases
  // the dirty lists' memory after an unusually large burst.
  void clear() {
    clean_bits();
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
    clean_bits();
    std::pair<std::vector<std::uint32_t>, std::vector<T>> out{std::move(idx_), std::move(base_)};
    idx_.clear();  // moved from: valid, now also empty
    base_.clear();
    return out;
  }

 private:
  // bits_ all 0 (the lists unchanged).
  void clean_bits() {
    if (idx_.size() > bits_.size()) {
      std::fill(bits_.begin(), bits_.end(), 0);
    } else {
      clean_from(0);
    }
  }
  // The bits of the dirty entries from the n-th on are 0 (the lists unchanged).
  void clean_from(std::size_t n) {
    for (std::size_t k = n; k < idx_.size(); ++k) bits_[idx_[k] >> 6] &= ~(std::uint64_t{1} << (idx_[k] & 63));
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

  std::size_t n_ = 0;
  std::vector<std::uint64_t> bits_;
  std::vector<std::uint32_t> idx_;
  std::vector<T> base_;
};

}  // namespace afs
