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
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
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

  // Adds weight (>= 0; std::invalid_argument otherwise) to key. O(log capacity).
  void update(std::uint64_t key, std::int64_t weight = 1);

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return heap_.size(); }
  std::int64_t total() const { return total_; }
  // The smallest monitored count once full (0 before): a bound on the weight of every unmonitored key.
  std::int64_t min_count() const { return heap_.size() < capacity_ ? 0 : heap_.front().count; }
  // count(x) for a monitored key, else min_count() (an upper bound either way); lower bound: count - error, or 0.
  std::int64_t upper_bound(std::uint64_t key) const;
  std::int64_t lower_bound(std::uint64_t key) const;
  bool monitored(std::uint64_t key) const { return index_.count(key) != 0; }
  // The monitored entries, largest count first (ties by key).
  std::vector<Entry> top(std::size_t k) const;
  std::vector<Entry> entries() const { return top(heap_.size()); }

  // Merges other into this (capacities may differ; the result keeps this capacity).
  void merge(const SpaceSaving& other);

  // Versioned binary form: tag, version, flags, capacity, total, entries (sorted), XXH3-64 checksum.
  void serialize(ByteWriter& out) const;
  // Throws FormatError on a truncated, corrupt or inconsistent buffer (duplicate keys, error > count, too many).
  static SpaceSaving deserialize(ByteReader& in);

 private:
  static constexpr std::uint32_t kTag = 0x31535353;  // "SSS1"
  static constexpr std::uint16_t kVersion = 1;
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void place(std::size_t i);  // heap_[i] moved: update index_
  void insert(const Entry& e);

  std::size_t capacity_;
  std::int64_t total_ = 0;
  std::vector<Entry> heap_;                               // min-heap on count
  std::unordered_map<std::uint64_t, std::size_t> index_;  // key -> position in heap_
};

}  // namespace afs::hh
