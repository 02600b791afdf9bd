// Two-stream join workload (issue 4, item 5; PAPER "Workloads": Zipf keys for joins): streams R and S over one key
// space, interleaved into one seekable stream whose exact join COUNT and SUM are cheap to compute (one pass, a hash
// map per key), with the expected join size known in closed form, so a user controls it with the sizes and the skew.
//
// Position p of the combined stream (0 <= p < N = |R| + |S|) holds an R tuple when floor((p+1)|R|/N) exceeds
// floor(p|R|/N) (R and S interleave evenly and the sizes are exact); it is the i-th tuple of its side, i counting
// that side's earlier positions. Its join key is key_of_rank of a Zipf(keys, skew) rank drawn per side (the same
// ranks map to the same keys on both sides, so the hot keys meet), its value a seeded integer in [1, max-value].
// The item carries:
//   key   = the join key (so that keyed copies see disjoint keys and both sides of a key land together),
//   value = the tuple's value (the SUM aggregates the R values),
//   time  = 2 * p + side (side 0 = R, 1 = S): the side is the low bit of Item::time, and time is a tuple id unique
//           over both streams (what the ripple join's Bernoulli coin hashes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "afstream/core/item.h"
#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "algorithms/join/ripple_join.h"

namespace afs::join {

struct JoinStreamParams {
  std::uint64_t r_items = 0;     // |R| >= 0
  std::uint64_t s_items = 0;     // |S| >= 0; |R| + |S| >= 1
  std::uint64_t keys = 0;        // key space, >= 1
  double skew = 0;               // Zipf skew >= 0 (0: uniform keys)
  std::uint64_t seed = 1;        // selects both streams
  std::int64_t max_value = 100;  // values are in [1, max_value], max_value >= 1
};

// The side an item of this stream belongs to, and its tuple id.
inline Side side_of(const Item& item) { return (item.time & 1) ? Side::S : Side::R; }
inline std::int64_t join_time(std::uint64_t position, Side side) {
  return static_cast<std::int64_t>(2 * position + static_cast<std::uint64_t>(side));
}

// Exact answers over both whole streams.
struct JoinTruth {
  double count = 0;           // sum_k r_k s_k
  double sum = 0;             // sum_k V_k s_k (V_k: sum of the R values of key k)
  std::uint64_t r_items = 0;  // tuples per side
  std::uint64_t s_items = 0;
  std::uint64_t matched_keys = 0;  // keys present on both sides
};

class JoinGenerator {
 public:
  // ConfigError naming the parameter when a value is out of range.
  explicit JoinGenerator(const JoinStreamParams& params);

  std::uint64_t total_items() const { return params_.r_items + params_.s_items; }
  const JoinStreamParams& params() const { return params_; }
  // The item at one position, and a range of them (deterministic, independent of chunking). ConfigError past the end.
  Item item_at(std::uint64_t position) const;
  void fill(std::uint64_t offset, Item* out, std::size_t count) const;

  // One pass over both streams: the exact COUNT and SUM of the join.
  JoinTruth exact() const;
  // The expected COUNT over the draws of the keys: |R| |S| sum_k P(k)^2 (the knob: larger skew, fewer keys or
  // longer streams make a larger join).
  double expected_join_count() const;
  // The number of tuples a ripple join with this rate and seed samples from positions [0, N): the brute-force
  // sample size (what a failure-free run holds; tests compare a recovered run against it).
  std::uint64_t sampled_tuples(double sample_rate, std::uint64_t sampler_seed) const;

 private:
  bool is_r(std::uint64_t position) const;
  std::uint64_t r_before(std::uint64_t position) const;  // R tuples at positions < position

  JoinStreamParams params_;
  hh::ZipfGenerator r_ranks_;
  hh::ZipfGenerator s_ranks_;
};

// Parameters r-items, s-items, keys, skew, seed, max-value (defaults 500000, 500000, 100000, 1.0, 1, 100).
JoinStreamParams join_stream_params(const Params& p);

// The replayable source "join-streams": the combined stream split evenly across the source's instances.
class JoinSource final : public Source {
 public:
  JoinSource(const Params& p, const InstanceInfo& at);
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;

 private:
  JoinGenerator gen_;
  std::uint64_t begin_ = 0;
  std::uint64_t end_ = 0;
};

}  // namespace afs::join
