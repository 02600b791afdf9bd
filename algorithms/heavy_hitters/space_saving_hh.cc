// space-saving-hh: process, report, backups (full and delta), restore, compensation and the brute-force distance.
#include "algorithms/heavy_hitters/space_saving_hh.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "afstream/core/errors.h"

namespace afs::hh {

namespace {
constexpr std::uint32_t kDeltaTag = 0x31445353;  // "SSD1"
constexpr int kInitialShift = 64 - 10;           // 1024 slots

std::int64_t checked_nonnegative(std::int64_t v, const char* what) {
  if (v < 0) throw FormatError(std::string("space-saving-hh: negative ") + what);
  return v;
}
}  // namespace

SpaceSavingHeavyHitters::Touched::Touched() : slots_(std::size_t{1} << (64 - kInitialShift)), shift_(kInitialShift) {}

SpaceSavingHeavyHitters::Touched::Slot& SpaceSavingHeavyHitters::Touched::slot(std::uint64_t key) {
  if (2 * (filled_.size() + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = (key * 0x9E3779B97F4A7C15ULL) >> shift_;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used()) {
      s.entry.key = key;
      s.weight = 0;
      filled_.push_back(i);
      return s;
    }
    if (s.entry.key == key) return s;
  }
}

std::int64_t SpaceSavingHeavyHitters::Touched::add(const SpaceSaving::Entry& entry, std::int64_t weight) {
  Slot& s = slot(entry.key);
  s.entry = entry;  // error >= 0: monitored
  return s.weight += weight;
}

void SpaceSavingHeavyHitters::Touched::erased(std::uint64_t key) { slot(key).entry.error = -1; }

void SpaceSavingHeavyHitters::Touched::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  --shift_;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t& f : filled_) {  // reinserted in first-touch order, so filled_ keeps that order
    const Slot& s = old[f];
    std::size_t i = (s.entry.key * 0x9E3779B97F4A7C15ULL) >> shift_;
    while (slots_[i].used()) i = (i + 1) & mask;
    slots_[i] = s;
    f = i;
  }
}

void SpaceSavingHeavyHitters::Touched::clear() {
  for (const std::size_t f : filled_) slots_[f].weight = -1;
  filled_.clear();
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
      max_weight_(p.get_int("max-weight", 1)) {}

void SpaceSavingHeavyHitters::touch(const SpaceSaving::Entry& entry, std::int64_t weight) {
  if (overflow_) {
    weight_since_overflow_ += weight;
    return;
  }
  const std::int64_t w = touched_.add(entry, weight);
  if (w > max_since_backup_) max_since_backup_ = w;
  stop_tracking_if_over_capacity();
}

void SpaceSavingHeavyHitters::touch_erased(std::uint64_t key) {
  if (overflow_) return;
  touched_.erased(key);
  stop_tracking_if_over_capacity();
}

void SpaceSavingHeavyHitters::stop_tracking_if_over_capacity() {
  if (touched_.size() > summary_.capacity()) {
    overflow_ = true;
    touched_.clear();
  }
}

void SpaceSavingHeavyHitters::process(const Item& item, Emitter&) {
  if (item.value < 0 || item.value > max_weight_) {
    throw InputError("space-saving-hh: item weight " + std::to_string(item.value) + " (key " +
                     std::to_string(item.key) + ") outside [0, max-weight " + std::to_string(max_weight_) + "]");
  }
  const auto u = summary_.update_entry(item.key, item.value);
  touch(u.entry, item.value);
  if (u.evicted) touch_erased(*u.evicted);
}

void SpaceSavingHeavyHitters::finish(Emitter& out) {
  std::vector<SpaceSaving::Entry> v = summary_.entries();
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  for (const auto& e : v) {
    if (static_cast<double>(e.count) > phi_) out.emit(e.key, e.count);
  }
}

void SpaceSavingHeavyHitters::snapshot_full(ByteWriter& out) const {
  summary_.serialize(out);
  out.put<std::int64_t>(compensation_);
  out.put<std::int64_t>(compensated_failures_);
}

// Delta: tag, total, floor, compensation record, a flag (1: replace every entry), the touched keys still monitored
// with their entries, the touched keys no longer monitored (none when replacing), both in first-touch order (not
// sorted: a delta is written at every backup, and sorting was a tenth of the approx mode's cost). It sets values:
// applying it twice equals applying it once.
void SpaceSavingHeavyHitters::snapshot_delta(ByteWriter& out) const {
  constexpr std::size_t kEntryBytes = 3 * sizeof(std::uint64_t);
  static_assert(sizeof(SpaceSaving::Entry) == kEntryBytes);  // key, count, error: written as they lie in memory
  out.put<std::uint32_t>(kDeltaTag);
  out.put<std::int64_t>(summary_.total());
  out.put<std::int64_t>(summary_.floor());
  out.put<std::int64_t>(compensation_);
  out.put<std::int64_t>(compensated_failures_);
  out.put<std::uint8_t>(overflow_ ? 1 : 0);
  if (overflow_) {  // every entry, in the summary's own order: a delta's order does not matter to apply_delta
    out.put_array<SpaceSaving::Entry>(summary_.unordered_entries());
    out.put<std::uint64_t>(0);
    return;
  }
  // The entries go straight into the buffer (sized for the worst case, trimmed after), their count once known.
  auto& buf = out.buffer();
  const std::size_t count_at = buf.size();
  buf.resize(count_at + sizeof(std::uint64_t) + touched_.size() * kEntryBytes);
  std::uint8_t* p = buf.data() + count_at + sizeof(std::uint64_t);
  std::uint64_t n_set = 0;
  std::vector<std::uint64_t> erased;
  touched_.for_each(
      [&](const SpaceSaving::Entry& e) {
        std::memcpy(p, &e, kEntryBytes);
        p += kEntryBytes;
        ++n_set;
      },
      [&](std::uint64_t key) { erased.push_back(key); });
  buf.resize(static_cast<std::size_t>(p - buf.data()));
  std::memcpy(buf.data() + count_at, &n_set, sizeof n_set);
  out.put_array<std::uint64_t>(erased);
}

void SpaceSavingHeavyHitters::mark_backed_up() {
  touched_.clear();
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
  in.expect_end("space-saving-hh snapshot");
  if (s.capacity() != summary_.capacity()) {
    throw FormatError("space-saving-hh snapshot: capacity " + std::to_string(s.capacity()) + ", expected " +
                      std::to_string(summary_.capacity()));
  }
  summary_ = std::move(s);
  compensation_ = comp;
  compensated_failures_ = failures;
  mark_backed_up();
}

void SpaceSavingHeavyHitters::apply_delta(ByteReader& in) {
  if (in.get<std::uint32_t>("space-saving-hh delta tag") != kDeltaTag) {
    throw FormatError("space-saving-hh delta: wrong tag");
  }
  const auto total = checked_nonnegative(in.get<std::int64_t>("space-saving-hh total"), "total");
  const auto floor = checked_nonnegative(in.get<std::int64_t>("space-saving-hh floor"), "floor");
  const auto comp = checked_nonnegative(in.get<std::int64_t>("space-saving-hh compensation"), "compensation");
  const auto failures = checked_nonnegative(in.get<std::int64_t>("space-saving-hh failures"), "failure count");
  const auto replace = in.get<std::uint8_t>("space-saving-hh delta flag");
  if (replace > 1) throw FormatError("space-saving-hh delta: unknown flag " + std::to_string(replace));
  const auto n_set = in.get<std::uint64_t>("space-saving-hh delta entry count");
  if (n_set > summary_.capacity()) {
    throw FormatError("space-saving-hh delta: " + std::to_string(n_set) + " entries for capacity " +
                      std::to_string(summary_.capacity()));
  }
  std::vector<SpaceSaving::Entry> set(n_set);
  std::unordered_set<std::uint64_t> seen;  // every key at most once in the whole delta
  std::size_t added = 0;
  for (std::uint64_t i = 0; i < n_set; ++i) {
    auto& e = set[i];
    e.key = in.get<std::uint64_t>("space-saving-hh delta key");
    e.count = in.get<std::int64_t>("space-saving-hh delta count");
    e.error = in.get<std::int64_t>("space-saving-hh delta error");
    if (e.error < 0 || e.error > e.count)
      throw FormatError("space-saving-hh delta: an entry's error exceeds its count");
    if (!seen.insert(e.key).second) throw FormatError("space-saving-hh delta: key " + std::to_string(e.key) + " twice");
    added += replace || !summary_.monitored(e.key) ? 1 : 0;
  }
  const auto n_erased = in.get<std::uint64_t>("space-saving-hh delta erased count");
  if (replace && n_erased) throw FormatError("space-saving-hh delta: a replacing delta erases nothing");
  if (n_erased > in.rest().size() / sizeof(std::uint64_t)) throw FormatError("space-saving-hh delta: truncated");
  std::vector<std::uint64_t> erased(n_erased);
  std::size_t removed = 0;
  for (std::uint64_t i = 0; i < n_erased; ++i) {
    erased[i] = in.get<std::uint64_t>("space-saving-hh delta erased key");
    if (!seen.insert(erased[i]).second) {
      throw FormatError("space-saving-hh delta: key " + std::to_string(erased[i]) + " twice (set or erased)");
    }
    removed += summary_.monitored(erased[i]) ? 1 : 0;
  }
  in.expect_end("space-saving-hh delta");
  if ((replace ? 0 : summary_.size()) + added - removed > summary_.capacity()) {
    throw FormatError("space-saving-hh delta: more entries than the capacity " + std::to_string(summary_.capacity()));
  }
  if (replace) {
    SpaceSaving s(summary_.capacity());
    for (const auto& e : set) s.assign(e);
    summary_ = std::move(s);
  } else {
    for (const auto key : erased) summary_.erase(key);
    for (const auto& e : set) summary_.assign(e);
  }
  summary_.set_totals(total, floor);
  compensation_ = comp;
  compensated_failures_ = failures;
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
  const std::int64_t c = info.integer_sum_loss_bound(done, max_weight_);
  if (c > 0) {
    summary_.add_to_all(c);
    for (const auto& e : summary_.unordered_entries()) touch(e, 0);  // every entry changed: all in the next delta
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
