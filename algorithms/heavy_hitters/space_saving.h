// Space-Saving (Metwally, Agrawal & El Abbadi 2005): the engine-free core of top-k heavy hitters with guaranteed
// error (issue 4). A plain value type: update, merge, estimate, error bounds, top-k, serialize, static deserialize,
// and a sizing helper. It monitors at most k keys, each with a count and an error: a key not monitored that
// arrives takes the place of the one with the smallest count c_min, starting at c_min + w with error c_min.
//
// Guarantees, for any stream of total weight N (weights >= 0):
//   - count(x) >= true(x) >= count(x) - error(x) for a monitored x, and true(x) <= min_count() for any other x,
//     after any updates and merges (so every key heavier than min_count() is monitored);
//   - min_count() <= N / k for a summary built by updates alone, so no key heavier than N / k is missed.
// Merge (after Agarwal et al., "Mergeable summaries", 2012): counts and errors of common keys add; a key missing from
// one side is charged that side's min_count() as count and error (it may have been evicted there); the k largest
// are kept. The first guarantee then holds for the concatenated stream; the N / k bound can loosen by the charges.
//
// Two generalizations keep the guarantees under approximate fault tolerance (proofs/space-saving.md):
//   - a floor: the bound on the weight of an unmonitored key while fewer than k keys are monitored (0 unless raised
//     by add_to_all or merge); a new key enters at floor + w with error floor, so min_count() is the floor then;
//   - add_to_all(c): adds c to every count, every error and the floor (the compensation after a failure: every
//     upper bound rises by c, every lower bound count - error stays as it was).
// Ties in count are broken by key, so which key is evicted depends only on the monitored entries, not on the history
// of the heap: a summary restored from its serialized form continues exactly as the original would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"

namespace afs::hh {

class SpaceSaving {
 public:
  struct Entry {
    std::uint64_t key = 0;
    std::int64_t count = 0;  // an upper bound of the key's true weight
    std::int64_t error = 0;  // count - error is a lower bound
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  // At most capacity monitored keys. Throws ConfigError if capacity is 0 or above kMaxCapacity.
  explicit SpaceSaving(std::size_t capacity);
  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 26;
  // The capacity that guarantees an error of at most epsilon * N: ceil(1 / epsilon). ConfigError unless in (0, 1).
  static std::size_t capacity_for_error(double epsilon);

  // Adds weight (>= 0; std::invalid_argument otherwise) to key. O(log capacity). Returns the key it evicted to make
  // room, if any (the monitored key with the smallest count, the smallest key among equal counts).
  std::optional<std::uint64_t> update(std::uint64_t key, std::int64_t weight = 1);
  // Adds c >= 0 to every count, every error and the floor (std::invalid_argument if c < 0). O(size).
  void add_to_all(std::int64_t c);

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return heap_.size(); }
  std::int64_t total() const { return total_; }
  std::int64_t floor() const { return floor_; }
  // The smallest monitored count once full (the floor before): a bound on the weight of every unmonitored key.
  std::int64_t min_count() const { return heap_.size() < capacity_ ? floor_ : heap_.front().count; }
  // count(x) for a monitored key, else min_count() (an upper bound either way); lower bound: count - error, or 0.
  std::int64_t upper_bound(std::uint64_t key) const;
  std::int64_t lower_bound(std::uint64_t key) const;
  bool monitored(std::uint64_t key) const { return index_.find(key) != nullptr; }
  std::optional<Entry> find(std::uint64_t key) const;
  // The monitored entries, largest count first (ties by key).
  std::vector<Entry> top(std::size_t k) const;
  std::vector<Entry> entries() const { return top(heap_.size()); }
  // The monitored entries in no particular order (the internal one), without the sort of entries().
  std::span<const Entry> unordered_entries() const { return heap_; }

  // Merges other into this (capacities may differ; the result keeps this capacity). The result's floor is the sum
  // of both min_count()s, the bound on a key monitored by neither while the result is not full.
  void merge(const SpaceSaving& other);

  // Building blocks for applying a delta of entries (an operator's partial backup; not for ordinary use):
  // set key's entry (inserted if not monitored: std::invalid_argument if the summary is full, or if error < 0 or
  // error > count), remove key's entry (no-op if not monitored), and set the total weight and the floor.
  void assign(const Entry& e);
  void erase(std::uint64_t key);
  void set_totals(std::int64_t total, std::int64_t floor);

  // The order serialize writes the entries in: by key (canonical: equal summaries, equal bytes, whatever the heap's
  // history), or as the heap holds them, which skips a sort of every entry (an operator's full backups, written
  // often; deserialize rebuilds the same heap from either, as ties in count are broken by key).
  enum class EntryOrder { ByKey, AsStored };
  // Versioned binary form: tag, version, flags, capacity, total, floor, entries (in `order`), XXH3-64 checksum.
  // Version 1 (no floor) is still read, with floor 0.
  void serialize(ByteWriter& out, EntryOrder order = EntryOrder::ByKey) const;
  // Throws FormatError on a truncated, corrupt or inconsistent buffer (duplicate keys, error > count, too many).
  static SpaceSaving deserialize(ByteReader& in);

 private:
  static constexpr std::uint32_t kTag = 0x31535353;  // "SSS1"
  static constexpr std::uint16_t kVersion = 2;
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void place(std::size_t i);  // heap_[i] moved: update index_
  // Heap order: count, then key (a total order, so the minimum is unique).
  static bool less(const Entry& a, const Entry& b) { return a.count != b.count ? a.count < b.count : a.key < b.key; }
  void fix(std::size_t i);  // heap_[i] changed either way: restore the heap
  void insert(const Entry& e);

  std::size_t capacity_;
  std::int64_t total_ = 0;
  std::int64_t floor_ = 0;
  std::vector<Entry> heap_;  // min-heap on (count, key)
  // key -> position in heap_: open addressing with linear probing and backward-shift deletion (16-byte slots, load
  // at most 1/2). Every heap move updates it, so it must be cheap: a node-based map made it most of an update's cost.
  class KeyIndex {
   public:
    const std::uint32_t* find(std::uint64_t key) const;
    void set(std::uint64_t key, std::size_t pos);  // insert or update
    void erase(std::uint64_t key);                 // no-op if absent
    void clear();

   private:
    struct Slot {
      std::uint64_t key = 0;
      std::uint32_t pos = 0;
      std::uint32_t used = 0;
    };
    std::size_t home(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }
    void grow();
    std::vector<Slot> slots_ = std::vector<Slot>(16);
    std::size_t size_ = 0;
    int shift_ = 60;  // 64 - log2(slots_.size())
  };
  KeyIndex index_;
};

}  // namespace afs::hh
