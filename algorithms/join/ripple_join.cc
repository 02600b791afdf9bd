// Ripple join: the hash-based Bernoulli coin, the estimators and their variances, the Theorem 3 interval, sizing,
// and the checksummed binary form.
#include "algorithms/join/ripple_join.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::join {

namespace {

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

void check_rate(double p, const char* who) {
  if (!(p >= RippleJoin::kMinSampleRate && p <= 1)) {
    throw ConfigError(std::string(who) + ": sample rate must be in [2^-53, 1] (got " + num(p) + ")");
  }
}

std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Var(C^) for expected per-key counts (see relative_half_width).
double count_variance(double p, std::span<const double> r, std::span<const double> s) {
  const double q = 1 - p;
  double v = 0;
  for (std::size_t k = 0; k < r.size(); ++k) {
    v += r[k] * s[k] * q * q / (p * p) + (r[k] * r[k] * s[k] + r[k] * s[k] * s[k]) * q / p;
  }
  return v;
}

}  // namespace

JoinMoments& JoinMoments::operator+=(const JoinMoments& o) {
  samples += o.samples;
  pairs += o.pairs;
  pairs_var += o.pairs_var;
  sum_pairs += o.sum_pairs;
  sum_var += o.sum_var;
  sum_q += o.sum_q;
  return *this;
}

void MomentAccumulator::add(const KeySample& k) {
  const __int128 a = k.r_count, b = k.s_count, sa = k.r_sum, qa = k.r_sumsq;
  samples_ += a + b;
  if (b == 0) return;  // every other term has the factor b_k
  pairs_ += a * b;
  pairs_var_ += a * b * (a + b);
  sum_pairs_ += sa * b;
  sum_var_ += sa * sa * b + qa * b * b;
  sum_q_ += qa * b;
}

JoinMoments MomentAccumulator::result() const {
  auto d = [](__int128 x) { return static_cast<double>(x); };
  return {d(samples_), d(pairs_), d(pairs_var_), d(sum_pairs_), d(sum_var_), d(sum_q_)};
}

JoinEstimate estimate_from(const JoinMoments& m, double p, Aggregate aggregate) {
  check_rate(p, "ripple join");
  const double q = 1 - p, p2 = p * p, p4 = p2 * p2;
  if (aggregate == Aggregate::Count) {
    return {m.pairs / p2, std::max(0.0, q * (m.pairs_var - q * m.pairs) / p4)};
  }
  return {m.sum_pairs / p2, std::max(0.0, q * (m.sum_var - q * m.sum_q) / p4)};
}

Interval interval_from(const JoinMoments& m, double p, Aggregate aggregate, double confidence, double lost) {
  if (!(lost >= 0)) throw ConfigError("ripple join: lost samples must be >= 0 (got " + num(lost) + ")");
  const double z = RippleJoin::z_for_confidence(confidence);
  const auto e = estimate_from(m, p, aggregate);
  double half = z * std::sqrt(e.variance);
  if (lost > 0) {
    // Theorem 3: eps_n ~ z / sqrt(n) with n - lost samples.
    half =
        m.samples > lost ? half * std::sqrt(m.samples / (m.samples - lost)) : std::numeric_limits<double>::infinity();
  }
  // No sampled pair below rate 1: the estimate is 0 with a variance estimate of 0, yet no sample bounds the join from
  // above (a rate too low for the join gave the interval [0, 0], which a join of any size missed without a word).
  if (m.pairs == 0 && p < 1) half = std::numeric_limits<double>::infinity();
  Interval i{e.estimate - half, e.estimate + half};
  if (aggregate == Aggregate::Count) i.lower = std::max(0.0, i.lower);
  return i;
}

RippleJoin::RippleJoin(double sample_rate, std::uint64_t seed) : rate_(sample_rate), seed_(seed) {
  check_rate(sample_rate, "RippleJoin");
}

bool RippleJoin::sampled(double p, std::uint64_t seed, Side side, std::uint64_t tuple_id) {
  // 53 uniform bits against p * 2^53: p = 1 keeps everything.
  const std::uint64_t h = mix(mix(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(side) + 1) ^
                              (tuple_id + 0x632be59bd9b4e019ULL));
  return static_cast<double>(h >> 11) < p * 9007199254740992.0;
}

void RippleJoin::add_sample(Side side, std::uint64_t key, std::int64_t value) {
  KeySample& k = keys_[key];
  if (side == Side::R) {
    ++k.r_count;
    k.r_sum += value;
    k.r_sumsq += value * value;
  } else {
    ++k.s_count;
  }
  ++samples_;
}

void RippleJoin::merge(const RippleJoin& other) {
  if (other.rate_ != rate_ || other.seed_ != seed_) {
    throw std::invalid_argument("RippleJoin::merge: sample rates or seeds differ (rate " + num(rate_) + " vs " +
                                num(other.rate_) + ")");
  }
  for (const auto& [key, o] : other.keys_) add_statistics(key, o);
}

void RippleJoin::add_statistics(std::uint64_t key, const KeySample& s) {
  KeySample& k = keys_[key];
  k.r_count += s.r_count;
  k.s_count += s.s_count;
  k.r_sum += s.r_sum;
  k.r_sumsq += s.r_sumsq;
  samples_ += static_cast<std::uint64_t>(s.r_count + s.s_count);
}

KeySample RippleJoin::key_sample(std::uint64_t key) const {
  const auto it = keys_.find(key);
  return it == keys_.end() ? KeySample{} : it->second;
}

std::size_t RippleJoin::state_bytes() const {
  // A node (key, statistics, next pointer, cached hash) plus a bucket pointer per entry.
  return sizeof(*this) + keys_.size() * (sizeof(std::uint64_t) + sizeof(KeySample) + 2 * sizeof(void*)) +
         keys_.bucket_count() * sizeof(void*);
}

JoinMoments RippleJoin::moments() const {
  MomentAccumulator acc;
  for (const auto& [key, k] : keys_) acc.add(k);
  return acc.result();
}

double RippleJoin::get_estimate(Aggregate aggregate) const {
  return estimate_from(moments(), rate_, aggregate).estimate;
}

double RippleJoin::get_variance(Aggregate aggregate) const {
  return estimate_from(moments(), rate_, aggregate).variance;
}

Interval RippleJoin::get_interval(double confidence, Aggregate aggregate, double lost_samples) const {
  return interval_from(moments(), rate_, aggregate, confidence, lost_samples);
}

double RippleJoin::z_for_confidence(double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    throw ConfigError("ripple join: confidence must be in (0, 1) (got " + num(confidence) + ")");
  }
  // P(|N(0,1)| <= z) = erf(z / sqrt 2): bisection to machine precision.
  double lo = 0, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid / std::sqrt(2.0)) < confidence ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double RippleJoin::relative_half_width(double p, double confidence, std::span<const double> r,
                                       std::span<const double> s) {
  check_rate(p, "ripple join sizing");
  if (r.size() != s.size()) throw ConfigError("ripple join sizing: R and S key counts differ in length");
  double join = 0;
  for (std::size_t k = 0; k < r.size(); ++k) join += r[k] * s[k];
  if (!(join > 0)) return std::numeric_limits<double>::infinity();
  return z_for_confidence(confidence) * std::sqrt(count_variance(p, r, s)) / join;
}

double RippleJoin::sample_rate_for(double target, double confidence, std::span<const double> r,
                                   std::span<const double> s) {
  if (!(target > 0)) throw ConfigError("ripple join sizing: relative half-width must be > 0 (got " + num(target) + ")");
  if (relative_half_width(1, confidence, r, s) > target) return 1;  // 0 at p = 1 unless the join is empty
  // The half-width falls as p grows: bisect on log p.
  double lo = 1e-12, hi = 1;
  if (relative_half_width(lo, confidence, r, s) <= target) return lo;
  while (hi / lo > 1 + 1e-4) {
    const double mid = std::sqrt(lo * hi);
    (relative_half_width(mid, confidence, r, s) <= target ? hi : lo) = mid;
  }
  return hi;
}

double RippleJoin::sample_rate_for_uniform(double target, double confidence, double r_size, double s_size,
                                           std::uint64_t keys) {
  if (keys == 0) throw ConfigError("ripple join sizing: the key space must have at least one key");
  // Every key alike: the sums over keys are `keys` times one key's term, so one entry with scaled sums suffices:
  // Var and COUNT both scale with keys, the ratio sqrt(Var)/COUNT with 1/sqrt(keys).
  const double kk = static_cast<double>(keys);
  const double r[] = {r_size / kk}, s[] = {s_size / kk};
  return sample_rate_for(target * std::sqrt(kk), confidence, r, s);
}

void RippleJoin::serialize(ByteWriter& out) const {
  const std::size_t start = out.size();
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<double>(rate_);
  out.put<std::uint64_t>(seed_);
  std::vector<std::uint64_t> keys;
  keys.reserve(keys_.size());
  for (const auto& [key, k] : keys_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());  // canonical: equal sketches, equal bytes
  out.put<std::uint64_t>(keys.size());
  for (const auto key : keys) {
    const KeySample& k = keys_.at(key);
    out.put<std::uint64_t>(key);
    out.put<std::int64_t>(k.r_count);
    out.put<std::int64_t>(k.s_count);
    out.put<std::int64_t>(k.r_sum);
    out.put<std::int64_t>(k.r_sumsq);
  }
  out.put<std::uint64_t>(XXH3_64bits(out.buffer().data() + start, out.size() - start));
}

RippleJoin RippleJoin::deserialize(ByteReader& in) {
  const std::span<const std::uint8_t> record = in.rest();
  const std::size_t start = in.position();
  const auto tag = in.get<std::uint32_t>("RippleJoin tag");
  if (tag != kTag) throw FormatError("RippleJoin snapshot: wrong tag " + std::to_string(tag) + " (not a ripple join)");
  const auto version = in.get<std::uint16_t>("RippleJoin format version");
  if (version != kVersion) {
    throw FormatError("RippleJoin snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  const auto flags = in.get<std::uint16_t>("RippleJoin flags");
  if (flags != 0) throw FormatError("RippleJoin snapshot: unknown flags " + std::to_string(flags));
  const auto rate = in.get<double>("RippleJoin sample rate");
  if (!(rate >= kMinSampleRate && rate <= 1)) {
    throw FormatError("RippleJoin snapshot: sample rate " + num(rate) + " not in [2^-53, 1]");
  }
  const auto seed = in.get<std::uint64_t>("RippleJoin seed");
  const auto n = in.get<std::uint64_t>("RippleJoin key count");
  constexpr std::size_t kEntry = 5 * sizeof(std::uint64_t);
  if (n > in.rest().size() / kEntry) {
    throw FormatError("RippleJoin snapshot: truncated: " + std::to_string(n) + " keys claimed, " +
                      std::to_string(in.rest().size()) + " bytes remain");
  }
  RippleJoin j(rate, seed);
  j.keys_.reserve(n);
  std::uint64_t previous = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto key = in.get<std::uint64_t>("RippleJoin key");
    if (i > 0 && key <= previous)
      throw FormatError("RippleJoin snapshot: keys not in increasing order at entry " + std::to_string(i));
    previous = key;
    KeySample k;
    k.r_count = in.get<std::int64_t>("RippleJoin R count");
    k.s_count = in.get<std::int64_t>("RippleJoin S count");
    k.r_sum = in.get<std::int64_t>("RippleJoin R sum");
    k.r_sumsq = in.get<std::int64_t>("RippleJoin R sum of squares");
    if (k.r_count < 0 || k.s_count < 0 || k.r_sumsq < 0 || (k.r_count == 0 && (k.r_sum != 0 || k.r_sumsq != 0)) ||
        k.r_count + k.s_count == 0) {
      throw FormatError("RippleJoin snapshot: inconsistent statistics for key " + std::to_string(key));
    }
    j.samples_ += static_cast<std::uint64_t>(k.r_count + k.s_count);
    j.keys_.emplace(key, k);
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  if (in.get<std::uint64_t>("RippleJoin checksum") != computed) {
    throw FormatError("RippleJoin snapshot: checksum mismatch (corrupt data)");
  }
  return j;
}

}  // namespace afs::join
