// The two-stream join workload: even interleaving of R and S, per-side Zipf keys, values, and exact ground truth.
#include "algorithms/join/join_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "afstream/core/errors.h"

namespace afs::join {

namespace {

hh::ZipfParams side_params(const JoinStreamParams& p, Side side) {
  if (p.keys == 0) throw ConfigError("join.keys: expected at least 1 key, got 0");
  if (!(p.skew >= 0) || !std::isfinite(p.skew)) {
    throw ConfigError("join.skew: expected a finite skew >= 0, got " + std::to_string(p.skew));
  }
  if (p.r_items + p.s_items == 0) throw ConfigError("join.r-items + join.s-items: expected at least 1 tuple");
  if (p.r_items > (1ULL << 40) || p.s_items > (1ULL << 40)) {
    throw ConfigError("join.r-items / join.s-items: expected at most 2^40 tuples per side");
  }
  if (p.max_value < 1) throw ConfigError("join.max-value: expected >= 1, got " + std::to_string(p.max_value));
  // The ripple-join operator keeps Q_k, the sum of the squares of a key's sampled R values, in an int64: with one
  // key holding every R tuple it reaches r-items * max-value^2, which must not overflow (it did from max-value 1e9
  // at 1e4 tuples, silently: the SUM interval covered in 82% of seeds at 95%).
  const auto max_square_sum = static_cast<unsigned __int128>(p.max_value) *
                              static_cast<unsigned __int128>(p.max_value) * std::max<std::uint64_t>(p.r_items, 1);
  if (max_square_sum > static_cast<unsigned __int128>(std::numeric_limits<std::int64_t>::max())) {
    throw ConfigError("join.max-value: " + std::to_string(p.max_value) + " is too large for " +
                      std::to_string(p.r_items) +
                      " R tuples: the sum of the squares of the R values (r-items * max-value^2, for the SUM's "
                      "variance) must fit in 63 bits");
  }
  return {.num_keys = p.keys,
          .skew = p.skew,
          .total_items = side == Side::R ? p.r_items : p.s_items,
          .seed = p.seed * 2 + static_cast<std::uint64_t>(side) + 0x5151};
}

std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

JoinGenerator::JoinGenerator(const JoinStreamParams& params)
    : params_(params), r_ranks_(side_params(params, Side::R)), s_ranks_(side_params(params, Side::S)) {}

std::uint64_t JoinGenerator::r_before(std::uint64_t position) const {
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(position) * params_.r_items / total_items());
}

bool JoinGenerator::is_r(std::uint64_t position) const { return r_before(position + 1) > r_before(position); }

Item JoinGenerator::item_at(std::uint64_t position) const {
  if (position >= total_items()) {
    throw ConfigError("join stream: position " + std::to_string(position) + " is past the end (" +
                      std::to_string(total_items()) + " tuples)");
  }
  const bool r = is_r(position);
  const std::uint64_t r_index = r_before(position);
  const std::uint64_t index = r ? r_index : position - r_index;
  const auto& ranks = r ? r_ranks_ : s_ranks_;
  const Side side = r ? Side::R : Side::S;
  Item it;
  it.key = hh::ZipfGenerator::key_of_rank(ranks.rank_at(index));
  it.value = 1 + static_cast<std::int64_t>(mix(ranks.seed() * 0x9e3779b97f4a7c15ULL + index + 17) %
                                           static_cast<std::uint64_t>(params_.max_value));
  it.time = join_time(position, side);
  return it;
}

void JoinGenerator::fill(std::uint64_t offset, Item* out, std::size_t count) const {
  if (offset > total_items() || count > total_items() - offset) {
    throw ConfigError("join stream: range [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                      ") is past the end (" + std::to_string(total_items()) + " tuples)");
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = item_at(offset + i);
}

JoinTruth JoinGenerator::exact() const {
  struct PerKey {
    std::uint64_t r = 0, s = 0;
    double r_sum = 0;
  };
  std::unordered_map<std::uint64_t, PerKey> keys;
  keys.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(params_.keys, total_items())));
  for (std::uint64_t p = 0; p < total_items(); ++p) {
    const Item it = item_at(p);
    PerKey& k = keys[it.key];
    if (side_of(it) == Side::R) {
      ++k.r;
      k.r_sum += static_cast<double>(it.value);
    } else {
      ++k.s;
    }
  }
  JoinTruth t;
  t.r_items = params_.r_items;
  t.s_items = params_.s_items;
  for (const auto& [key, k] : keys) {
    t.count += static_cast<double>(k.r) * static_cast<double>(k.s);
    t.sum += k.r_sum * static_cast<double>(k.s);
    t.matched_keys += k.r > 0 && k.s > 0;
  }
  return t;
}

double JoinGenerator::expected_join_count() const {
  double sq = 0;
  for (std::uint64_t k = 0; k < params_.keys; ++k) {
    const double pk = r_ranks_.probability(k);
    sq += pk * pk;
  }
  return static_cast<double>(params_.r_items) * static_cast<double>(params_.s_items) * sq;
}

std::uint64_t JoinGenerator::sampled_tuples(double sample_rate, std::uint64_t sampler_seed) const {
  std::uint64_t n = 0;
  for (std::uint64_t p = 0; p < total_items(); ++p) {
    const Side side = is_r(p) ? Side::R : Side::S;
    n += RippleJoin::sampled(sample_rate, sampler_seed, side, static_cast<std::uint64_t>(join_time(p, side)));
  }
  return n;
}

JoinStreamParams join_stream_params(const Params& p) {
  JoinStreamParams j;
  j.r_items = p.get_uint("r-items", 500000);
  j.s_items = p.get_uint("s-items", 500000);
  j.keys = p.get_uint("keys", 100000);
  j.skew = p.get_double("skew", 1.0);
  j.seed = p.get_uint("seed", 1);
  j.max_value = p.get_int("max-value", 100);
  return j;
}

JoinSource::JoinSource(const Params& p, const InstanceInfo& at) : gen_(join_stream_params(p)) {
  const auto n = gen_.total_items();
  begin_ = n * static_cast<std::uint64_t>(at.index) / static_cast<std::uint64_t>(at.parallelism);
  end_ = n * static_cast<std::uint64_t>(at.index + 1) / static_cast<std::uint64_t>(at.parallelism);
}

std::size_t JoinSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  gen_.fill(begin_ + offset, out, n);
  return n;
}

}  // namespace afs::join
