// Ripple join with Bernoulli sampling (Haas & Hellerstein, SIGMOD 1999): the engine-free core of the online join of
// issue 4 (PAPER: the online-join workload and Theorem 3). Two streams R and S share a key space; every tuple of
// either stream is kept independently with probability p (the sample rate). The per-key sampled statistics are
//   a_k = sampled R tuples of key k,  b_k = sampled S tuples of key k,
//   A_k = sum of the values of the sampled R tuples of key k,  Q_k = sum of their squares,
// and they estimate the equi-join R |x| S on the key:
//   COUNT = sum_k r_k s_k                 estimated by  C^ = sum_k a_k b_k / p^2
//   SUM   = sum over join pairs of r.value = sum_k V_k s_k  (V_k = sum of the R values of key k)
//                                          estimated by  S^ = sum_k A_k b_k / p^2
// Both are unbiased (the two sides are sampled independently, so E[a_k b_k] = p^2 r_k s_k). Their variances are
// estimated, unbiasedly, from the same per-key counts (q = 1 - p; derivation in algorithms/join/README.md):
//   Var^(C^) = q / p^4 * sum_k a_k b_k (a_k + b_k - q)
//   Var^(S^) = q / p^4 * sum_k (A_k^2 b_k + Q_k b_k^2 - q Q_k b_k)
// and the CLT confidence interval at level c is estimate -/+ z_c sqrt(Var^), z_c the two-sided normal quantile.
// Theorem 3 (PAPER; proofs/theorem3-ripple-join.md): after failures that may have lost up to M of the n samples,
// the half-width becomes z_c sqrt(Var^) sqrt(n / (n - M)) -- the CLT half-width eps_n ~ z / sqrt(n) with n - M
// samples (M = Theta + L * beta + Gamma in the paper's notation; unbounded once M >= n).
//
// Sampling is a hash of (seed, side, tuple id), not a random-number stream: a tuple replayed after a failure is
// sampled exactly as the first time, and copies partitioned by key make the same decisions as one instance would.
// All sums over keys are additive over disjoint key partitions (JoinMoments), which is how keyed copies merge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "afstream/core/bytes.h"

namespace afs::join {

enum class Side : std::uint8_t { R = 0, S = 1 };
// The aggregate over the join result: COUNT(*) or SUM(r.value).
enum class Aggregate : std::uint8_t { Count, Sum };

// The per-key sampled statistics of one join key.
struct KeySample {
  std::int64_t r_count = 0;  // a_k
  std::int64_t s_count = 0;  // b_k
  std::int64_t r_sum = 0;    // A_k
  std::int64_t r_sumsq = 0;  // Q_k
  friend bool operator==(const KeySample&, const KeySample&) = default;
};

// The estimator's sufficient statistics: sums over keys, so the moments of disjoint key partitions add up to those
// of the whole (a keyed copy emits its moments; the join-merge sink adds them).
struct JoinMoments {
  double samples = 0;    // n: sampled tuples of both sides
  double pairs = 0;      // sum_k a_k b_k
  double pairs_var = 0;  // sum_k a_k b_k (a_k + b_k)
  double sum_pairs = 0;  // sum_k A_k b_k
  double sum_var = 0;    // sum_k (A_k^2 b_k + Q_k b_k^2)
  double sum_q = 0;      // sum_k Q_k b_k
  JoinMoments& operator+=(const JoinMoments& o);
  friend bool operator==(const JoinMoments&, const JoinMoments&) = default;
};

// Accumulates per-key statistics into JoinMoments exactly (128-bit integers), so the result does not depend on
// the order of the keys (a hash table restored from a backup iterates in another order). Exact while every partial
// sum stays below 2^127 (e.g. |A_k| <= 1e12 and b_k <= 1e9).
class MomentAccumulator {
 public:
  void add(const KeySample& k);
  JoinMoments result() const;

 private:
  __int128 samples_ = 0, pairs_ = 0, pairs_var_ = 0, sum_pairs_ = 0, sum_var_ = 0, sum_q_ = 0;
};

// An estimate with its estimated variance.
struct JoinEstimate {
  double estimate = 0;
  double variance = 0;
};

// A confidence interval; upper is +infinity when the lost samples may be all of them (Theorem 3).
struct Interval {
  double lower = 0;
  double upper = 0;
  bool contains(double x) const { return lower <= x && x <= upper; }
};

// The estimate and variance of the aggregate from moments of a sample taken at rate p (formulas above).
JoinEstimate estimate_from(const JoinMoments& m, double sample_rate, Aggregate aggregate);

// The CLT interval at `confidence`, widened per Theorem 3 for up to lost_samples of the moments' n samples lost:
// estimate -/+ z sqrt(variance) sqrt(n / (n - lost)); for COUNT the lower end is not below 0. ConfigError if
// confidence is not in (0, 1) or lost_samples is negative.
Interval interval_from(const JoinMoments& m, double sample_rate, Aggregate aggregate, double confidence,
                       double lost_samples = 0);

class RippleJoin {
 public:
  // The smallest sample rate the coin resolves: it compares 53 hash bits with p * 2^53, so below 2^-53 a tuple
  // would be kept with probability 2^-53, not p (and p^4 in the variance underflows near 1e-81, p^2 near 1e-162,
  // which made the estimate NaN).
  static constexpr double kMinSampleRate = 0x1p-53;
  // ConfigError if sample_rate is not in [kMinSampleRate, 1].
  explicit RippleJoin(double sample_rate, std::uint64_t seed = 1);

  // The Bernoulli coin of tuple `tuple_id` of `side`: a hash of (seed, side, id) below p. Deterministic.
  static bool sampled(double sample_rate, std::uint64_t seed, Side side, std::uint64_t tuple_id);
  bool sampled(Side side, std::uint64_t tuple_id) const { return sampled(rate_, seed_, side, tuple_id); }

  // Offers one tuple (its join key, its value, a tuple id unique within its side): kept if its coin says so.
  // Returns whether it was sampled.
  bool update(Side side, std::uint64_t key, std::int64_t value, std::uint64_t tuple_id) {
    if (!sampled(side, tuple_id)) return false;
    add_sample(side, key, value);
    return true;
  }
  bool update_r(std::uint64_t key, std::int64_t value, std::uint64_t tuple_id) {
    return update(Side::R, key, value, tuple_id);
  }
  bool update_s(std::uint64_t key, std::int64_t value, std::uint64_t tuple_id) {
    return update(Side::S, key, value, tuple_id);
  }
  // Records a tuple already sampled (an operator that samples itself, or a test).
  void add_sample(Side side, std::uint64_t key, std::int64_t value);
  // Adds the statistics of several samples of one key at once (an operator keeping them elsewhere, or merge).
  void add_statistics(std::uint64_t key, const KeySample& s);

  // Adds other's per-key statistics: afterwards this equals one RippleJoin fed with both inputs (tuple ids must not
  // repeat across them). For instances over disjoint key partitions, moments() of the result is the sum of theirs.
  // std::invalid_argument if the rates or seeds differ.
  void merge(const RippleJoin& other);

  double sample_rate() const { return rate_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t num_samples() const { return samples_; }
  std::size_t num_keys() const { return keys_.size(); }
  KeySample key_sample(std::uint64_t key) const;
  const std::unordered_map<std::uint64_t, KeySample>& key_samples() const { return keys_; }
  // Bytes of state held (per-key entries and hash-table overhead, approximately).
  std::size_t state_bytes() const;

  JoinMoments moments() const;
  double get_estimate(Aggregate aggregate = Aggregate::Count) const;
  double get_variance(Aggregate aggregate = Aggregate::Count) const;
  // The CLT interval (Theorem 3 widened when lost_samples > 0; see interval_from).
  Interval get_interval(double confidence, Aggregate aggregate = Aggregate::Count, double lost_samples = 0) const;
  double get_lower_bound(double confidence, Aggregate aggregate = Aggregate::Count, double lost_samples = 0) const {
    return get_interval(confidence, aggregate, lost_samples).lower;
  }
  double get_upper_bound(double confidence, Aggregate aggregate = Aggregate::Count, double lost_samples = 0) const {
    return get_interval(confidence, aggregate, lost_samples).upper;
  }

  // z with P(|N(0,1)| <= z) = confidence; ConfigError outside (0, 1).
  static double z_for_confidence(double confidence);
  // The expected relative half-width z sqrt(Var(C^)) / COUNT of the COUNT interval at rate p, for streams whose
  // key k holds r_counts[k] R tuples and s_counts[k] S tuples (exact variance:
  // Var(C^) = sum_k r_k s_k q^2 / p^2 + (r_k^2 s_k + r_k s_k^2) q / p). +infinity if the join is empty.
  static double relative_half_width(double sample_rate, double confidence, std::span<const double> r_counts,
                                    std::span<const double> s_counts);
  // The smallest sample rate (to 1e-4 relative) whose expected COUNT relative half-width is at most target;
  // 1 if none below 1 is enough. ConfigError if target is not positive or the spans differ in size.
  static double sample_rate_for(double relative_half_width, double confidence, std::span<const double> r_counts,
                                std::span<const double> s_counts);
  // The same for r_size and s_size tuples spread uniformly over `keys` keys.
  static double sample_rate_for_uniform(double relative_half_width, double confidence, double r_size, double s_size,
                                        std::uint64_t keys);

  // Versioned binary form: tag, version, flags, rate, seed, key count, keys in increasing order with their four
  // statistics, XXH3-64 checksum of everything before it.
  void serialize(ByteWriter& out) const;
  // FormatError (naming what is wrong) on a truncated, corrupt or inconsistent buffer.
  static RippleJoin deserialize(ByteReader& in);

  friend bool operator==(const RippleJoin&, const RippleJoin&) = default;

 private:
  static constexpr std::uint32_t kTag = 0x314E4A52;  // "RJN1"
  static constexpr std::uint16_t kVersion = 1;
  double rate_;
  std::uint64_t seed_;
  std::uint64_t samples_ = 0;
  std::unordered_map<std::uint64_t, KeySample> keys_;
};

}  // namespace afs::join
