// Count-Min sketch (Cormode & Muthukrishnan 2005): the engine-free core of the heavy-hitter operator of AF-Stream
// ([J] section 5, Theorem 2). A plain value type: update, estimate, merge, serialize, static deserialize, plus static
// sizing helpers. The row hash functions live in CountMinHash so that an engine operator can keep the counters in
// its own tracked (backed-up) array and still hash and query exactly like this class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"

namespace afs::hh {

namespace internal {

// Stafford's "mix13" finalizer (the output function of splitmix64). A bijection on 64-bit words with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// floor(a * b / 2^64): maps a uniform 64-bit word a onto [0, b) without a division (Lemire's "fastrange").
inline std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
}

}  // namespace internal

// The r row hash functions of a Count-Min sketch of width w and depth r, derived from one seed.
//
// Row i maps a key to column h_i(key) = floor(w * ((a_i * m(key) + b_i) mod 2^64) / 2^64), where m is a seeded
// 64-bit bijective mix (computed once per key) and (a_i odd, b_i) are drawn per row from the seed: Dietzfelbinger's
// multiply-add-shift family, which is universal (collision probability about 1/w per row, independently per row).
// That is the only property the Count-Min error bound (and hence Theorem 2 of [J]) needs. Counter (i, j) is stored
// at index i * w + j (row-major), the layout of CountMin::counters().
class CountMinHash {
 public:
  static constexpr std::size_t kMaxWidth = std::size_t{1} << 32;
  static constexpr std::size_t kMaxDepth = 64;
  static constexpr std::size_t kMaxCounters = std::size_t{1} << 30;  // 8 GiB of counters

  // Throws ConfigError naming the parameter if width or depth is 0 or too large.
  CountMinHash(std::size_t width, std::size_t depth, std::uint64_t seed);

  std::size_t width() const { return width_; }
  std::size_t depth() const { return depth_; }
  std::uint64_t seed() const { return seed_; }
  // Number of counters, width * depth.
  std::size_t size() const { return width_ * depth_; }

  // Column of key in row (0 <= row < depth).
  std::size_t column(int row, std::uint64_t key) const { return column_of_mixed(row, mix_key(key)); }
  // Counter index row * width + column(row, key).
  std::size_t bucket(int row, std::uint64_t key) const {
    return static_cast<std::size_t>(row) * width_ + column(row, key);
  }

  // Calls f(counter_index) for each of the depth counters of key, in row order; the key is mixed only once.
  template <typename F>
  void for_each_bucket(std::uint64_t key, F&& f) const {
    const std::uint64_t m = mix_key(key);
    for (std::size_t row = 0; row < depth_; ++row) f(row * width_ + column_of_mixed(static_cast<int>(row), m));
  }

  // Count-Min point query over an external counter array with this layout (counters.size() must equal size()):
  // the minimum of the key's depth counters.
  // Counters: a span, or anything with an int64 operator[](std::size_t) (a tracked counter array).
  template <typename Counters = std::span<const std::int64_t>>
  std::int64_t estimate(const Counters& counters, std::uint64_t key) const {
    std::int64_t best = INT64_MAX;
    for_each_bucket(key, [&](std::size_t i) { best = counters[i] < best ? counters[i] : best; });
    return best;
  }
  // Adds count to the key's depth counters of an external array with this layout.
  void update(std::span<std::int64_t> counters, std::uint64_t key, std::int64_t count) const {
    for_each_bucket(key, [&](std::size_t i) { counters[i] += count; });
  }

  // Same shape and seed, hence the same hash functions.
  friend bool operator==(const CountMinHash& a, const CountMinHash& b) {
    return a.width_ == b.width_ && a.depth_ == b.depth_ && a.seed_ == b.seed_;
  }

 private:
  struct Row {
    std::uint64_t mul;  // odd
    std::uint64_t add;
  };
  std::uint64_t mix_key(std::uint64_t key) const { return internal::mix64(key ^ key_salt_); }
  std::size_t column_of_mixed(int row, std::uint64_t m) const {
    const Row& r = rows_[static_cast<std::size_t>(row)];
    return static_cast<std::size_t>(internal::mul_high(r.mul * m + r.add, width_));
  }

  std::size_t width_;
  std::size_t depth_;
  std::uint64_t seed_;
  std::uint64_t key_salt_;
  std::vector<Row> rows_;
};

// A Count-Min sketch of width w and depth r over 64-bit keys with signed 64-bit counters.
//
// For a stream of non-negative updates with total N, estimate(x) >= T(x) always, and with probability >= 1 - delta
// estimate(x) <= T(x) + eps * N, where eps = e / w and delta = e^-r (Cormode & Muthukrishnan 2005). AF-Stream's
// Theorem 2 ([J] section 5) builds on this: after the k-th failure the restored sketch may have lost up to
// Theta/2^k + L*alpha/2^k of any counter, so the operator calls add_to_all(Theta/2^k + L*alpha/2^k); then there are no
// false negatives, and a key with T(x) < (1 - eps)*phi - Theta - alpha*L is reported with probability <= delta.
class CountMin {
 public:
  // Width ceil(e / epsilon), so that the additive error is at most epsilon * N (w.p. >= 1 - delta).
  // Throws ConfigError unless 0 < epsilon < 1 and the width is at most CountMinHash::kMaxWidth.
  static std::size_t width_for_epsilon(double epsilon);
  // Depth ceil(ln(1 / delta)), so that the error bound holds with probability >= 1 - delta.
  // Throws ConfigError unless 0 < delta < 1 and the depth is at most CountMinHash::kMaxDepth.
  static std::size_t depth_for_delta(double delta);
  // CountMin(width_for_epsilon(epsilon), depth_for_delta(delta), seed).
  static CountMin from_error(double epsilon, double delta, std::uint64_t seed);

  // All counters zero. Throws ConfigError naming the parameter if width or depth is 0 or too large.
  CountMin(std::size_t width, std::size_t depth, std::uint64_t seed);

  // Adds count to the key's counter in every row (count may be negative; the bounds above assume it is not).
  void update(std::uint64_t key, std::int64_t count = 1) {
    hash_.update(counters_, key, count);
    total_ += count;
  }
  // Point query: the minimum of the key's counters. Never below the true count for non-negative streams.
  std::int64_t estimate(std::uint64_t key) const { return hash_.estimate(counters_, key); }
  // Point query over an external counter array laid out by hash (see CountMinHash::estimate).
  static std::int64_t estimate_from(std::span<const std::int64_t> counters, const CountMinHash& hash,
                                    std::uint64_t key) {
    return hash.estimate(counters, key);
  }

  // Adds other's counters and total to this sketch: the result equals one sketch over both streams. Throws
  // ConfigError if width, depth or seed differ.
  void merge(const CountMin& other);

  // Adds c to every counter (not to total_count()): the compensation of Theorem 2 ([J] section 5), called with
  // c = Theta/2^k + L*alpha/2^k after the k-th failure so that no heavy hitter is missed.
  void add_to_all(std::int64_t c);

  // Counter index row * width + column of key in row (see CountMinHash).
  std::size_t bucket(int row, std::uint64_t key) const { return hash_.bucket(row, key); }
  const CountMinHash& hash() const { return hash_; }
  // The width * depth counters, row-major.
  std::span<const std::int64_t> counters() const { return counters_; }

  std::size_t width() const { return hash_.width(); }
  std::size_t depth() const { return hash_.depth(); }
  std::uint64_t seed() const { return hash_.seed(); }
  // Sum of all update() counts (including merged sketches), N in the error bound.
  std::int64_t total_count() const { return total_; }
  // e / width: the relative additive error guaranteed with probability >= 1 - delta().
  double epsilon() const;
  // e^-depth: the failure probability of the error bound for one key.
  double delta() const;
  // epsilon() * total_count(): with probability >= 1 - delta(), estimate(x) - T(x) <= error_bound().
  double error_bound() const { return epsilon() * static_cast<double>(total_); }

  // Appends a self-describing snapshot: tag "AFCM", format version, flags, width, depth, seed, total, the counters
  // and an XXH3-64 checksum of all of it.
  void serialize(ByteWriter& out) const;
  // Reads a snapshot written by serialize(), leaving the reader just past it. Throws FormatError on a wrong tag or
  // version, an invalid shape, a counter count that does not match the shape, a checksum mismatch, or truncation.
  static CountMin deserialize(ByteReader& in);

  static constexpr std::uint32_t kTag = 0x4D434641;  // "AFCM" in little-endian byte order
  static constexpr std::uint16_t kVersion = 1;

  friend bool operator==(const CountMin& a, const CountMin& b) {
    return a.hash_ == b.hash_ && a.total_ == b.total_ && a.counters_ == b.counters_;
  }

 private:
  CountMin(CountMinHash hash, std::int64_t total, std::vector<std::int64_t> counters);

  CountMinHash hash_;
  std::int64_t total_ = 0;
  std::vector<std::int64_t> counters_;
};

}  // namespace afs::hh
