// Seekable Zipf stream generator: normalisation, Vose's alias table, and the counter-based sampler.
#include "algorithms/heavy_hitters/zipf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include "afstream/core/errors.h"
#include "algorithms/heavy_hitters/count_min.h"  // internal::mix64, internal::mul_high

namespace afs::hh {

namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;     // splitmix64 increment
constexpr std::uint64_t kKeyOffset = 0x5851f42d4c957f2dULL;  // so that rank 0 does not map to key 0
constexpr std::uint64_t kStreamSalt = 0xd1b54a32d192ed03ULL;

// Multiplicative inverse of an odd 64-bit number (Newton's iteration; each step doubles the correct low bits).
constexpr std::uint64_t inverse_odd(std::uint64_t a) {
  std::uint64_t x = a;  // correct to 3 bits for odd a
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
constexpr std::uint64_t kMixMul1Inv = inverse_odd(0xbf58476d1ce4e5b9ULL);
constexpr std::uint64_t kMixMul2Inv = inverse_odd(0x94d049bb133111ebULL);
static_assert(kMixMul1Inv * 0xbf58476d1ce4e5b9ULL == 1 && kMixMul2Inv * 0x94d049bb133111ebULL == 1);

// Inverse of internal::mix64.
constexpr std::uint64_t unmix64(std::uint64_t z) {
  z ^= (z >> 31) ^ (z >> 62);
  z *= kMixMul2Inv;
  z ^= (z >> 27) ^ (z >> 54);
  z *= kMixMul1Inv;
  z ^= (z >> 30) ^ (z >> 60);
  return z;
}
static_assert(unmix64(internal::mix64(0x0123456789abcdefULL)) == 0x0123456789abcdefULL);

std::string to_string_exact(double v) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.17g", v);
  return buf.data();
}

}  // namespace

ZipfGenerator::ZipfGenerator(const ZipfParams& params) : params_(params) {
  const std::uint64_t n = params.num_keys;
  const double s = params.skew;
  if (n == 0) throw ConfigError("ZipfGenerator: num_keys must be positive (got 0)");
  if (n > kMaxKeys) {
    throw ConfigError("ZipfGenerator: num_keys " + std::to_string(n) + " exceeds the maximum " +
                      std::to_string(kMaxKeys));
  }
  if (!(std::isfinite(s) && s >= 0.0)) {
    throw ConfigError("ZipfGenerator: skew must be finite and >= 0 (got " + to_string_exact(s) + ")");
  }
  if (params.total_items > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw ConfigError("ZipfGenerator: total_items " + std::to_string(params.total_items) + " exceeds INT64_MAX");
  }
  stream_base_ = internal::mix64(params.seed ^ kStreamSalt);
  table_ = shared_table(n, s);
}

// The table depends on (n, s) alone and is never changed once built: generators of the same distribution share one
// while any of them holds it. A restarted source (a worker of the in-process runtime, or a copy of a generator)
// then starts at once instead of computing a million powers again (about 20 ms for the heavy-hitter job's 1e6 keys,
// which held up every recovery of a failure of all workers).
std::shared_ptr<const ZipfGenerator::Table> ZipfGenerator::shared_table(std::uint64_t n, double s) {
  static std::mutex mu;
  static std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<const Table>> tables;
  const std::pair<std::uint64_t, std::uint64_t> key{n, std::bit_cast<std::uint64_t>(s)};
  std::lock_guard lock(mu);
  for (auto it = tables.begin(); it != tables.end();) {  // forget the tables nobody holds any more
    it = it->second.expired() ? tables.erase(it) : std::next(it);
  }
  if (auto held = tables[key].lock()) return held;
  auto table = std::make_shared<const Table>(build_table(n, s));
  tables[key] = table;
  return table;
}

ZipfGenerator::Table ZipfGenerator::build_table(std::uint64_t n, double s) {
  Table out;
  if (s == 0.0) {
    // Uniform: every column keeps its own rank, so a draw is its column and no table is needed (it took 20 bytes a
    // key while built: a join over 1e9 uniform keys held 19.5 GB).
    out.normalizer = static_cast<double>(n);
    return out;
  }
  // Unnormalised weights (k + 1)^-s, summed smallest first in extended precision.
  std::vector<double> q(n);
  for (std::uint64_t k = 0; k < n; ++k) q[k] = std::pow(static_cast<double>(k + 1), -s);
  long double sum = 0.0L;
  for (std::uint64_t k = n; k-- > 0;) sum += q[k];
  out.normalizer = static_cast<double>(sum);

  // Vose's alias method on the scaled probabilities q_k = n * p_k (mean 1). One work array holds the "small"
  // columns (q < 1) growing from the front and the "large" ones (q >= 1) growing from the back.
  const long double scale = static_cast<long double>(n) / sum;
  for (auto& v : q) v = static_cast<double>(v * scale);
  auto& table = out.entries;
  table.resize(n);
  std::vector<std::uint32_t> work(n);
  std::size_t num_small = 0, num_large = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    if (q[k] < 1.0) {
      work[num_small++] = static_cast<std::uint32_t>(k);
    } else {
      work[n - ++num_large] = static_cast<std::uint32_t>(k);
    }
  }
  constexpr double kTwo32 = 4294967296.0;
  while (num_small > 0 && num_large > 0) {
    const std::uint32_t small = work[--num_small];
    const std::uint32_t large = work[n - num_large];
    const double t = std::floor(q[small] * kTwo32);
    table[small] = {t >= kTwo32 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(t), large};
    q[large] = (q[large] + q[small]) - 1.0;
    if (q[large] < 1.0) {
      --num_large;
      work[num_small++] = large;
    }
  }
  // Whatever is left (up to rounding) has q == 1: the column always keeps its own rank.
  for (std::size_t i = 0; i < num_small; ++i) table[work[i]] = {0xFFFFFFFFu, work[i]};
  for (std::size_t i = 0; i < num_large; ++i) table[work[n - 1 - i]] = {0xFFFFFFFFu, work[n - 1 - i]};
  return out;
}

namespace {

// One alias-table draw from one uniform 64-bit word: the high half of r * n picks the column, the low half (the
// position inside the column, uniform and independent of the column) decides between the column and its alias.
template <typename Entry>
inline std::uint64_t alias_draw(const Entry* table, std::uint64_t n, std::uint64_t r) {
  const unsigned __int128 product = static_cast<unsigned __int128>(r) * n;
  const auto column = static_cast<std::uint64_t>(product >> 64);
  const auto fraction = static_cast<std::uint32_t>(static_cast<std::uint64_t>(product) >> 32);
  const Entry e = table[column];
  // Branch-free select: the comparison is unpredictable, so a branch would cost a misprediction on most items.
  const std::uint64_t keep_mask = std::uint64_t{0} - static_cast<std::uint64_t>(fraction < e.threshold);
  return e.alias ^ ((column ^ e.alias) & keep_mask);
}

}  // namespace

std::uint64_t ZipfGenerator::rank_at(std::uint64_t position) const {
  const std::uint64_t r = internal::mix64(stream_base_ + (position + 1) * kGolden);
  if (table_->entries.empty()) return internal::mul_high(r, params_.num_keys);  // uniform: the column
  return alias_draw(table_->entries.data(), params_.num_keys, r);
}

Item ZipfGenerator::item_at(std::uint64_t position) const {
  return Item{key_of_rank(rank_at(position)), 1, static_cast<std::int64_t>(position), 0};
}

void ZipfGenerator::check_range(std::uint64_t offset, std::uint64_t count, const char* what) const {
  if (offset > params_.total_items || count > params_.total_items - offset) {
    throw ConfigError(std::string("ZipfGenerator::") + what + ": range [" + std::to_string(offset) + ", " +
                      std::to_string(offset) + " + " + std::to_string(count) + ") extends past total_items " +
                      std::to_string(params_.total_items));
  }
}

void ZipfGenerator::fill(std::uint64_t offset, Item* out, std::size_t count) const {
  check_range(offset, count, "fill");
  const AliasEntry* table = table_->entries.data();
  const std::uint64_t n = params_.num_keys;
  std::uint64_t state = stream_base_ + offset * kGolden;  // position p uses state base + (p + 1) * golden
  if (table_->entries.empty()) {  // uniform: a draw is its column (what the alias table of s = 0 gives too)
    for (std::size_t i = 0; i < count; ++i) {
      state += kGolden;
      out[i] =
          Item{key_of_rank(internal::mul_high(internal::mix64(state), n)), 1, static_cast<std::int64_t>(offset + i), 0};
    }
    return;
  }
  // Blocks of kBlock items: first draw every word and prefetch its alias column (the table is accessed uniformly at
  // random and exceeds the caches for large n, so overlapping the misses is what makes fill fast), then resolve.
  constexpr std::size_t kBlock = 64;
  std::array<std::uint64_t, kBlock> words;
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t len = std::min(kBlock, count - begin);
    for (std::size_t i = 0; i < len; ++i) {
      state += kGolden;
      words[i] = internal::mix64(state);
      __builtin_prefetch(table + internal::mul_high(words[i], n));
    }
    for (std::size_t i = 0; i < len; ++i) {
      const std::uint64_t position = offset + begin + i;
      out[begin + i] = Item{key_of_rank(alias_draw(table, n, words[i])), 1, static_cast<std::int64_t>(position), 0};
    }
  }
}

std::uint64_t ZipfGenerator::key_of_rank(std::uint64_t rank) { return internal::mix64(rank + kKeyOffset); }

std::optional<std::uint64_t> ZipfGenerator::rank_of_key(std::uint64_t key) const {
  const std::uint64_t rank = unmix64(key) - kKeyOffset;
  if (rank >= params_.num_keys) return std::nullopt;
  return rank;
}

double ZipfGenerator::probability(std::uint64_t rank) const {
  if (rank >= params_.num_keys) return 0.0;
  if (params_.skew == 0.0) return 1.0 / table_->normalizer;
  return std::pow(static_cast<double>(rank + 1), -params_.skew) / table_->normalizer;
}

std::unordered_map<std::uint64_t, std::int64_t> ZipfGenerator::exact_counts(std::uint64_t offset_begin,
                                                                            std::uint64_t offset_end) const {
  if (offset_end < offset_begin) {
    throw ConfigError("ZipfGenerator::exact_counts: offset_end " + std::to_string(offset_end) +
                      " is before offset_begin " + std::to_string(offset_begin));
  }
  check_range(offset_begin, offset_end - offset_begin, "exact_counts");
  std::unordered_map<std::uint64_t, std::int64_t> counts;
  std::vector<Item> chunk(4096);
  for (std::uint64_t pos = offset_begin; pos < offset_end;) {
    const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), offset_end - pos));
    fill(pos, chunk.data(), len);
    for (std::size_t i = 0; i < len; ++i) ++counts[chunk[i].key];
    pos += len;
  }
  return counts;
}

}  // namespace afs::hh
