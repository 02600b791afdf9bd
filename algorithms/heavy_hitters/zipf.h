// Seekable Zipf stream generator: the synthetic stand-in for the packet trace of the heavy-hitter workload of [J]
// (PAPER.md, "Workloads": Zipf keys for heavy hitters and joins). The item at stream position p depends only on
// (seed, p), so any range can be produced or replayed on its own -- a source that restarts after a failure, or a test
// that recomputes ground truth, sees exactly the same stream however it is chunked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "afstream/core/item.h"

namespace afs::hh {

// Parameters of a Zipf stream; use designated initializers:
//   ZipfGenerator gen({.num_keys = 1'000'000, .skew = 1.1, .total_items = 10'000'000, .seed = 42});
struct ZipfParams {
  std::uint64_t num_keys = 0;     // n: distinct keys (ranks 0 .. n-1), 1 <= n <= ZipfGenerator::kMaxKeys
  double skew = 1.0;              // s >= 0: P(rank k) is proportional to (k + 1)^-s; s = 0 is uniform
  std::uint64_t total_items = 0;  // N: stream positions 0 .. N-1, N <= INT64_MAX (item.time is signed)
  std::uint64_t seed = 0;         // selects the stream; the key of each rank does not depend on it
};

// Zipf(n, s) stream of N items. Position p holds the item {key = key_of_rank(R_p), value = 1, time = p, seq = 0},
// where the rank R_p is drawn from one counter-based random word splitmix64(seed, p) by Vose's alias method (table
// built by the first generator of a distribution, 8 bytes per key, and shared by the generators of the same (n, s)
// while any holds it; O(1), a few ns per item). Ranks are mapped to keys by a fixed
// bijective 64-bit mix, so key_of_rank(0) is the hottest key but keys are not small integers in rank order.
class ZipfGenerator {
 public:
  static constexpr std::uint64_t kMaxKeys = 0xFFFFFFFFULL;  // ranks are stored as 32-bit alias entries

  // Throws ConfigError naming the parameter if num_keys is 0 or above kMaxKeys, skew is negative or not finite, or
  // total_items exceeds INT64_MAX.
  explicit ZipfGenerator(const ZipfParams& params);

  // Writes the items at stream positions [offset, offset + count) to out[0 .. count). Deterministic and independent
  // of chunking: fill(a, out, n) then fill(a + n, out + n, m) equals fill(a, out, n + m). Throws ConfigError if the
  // range extends past total_items().
  void fill(std::uint64_t offset, Item* out, std::size_t count) const;
  void fill(std::uint64_t offset, std::span<Item> out) const { fill(offset, out.data(), out.size()); }
  // The item / the rank at one position (no range check).
  Item item_at(std::uint64_t position) const;
  std::uint64_t rank_at(std::uint64_t position) const;

  // Fixed bijection rank -> key (independent of the seed and of n). Injective on all 64-bit values.
  static std::uint64_t key_of_rank(std::uint64_t rank);
  // Inverse of key_of_rank, or nullopt if the key is not one of this generator's n keys.
  std::optional<std::uint64_t> rank_of_key(std::uint64_t key) const;
  // P(rank) = (rank + 1)^-s / H(n, s), with H(n, s) = sum_{k=1..n} k^-s; 0 for rank >= n.
  double probability(std::uint64_t rank) const;

  // Ground truth: the number of items of each key at positions [offset_begin, offset_end) (runs fill over the
  // range). Throws ConfigError if the range is reversed or extends past total_items().
  std::unordered_map<std::uint64_t, std::int64_t> exact_counts(std::uint64_t offset_begin,
                                                               std::uint64_t offset_end) const;

  // Whether the two generators use one alias table (they do when n and s are the same and the table was held by
  // one of them, or another generator, when the second was built).
  bool shares_table_with(const ZipfGenerator& other) const { return table_ == other.table_; }

  const ZipfParams& params() const { return params_; }
  std::uint64_t num_keys() const { return params_.num_keys; }
  double skew() const { return params_.skew; }
  std::uint64_t total_items() const { return params_.total_items; }
  std::uint64_t seed() const { return params_.seed; }

 private:
  // One column of the alias table: the column's own rank is kept if the 32-bit fraction is below threshold,
  // otherwise the alias is taken. Full columns have alias == own rank.
  struct AliasEntry {
    std::uint32_t threshold;
    std::uint32_t alias;
  };
  struct Table {
    double normalizer = 0;            // H(n, s)
    std::vector<AliasEntry> entries;  // empty for skew 0 (uniform: a draw is its column)
  };
  static std::shared_ptr<const Table> shared_table(std::uint64_t n, double s);
  static Table build_table(std::uint64_t n, double s);
  void check_range(std::uint64_t offset, std::uint64_t count, const char* what) const;

  ZipfParams params_;
  std::uint64_t stream_base_;           // mixed seed: position p uses splitmix64 state stream_base_ + p * golden
  std::shared_ptr<const Table> table_;  // shared by the generators of the same (n, s): shared_table
};

}  // namespace afs::hh
