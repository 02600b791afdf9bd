#include "algorithms/heavy_hitters/hh_operators.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/runtime/file_source.h"
#include "algorithms/heavy_hitters/space_saving_hh.h"

namespace afs::hh {

ZipfParams zipf_params(const Params& p) {
  ZipfParams z;
  z.total_items = p.get_uint("items", 1000000);
  z.num_keys = p.get_uint("keys", 100000);
  z.skew = p.get_double("skew", 1.1);
  z.seed = p.get_uint("seed", 1);
  return z;
}

Weights parse_weights(const std::string& s) {
  if (s == "unit") return Weights::Unit;
  if (s == "packet") return Weights::Packet;
  throw ConfigError("weights: expected unit or packet, got '" + s + "'");
}

std::int64_t max_weight(Weights w) { return w == Weights::Packet ? 1500 : 1; }

std::int64_t packet_bytes(std::uint64_t seed, std::uint64_t position) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL + position + 0x632be59bd9b4e019ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return 40 + static_cast<std::int64_t>(x % 1461);  // 40 .. 1500 bytes
}

void check_zipf_options(const std::string& keys_option, std::uint64_t keys, const std::string& skew_option,
                        double skew) {
  if (keys == 0 || keys > ZipfGenerator::kMaxKeys) {
    throw ConfigError(keys_option + ": expected a key count in [1, " + std::to_string(ZipfGenerator::kMaxKeys) +
                      "], got " + std::to_string(keys));
  }
  if (!(std::isfinite(skew) && skew >= 0)) {
    throw ConfigError(skew_option + ": expected a finite skew >= 0, got " + readable_text(skew));
  }
}

std::uint64_t write_zipf_stream(const Params& source_params, std::ostream& out, const std::string& path,
                                const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  ZipfSource all(source_params, {0, 1});
  std::vector<Item> chunk(65536);
  for (std::uint64_t at = 0; at < all.size();) {
    const auto n = all.read(at, chunk.data(), chunk.size());
    FileSource::write(out, {chunk.data(), n}, path);
    at += n;
    if (progress) progress(at, all.size());
  }
  return all.size();
}

ZipfSource::ZipfSource(const Params& p, const InstanceInfo& at)
    : gen_(zipf_params(p)), weights_(parse_weights(p.get_string("weights", "unit"))) {
  const auto n = gen_.total_items();
  begin_ = n * static_cast<std::uint64_t>(at.index) / static_cast<std::uint64_t>(at.parallelism);
  end_ = n * static_cast<std::uint64_t>(at.index + 1) / static_cast<std::uint64_t>(at.parallelism);
}

std::size_t ZipfSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  gen_.fill(begin_ + offset, out, n);
  if (weights_ == Weights::Packet) {
    for (std::size_t i = 0; i < n; ++i) out[i].value = packet_bytes(gen_.seed(), begin_ + offset + i);
  }
  return n;
}

std::unordered_map<std::uint64_t, std::int64_t> exact_weights(const Params& source_params) {
  ZipfSource all(source_params, {0, 1});
  const ZipfGenerator& gen = all.generator();
  std::unordered_map<std::uint64_t, std::int64_t> m;
  std::vector<Item> chunk(4096);
  constexpr std::uint64_t kFlatKeysMax = std::uint64_t{1} << 25;
  if (gen.num_keys() > std::max(kFlatKeysMax, 2 * all.size())) {
    for (std::uint64_t pos = 0; pos < all.size();) {
      const auto n = all.read(pos, chunk.data(), chunk.size());
      for (std::size_t i = 0; i < n; ++i) m[chunk[i].key] += chunk[i].value;
      pos += n;
    }
    return m;
  }
  // Every item weighs at least 1 (unit weights, or packets of 40..1500 bytes): a rank was drawn iff its total is not 0.
  std::vector<std::int64_t> by_rank(gen.num_keys(), 0);
  for (std::uint64_t pos = 0; pos < all.size();) {
    const auto n = all.read(pos, chunk.data(), chunk.size());
    for (std::size_t i = 0; i < n; ++i) by_rank[*gen.rank_of_key(chunk[i].key)] += chunk[i].value;
    pos += n;
  }
  m.reserve(static_cast<std::size_t>(std::count_if(by_rank.begin(), by_rank.end(), [](auto w) { return w != 0; })));
  for (std::uint64_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r] != 0) m.emplace(ZipfGenerator::key_of_rank(r), by_rank[r]);
  }
  return m;
}

namespace {
CountMinHash make_hash(const Params& p) {
  std::size_t width = p.get_uint("width", 0);
  std::size_t depth = p.get_uint("depth", 0);
  if (p.has("epsilon") || width == 0) width = CountMin::width_for_epsilon(p.get_double("epsilon", 1e-4));
  if (p.has("delta") || depth == 0) depth = CountMin::depth_for_delta(p.get_double("delta", 0.01));
  return CountMinHash(width, depth, p.get_uint("seed", 7));
}
// divergence-block, lowered to the largest power of two that divides the width (rows never share a block).
std::size_t block_for(const Params& p, std::size_t width) {
  const auto block = p.get_uint("divergence-block", kCountMinDivergenceBlock);
  if (block == 0 || !std::has_single_bit(block)) {
    throw ConfigError("divergence-block: expected a power of two >= 1, got " + std::to_string(block));
  }
  return std::min<std::size_t>(block, std::size_t{1} << std::countr_zero(width));
}
}  // namespace

CountMinHeavyHitters::CountMinHeavyHitters(const Params& p)
    : hash_(make_hash(p)),
      phi_(p.get_double("phi", 1000)),
      max_weight_(p.get_int("max-weight", 1)),
      watch_from_(phi_ - p.get_double("watch-margin", 0)),
      residual_share_(p.get_double("residual-share", kResidualShare)),
      counters_(hash_.size(), block_for(p, hash_.width())),
      candidates_(Metric::NewKeys) {
  validate(p);
}

void check_residual_share(double share) {
  if (!(share > 0 && share <= 0.25)) {
    throw ConfigError("hh.residual-share: expected a share of phi in (0, 0.25], got " + readable_text(share));
  }
}

void CountMinHeavyHitters::validate(const Params& p) {
  (void)block_for(p, make_hash(p).width());  // the sketch's shape
  const double phi = p.get_double("phi", 1000);
  if (!(phi > 0)) throw ConfigError("hh.phi: expected a count > 0, got " + readable_text(phi));
  if (p.get_double("watch-margin", 0) < 0) throw ConfigError("watch-margin: expected >= 0");
  check_residual_share(p.get_double("residual-share", kResidualShare));
  const auto max_weight = p.get_int("max-weight", 1);
  if (max_weight < 1) throw ConfigError("max-weight: expected >= 1, got " + std::to_string(max_weight));
}

double count_min_watch_margin(double theta, double l, double alpha, int copies, double phi,
                              bool behind_replayable_sources) {
  const double general = theta + l * alpha / copies;
  return behind_replayable_sources ? std::min(general, phi / 4) : general;
}

void CountMinHeavyHitters::process(const Item& item, Emitter& out) {
  std::array<std::uint32_t, CountMinHash::kMaxDepth> slots;  // counter indices are < kMaxCounters = 2^30
  std::size_t d = 0;
  hash_.for_each_bucket(item.key, [&](std::size_t b) { slots[d++] = static_cast<std::uint32_t>(b); });
  // One slot per row (rows never share a counter): the smallest new value is the estimate.
  const std::int64_t est = counters_.add_each(std::span<const std::uint32_t>(slots.data(), d), item.value);
  if (static_cast<double>(est) > watch_from_) {
    // Candidates: 1 = watched, 2 = reported. A new candidate is backed up at once; a report is emitted once.
    const auto state = candidates_.get(item.key);
    if (static_cast<double>(est) > phi_ && state != 2) {
      candidates_.set(item.key, 2);
      reported_since_backup_ = true;
      out.emit(item.key, est, item.time);
    } else if (state == 0) {
      candidates_.set(item.key, 1);
    }
  }
}

std::vector<std::uint64_t> CountMinHeavyHitters::reported_keys() const {
  std::vector<std::uint64_t> v;
  candidates_.for_each([&](std::uint64_t k, std::int64_t) { v.push_back(k); });
  std::sort(v.begin(), v.end());
  return v;
}

void CountMinHeavyHitters::finish(Emitter& out) {
  for (auto key : reported_keys()) {  // in key order: the same output whatever the table's history
    const auto est = estimate(key);
    if (static_cast<double>(est) > phi_) out.emit(key, est);
  }
}

void CountMinHeavyHitters::snapshot_full(ByteWriter& out) const {
  counters_.write_full(out);
  candidates_.write_full(out);
  compensation_.write_full(out);
}
void CountMinHeavyHitters::snapshot_delta(ByteWriter& out) const {
  counters_.write_delta(out);
  candidates_.write_delta(out);
  compensation_.write_delta(out);
}
void CountMinHeavyHitters::mark_backed_up() {
  counters_.mark_backed_up();
  candidates_.mark_backed_up();
  compensation_.mark_backed_up();
  reported_since_backup_ = false;
}
// The counters write only those that moved more than the residual; the candidates and the compensation whole.
// The residual comes back as compensation at a recovery, added to every counter, so it is capped relative to phi:
// at residual-share * phi / 2^(k + 1) in the incarnation that has compensated k failures, so that over any number of
// failures the residuals add at most residual-share * phi (phi / 256 by default) (proofs/theorem2-count-min.md, CM2').
// Without the cap a Theta far above phi (NEXMark hot items at the paper's Theta 1e5: phi ~ 400 bids) lifts every
// counter past phi after a few failures; with phi / 4 in all, keys just below phi were lifted past it on short streams.
double CountMinHeavyHitters::backup_partial_delta(ByteWriter& out, double residual) {
  if (phi_ > 0 && std::isfinite(phi_)) {
    residual = std::min(residual, std::ldexp(residual_share_ * phi_,
                                             -static_cast<int>(std::min<std::int64_t>(compensation_[1], 60)) - 1));
  }
  const double left = counters_.backup_partial_delta(out, residual);
  candidates_.write_delta(out);
  compensation_.write_delta(out);
  candidates_.mark_backed_up();
  compensation_.mark_backed_up();
  reported_since_backup_ = false;
  return left;
}

// All-or-nothing across both containers: restore into copies, then swap.
// All or nothing without copying the counters (recovery time grows with their size): their part is read and
// checked first and applied only once the rest has been.
void CountMinHeavyHitters::restore_full(ByteReader& in) {
  auto values = counters_.read_full_values(in);  // exactly size() = width*depth values, or FormatError
  auto k = candidates_;
  auto m = compensation_;
  k.read_full(in);
  m.read_full(in);
  in.expect_end("count-min-hh snapshot");
  counters_.apply_full(std::move(values));
  candidates_ = std::move(k);
  compensation_ = std::move(m);
  reported_since_backup_ = false;
}
// All or nothing without copying the counters: a restore applies up to ft.full-backup-every deltas in a row, and a
// copy of width*depth counters per delta made restoring 1e6 counters take a second. The counters' part is read and
// checked first and applied only once the rest has been.
void CountMinHeavyHitters::apply_delta(ByteReader& in) {
  const auto c = counters_.read_delta(in);
  const auto k = candidates_.read_delta(in);
  const auto m = compensation_.read_delta(in);
  in.expect_end("count-min-hh delta");
  counters_.apply_delta(c);
  candidates_.apply_delta(k);
  compensation_.apply_delta(m);
  reported_since_backup_ = false;
}

// Theorem 2: failure j loses at most floor(theta_j) + l_j * alpha of any counter (integer counters diverge by at
// most theta_j from the restored backup, and each lost item moves a counter by at most alpha = max-weight). Adding that
// to every counter, once per failure, restores "no false negatives". Counters are sums of item weights, so when the
// runtime measured how many input items the state lacks because of the failures not compensated yet
// (RecoveryInfo::missing_by_failure), they lost at most that many times max-weight, and the smaller total is enough
// (proofs/theorem2-count-min.md, "Measured loss"), plus what the restored backup left unwritten if it was a partial
// one (RecoveryInfo::residual_by_failure): behind a replayable source, only that residual.
void CountMinHeavyHitters::on_recovered(const RecoveryInfo& info) {
  const auto done = static_cast<std::size_t>(compensation_[1]);
  const std::size_t k = info.theta_by_failure.size();
  if (k <= done) return;
  const std::int64_t c =
      std::min(info.integer_sum_loss_bound(done, max_weight_), RecoveryInfo::kLossBoundCap - compensation_[0]);
  if (c > 0) {
    counters_.add_to_all(c);
  }
  compensation_.add(0, c);
  compensation_.set(1, static_cast<std::int64_t>(k));
}

double CountMinHeavyHitters::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const CountMinHeavyHitters&>(other);
  // Same metric as divergence(): the reported keys must agree exactly (watched ones count nothing).
  auto reported = [](const TrackedMap<std::int64_t>& m) {
    std::vector<std::uint64_t> v;
    m.for_each([&](std::uint64_t k, std::int64_t s) {
      if (s == 2) v.push_back(k);
    });
    std::sort(v.begin(), v.end());
    return v;
  };
  if (reported(candidates_) != reported(o.candidates_)) return std::numeric_limits<double>::infinity();
  return counters_.distance(o.counters_);
}

HeavyHitterMerge::HeavyHitterMerge(const Params&) : estimates_(Metric::L1) {}

void HeavyHitterMerge::process(const Item& item, Emitter&) { estimates_.set(item.key, item.value); }

void HeavyHitterMerge::restore_full(ByteReader& in) {
  auto m = estimates_;
  m.read_full(in);
  in.expect_end("hh-merge snapshot");
  estimates_ = std::move(m);
}

void HeavyHitterMerge::apply_delta(ByteReader& in) {
  const auto d = estimates_.read_delta(in);  // checked first, applied without copying the map
  in.expect_end("hh-merge delta");
  estimates_.apply_delta(d);
}

double HeavyHitterMerge::distance(const Operator& other) const {
  return estimates_.distance(dynamic_cast<const HeavyHitterMerge&>(other).estimates_);
}

std::unordered_map<std::uint64_t, std::int64_t> HeavyHitterMerge::results() const {
  std::unordered_map<std::uint64_t, std::int64_t> m;
  estimates_.for_each([&](std::uint64_t k, std::int64_t v) { m[k] = v; });
  return m;
}

void register_heavy_hitters(Registry& registry) {
  registry.add_source("zipf", "seeded Zipf keys (items, keys, skew, seed, weights=unit|packet)",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<ZipfSource>(p, at); });
  registry.add_operator("count-min-hh",
                        "Count-Min heavy hitters (width, depth | epsilon, delta; phi; max-weight; seed)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<CountMinHeavyHitters>(p); });
  registry.add_operator(
      "space-saving-hh", "Space-Saving heavy hitters (capacity | epsilon; phi; max-weight)",
      [](const Params& p, const InstanceInfo&) { return std::make_unique<SpaceSavingHeavyHitters>(p); });
  registry.add_operator("hh-merge", "merges reported heavy hitters (sink)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<HeavyHitterMerge>(p); });
}

}  // namespace afs::hh
