// space-saving-hh: process, report, backups (full and delta), restore, compensation and the brute-force distance.
#include "algorithms/heavy_hitters/space_saving_hh.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "afstream/core/errors.h"

namespace afs::hh {

namespace {
constexpr std::uint32_t kDeltaTag = 0x32445353;  // "SSD2": the log of updates, or every entry
constexpr std::uint8_t kLogDelta = 0;
constexpr std::uint8_t kReplacingDelta = 1;
constexpr std::uint8_t kPackedLogDelta = 2;  // the log with varint weights (16 bytes an update -> about 10)

std::int64_t checked_nonnegative(std::int64_t v, const char* what) {
  if (v < 0) throw FormatError(std::string("space-saving-hh: negative ") + what);
  return v;
}
}  // namespace

std::size_t SpaceSavingHeavyHitters::since_counter(std::uint64_t key, int row) {
  static_assert((kSinceWidth & (kSinceWidth - 1)) == 0 && kSinceRows == 2);
  constexpr int kShift = 64 - std::countr_zero(kSinceWidth);
  const std::uint64_t mult = row == 0 ? 0x9E3779B97F4A7C15ULL : 0xC2B2AE3D27D4EB4FULL;
  return static_cast<std::size_t>(row) * kSinceWidth + static_cast<std::size_t>((key * mult) >> kShift);
}

std::size_t SpaceSavingHeavyHitters::capacity_of(const Params& p) {
  const std::uint64_t capacity = p.get_uint("capacity", 0);
  if (p.has("epsilon") || capacity == 0) return SpaceSaving::capacity_for_error(p.get_double("epsilon", 1e-4));
  if (capacity > SpaceSaving::kMaxCapacity) {
    throw ConfigError("capacity: expected 1.." + std::to_string(SpaceSaving::kMaxCapacity) + ", got " +
                      std::to_string(capacity));
  }
  return capacity;
}

void SpaceSavingHeavyHitters::validate(const Params& p) {
  (void)capacity_of(p);
  const double phi = p.get_double("phi", 1000);
  if (!(phi > 0)) throw ConfigError("hh.phi: expected a count > 0, got " + std::to_string(phi));
  const auto max_weight = p.get_int("max-weight", 1);
  if (max_weight < 1) throw ConfigError("max-weight: expected >= 1, got " + std::to_string(max_weight));
}

SpaceSavingHeavyHitters::SpaceSavingHeavyHitters(const Params& p)
    : summary_((validate(p), capacity_of(p))),
      phi_(p.get_double("phi", 1000)),
      max_weight_(p.get_int("max-weight", 1)),
      since_(kSinceRows * kSinceWidth, 0) {}

void SpaceSavingHeavyHitters::overflow() {
  clear_since();
  log_.clear();
  overflow_ = true;
}

void SpaceSavingHeavyHitters::clear_since() {
  if (overflow_) {
    std::fill(since_.begin(), since_.end(), 0);
    return;
  }
  for (const Logged& u : log_) {
    since_[since_counter(u.key, 0)] = 0;
    since_[since_counter(u.key, 1)] = 0;
  }
}

void SpaceSavingHeavyHitters::process(const Item& item, Emitter&) {
  if (item.value < 0 || item.value > max_weight_) {
    throw InputError("space-saving-hh: item weight " + std::to_string(item.value) + " (key " +
                     std::to_string(item.key) + ") outside [0, max-weight " + std::to_string(max_weight_) + "]");
  }
  summary_.update(item.key, item.value);
  ++items_;
  if (overflow_) {
    weight_since_overflow_ += item.value;
    return;
  }
  std::int64_t& a = since_[since_counter(item.key, 0)];
  std::int64_t& b = since_[since_counter(item.key, 1)];
  a += item.value;
  b += item.value;
  // Both counters are at least the key's weight since the backup (they only grow until it), so is their minimum.
  max_since_backup_ = std::max(max_since_backup_, std::min(a, b));
  log_.push_back({item.key, item.value});
  if (log_.size() > summary_.capacity()) overflow();
}

void SpaceSavingHeavyHitters::finish(Emitter& out) {
  std::vector<SpaceSaving::Entry> v = summary_.entries();
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  for (const auto& e : v) {
    if (static_cast<double>(e.count) > phi_) out.emit(e.key, e.count);
  }
}

void SpaceSavingHeavyHitters::snapshot_full(ByteWriter& out) const {
  summary_.serialize(out, SpaceSaving::EntryOrder::AsStored);  // no sort: written at every chain's start
  out.put<std::int64_t>(compensation_);
  out.put<std::int64_t>(compensated_failures_);
  out.put<std::int64_t>(items_);
}

// Delta: tag, the item counts it goes from and to, the compensation record, a kind, then either the updates since the
// backup in order (a log delta: u64 count, then each update's key as a u64 and its weight as a LEB128 varint; kind 0,
// both as they lie in memory, 16 bytes an update, is still read) or, for a replacing delta, the total, the floor and
// every entry in the summary's own order (a delta's order does not matter to apply_delta).
void SpaceSavingHeavyHitters::snapshot_delta(ByteWriter& out) const {
  static_assert(sizeof(SpaceSaving::Entry) == 3 * sizeof(std::uint64_t));  // key, count, error, as in memory
  out.put<std::uint32_t>(kDeltaTag);
  out.put<std::int64_t>(items_at_backup_);
  out.put<std::int64_t>(items_);
  out.put<std::int64_t>(compensation_);
  out.put<std::int64_t>(compensated_failures_);
  if (overflow_) {
    out.put<std::uint8_t>(kReplacingDelta);
    out.put<std::int64_t>(summary_.total());
    out.put<std::int64_t>(summary_.floor());
    out.put_array<SpaceSaving::Entry>(summary_.unordered_entries());
  } else {
    // Packed: the key whole (keys are 64-bit hashes or mixed ranks: a varint would take 9-10 bytes), the weight as a
    // varint (packet sizes: 2 bytes instead of 8; the job's deltas 583 -> 370 MB for 3e7 items). Written through a
    // pointer into room for the longest form, then trimmed: a push per byte cost the operator 5% of its time
    // (hh_benchmark BM_SpaceSavingHhApproxOverNone).
    out.put<std::uint8_t>(kPackedLogDelta);
    out.put<std::uint64_t>(log_.size());
    auto& buf = out.buffer();
    const std::size_t at = buf.size();
    buf.resize(at + log_.size() * (sizeof(std::uint64_t) + ByteWriter::kMaxVarint));
    std::uint8_t* p = buf.data() + at;
    for (const Logged& u : log_) {
      std::memcpy(p, &u.key, sizeof u.key);
      p = ByteWriter::encode_varint(p + sizeof u.key, static_cast<std::uint64_t>(u.weight));  // in [0, max-weight]
    }
    buf.resize(static_cast<std::size_t>(p - buf.data()));
  }
}

void SpaceSavingHeavyHitters::mark_backed_up() {
  clear_since();
  log_.clear();
  items_at_backup_ = items_;
  overflow_ = false;
  weight_since_overflow_ = 0;
  max_since_backup_ = 0;
  compensated_since_backup_ = 0;
}

// All or nothing: the whole snapshot is read and checked before anything changes.
void SpaceSavingHeavyHitters::restore_full(ByteReader& in) {
  SpaceSaving s = SpaceSaving::deserialize(in);
  const auto comp = checked_nonnegative(in.get<std::int64_t>("space-saving-hh compensation"), "compensation");
  const auto failures = checked_nonnegative(in.get<std::int64_t>("space-saving-hh failures"), "failure count");
  const auto items = checked_nonnegative(in.get<std::int64_t>("space-saving-hh items"), "item count");
  in.expect_end("space-saving-hh snapshot");
  if (s.capacity() != summary_.capacity()) {
    throw FormatError("space-saving-hh snapshot: capacity " + std::to_string(s.capacity()) + ", expected " +
                      std::to_string(summary_.capacity()));
  }
  summary_ = std::move(s);
  compensation_ = comp;
  compensated_failures_ = failures;
  items_ = items;
  mark_backed_up();
}

// All or nothing: the whole delta is read and checked before anything changes.
void SpaceSavingHeavyHitters::apply_delta(ByteReader& in) {
  if (in.get<std::uint32_t>("space-saving-hh delta tag") != kDeltaTag) {
    throw FormatError("space-saving-hh delta: wrong tag");
  }
  const auto from = checked_nonnegative(in.get<std::int64_t>("space-saving-hh delta first item"), "item count");
  const auto to = checked_nonnegative(in.get<std::int64_t>("space-saving-hh delta last item"), "item count");
  const auto comp = checked_nonnegative(in.get<std::int64_t>("space-saving-hh compensation"), "compensation");
  const auto failures = checked_nonnegative(in.get<std::int64_t>("space-saving-hh failures"), "failure count");
  if (to < from)
    throw FormatError("space-saving-hh delta: goes from item " + std::to_string(from) + " back to " +
                      std::to_string(to));
  const auto kind = in.get<std::uint8_t>("space-saving-hh delta kind");
  if (kind == kLogDelta || kind == kPackedLogDelta) {
    std::vector<Logged> log;
    if (kind == kLogDelta) {
      log = in.get_array<Logged>("space-saving-hh delta updates");
    } else {
      const auto n = in.get<std::uint64_t>("space-saving-hh delta update count");
      if (n > in.rest().size() / 9) {  // nine bytes at least per update
        throw FormatError("space-saving-hh delta: " + std::to_string(n) + " packed updates in " +
                          std::to_string(in.rest().size()) + " bytes");
      }
      log.resize(n);
      for (Logged& u : log) {
        u.key = in.get<std::uint64_t>("space-saving-hh delta update key");
        const auto w = in.get_varint("space-saving-hh delta update weight");
        if (w > static_cast<std::uint64_t>(max_weight_)) {
          throw FormatError("space-saving-hh delta: update of key " + std::to_string(u.key) + " with weight " +
                            std::to_string(w) + " above max-weight " + std::to_string(max_weight_));
        }
        u.weight = static_cast<std::int64_t>(w);
      }
    }
    in.expect_end("space-saving-hh delta");
    if (static_cast<std::uint64_t>(to - from) != log.size()) {
      throw FormatError("space-saving-hh delta: " + std::to_string(log.size()) + " updates for items " +
                        std::to_string(from) + ".." + std::to_string(to));
    }
    for (const Logged& u : log) {
      if (u.weight < 0 || u.weight > max_weight_) {
        throw FormatError("space-saving-hh delta: update of key " + std::to_string(u.key) + " with weight " +
                          std::to_string(u.weight) + " outside [0, max-weight " + std::to_string(max_weight_) + "]");
      }
    }
    if (items_ == to && to != from) {  // stored twice, applied already: applying it again changes nothing
      mark_backed_up();
      return;
    }
    if (items_ != from) {
      throw FormatError("space-saving-hh delta: follows the state after item " + std::to_string(from) +
                        ", but this state is after item " + std::to_string(items_));
    }
    // A compensation since the backup makes the next delta a replacing one, so a log keeps the total. A recovery
    // that added nothing (its measured loss was 0) still counts its failure as compensated: the log carries that.
    if (comp != compensation_) {
      throw FormatError("space-saving-hh delta: a log of updates cannot change the compensation (" +
                        std::to_string(compensation_) + " here, " + std::to_string(comp) + " in the delta)");
    }
    if (failures < compensated_failures_) {
      throw FormatError("space-saving-hh delta: covers " + std::to_string(failures) +
                        " failures, but this state has compensated " + std::to_string(compensated_failures_));
    }
    for (const Logged& u : log) summary_.update(u.key, u.weight);
    compensated_failures_ = failures;
    items_ = to;
    mark_backed_up();
    return;
  }
  if (kind != kReplacingDelta) throw FormatError("space-saving-hh delta: unknown kind " + std::to_string(kind));
  const auto total = checked_nonnegative(in.get<std::int64_t>("space-saving-hh total"), "total");
  const auto floor = checked_nonnegative(in.get<std::int64_t>("space-saving-hh floor"), "floor");
  const auto set = in.get_array<SpaceSaving::Entry>("space-saving-hh delta entries");
  in.expect_end("space-saving-hh delta");
  if (set.size() > summary_.capacity()) {
    throw FormatError("space-saving-hh delta: " + std::to_string(set.size()) + " entries for capacity " +
                      std::to_string(summary_.capacity()));
  }
  std::unordered_set<std::uint64_t> seen;  // every key at most once
  for (const auto& e : set) {
    if (e.error < 0 || e.error > e.count) {
      throw FormatError("space-saving-hh delta: an entry's error exceeds its count");
    }
    if (!seen.insert(e.key).second) throw FormatError("space-saving-hh delta: key " + std::to_string(e.key) + " twice");
  }
  // A replacing delta sets every value: applying it twice equals applying it once, so it is not checked against
  // the state it follows.
  SpaceSaving s(summary_.capacity());
  for (const auto& e : set) s.assign(e);
  s.set_totals(total, floor);
  summary_ = std::move(s);
  compensation_ = comp;
  compensated_failures_ = failures;
  items_ = to;
  mark_backed_up();
}

// Theorem SS (proofs/space-saving.md): failure j takes at most floor(theta_j) + l_j * alpha from any key's weight
// (weights are integers, so the part lost with the state, at most theta_j, is at most floor(theta_j)); when the
// runtime measured how many input items the state lacks because of the failures not yet compensated, at most that
// many times alpha, plus what a partial backup left unwritten (0 here: deltas are whole). The smaller total is added
// to every count, error and the floor, once per failure (the record is part of every snapshot).
void SpaceSavingHeavyHitters::on_recovered(const RecoveryInfo& info) {
  const auto done = static_cast<std::size_t>(compensated_failures_);
  const std::size_t k = info.theta_by_failure.size();
  if (k <= done) return;
  const std::int64_t c =
      std::min(info.integer_sum_loss_bound(done, max_weight_), RecoveryInfo::kLossBoundCap - compensation_);
  if (c > 0) {
    summary_.add_to_all(c);
    if (!overflow_) overflow();  // every entry changed: the next delta replaces them all
    compensated_since_backup_ += c;
  }
  compensation_ += c;
  compensated_failures_ = static_cast<std::int64_t>(k);
}

double SpaceSavingHeavyHitters::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const SpaceSavingHeavyHitters&>(other);
  const std::int64_t dc = compensation_ - o.compensation_;
  std::int64_t d = std::abs(dc);
  for (const auto& e : summary_.entries()) {
    const auto b = o.summary_.find(e.key);
    // Monitored in both with the error it would have kept: the change of its count. Otherwise it entered since:
    // the weight since then (count - error) is a lower bound of what it received.
    const std::int64_t moved =
        b && e.error == b->error + dc ? std::max<std::int64_t>(0, e.count - b->count) : e.count - e.error;
    d = std::max(d, moved);
  }
  return static_cast<double>(d);
}

}  // namespace afs::hh
