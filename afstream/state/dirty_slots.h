// DirtySlots: which slots of a fixed-size array changed since some point (a tracked container's last backup, a
// learner's last trace point), with each one's value at that point.
//
// DESIGN.md section 3: a backup may be a delta of what changed, and divergence must be O(1) per update. Per slot we
// keep one u32 (0 = clean, else 1 + position in the dirty list); the backed-up value of a slot is stored only while
// the slot is dirty, in a list parallel to the dirty indices, written when the slot first changes. A clean container
// of n slots costs 4n extra bytes instead of the 8n of a full shadow copy; clearing costs O(dirty).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace afs {

template <typename T>
class DirtySlots {
 public:
  // Slot positions are u32 with 0 reserved for "clean".
  static constexpr std::size_t kMaxSlots = 0xFFFFFFFEu;

  explicit DirtySlots(std::size_t n) : pos_(n, 0) {}

  // The backed-up value of slot i, whose value before the current change is `current`. A clean slot becomes dirty
  // and `current` is remembered as its backed-up value.
  T base_for(std::size_t i, T current) {
    const std::uint32_t p = pos_[i];
    if (p != 0) return base_[p - 1];
    idx_.push_back(static_cast<std::uint32_t>(i));
    base_.push_back(current);
    pos_[i] = static_cast<std::uint32_t>(idx_.size());
    return current;
  }

  bool is_dirty(std::size_t i) const { return pos_[i] != 0; }
  std::size_t count() const { return idx_.size(); }
  std::size_t slots() const { return pos_.size(); }
  const std::vector<std::uint32_t>& indices() const { return idx_; }
  const std::vector<T>& bases() const { return base_; }

  // Every slot is clean again. O(dirty) (a sequential fill when more than 1/8 of the slots are dirty, which is
  // cheaper than scattered stores); releases the dirty lists' memory after an unusually large burst.
  void clear() {
    if (idx_.size() > pos_.size() / 8) {
      std::fill(pos_.begin(), pos_.end(), 0u);
    } else {
      for (const std::uint32_t i : idx_) pos_[i] = 0;
    }
    const bool shrink = idx_.capacity() > (1u << 16) && idx_.size() < idx_.capacity() / 8;
    idx_.clear();
    base_.clear();
    if (shrink) {
      idx_.shrink_to_fit();
      base_.shrink_to_fit();
    }
  }

 private:
  std::vector<std::uint32_t> pos_;
  std::vector<std::uint32_t> idx_;
  std::vector<T> base_;
};

}  // namespace afs
