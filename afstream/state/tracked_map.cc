// TrackedMap<V>: table maintenance, serialization, backup bookkeeping and brute-force distance (DESIGN.md
// section 3).
#include "afstream/state/tracked_map.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/state/container_format.h"

namespace afs {

template <typename V>
TrackedMap<V>::TrackedMap(Metric m) : slots_(16, Slot{}), mask_(15), shift_(60), div_(m) {}

template <typename V>
std::uint16_t TrackedMap<V>::tag() {
  return std::is_same_v<V, std::int64_t> ? detail::kTagMapInt64 : detail::kTagMapDouble;
}

template <typename V>
void TrackedMap<V>::rehash(std::size_t capacity) {
  std::vector<Slot> old(capacity, Slot{});
  old.swap(slots_);
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& s : old) {
    if (s.state != kEmpty) slots_[probe(s.key)] = s;
  }
}

template <typename V>
void TrackedMap<V>::reserve(std::size_t n) {
  std::size_t cap = slots_.size();
  while (4 * (n + 1) > 3 * cap) cap *= 2;
  if (cap != slots_.size()) rehash(cap);
}

// Backward-shift deletion for linear probing: later entries of the cluster whose home slot is not in (i, j] move
// back into the hole, so no "deleted" markers are needed for lookups.
template <typename V>
void TrackedMap<V>::remove_at(std::size_t i) {
  std::size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].state == kEmpty) break;
    const std::size_t h = home(slots_[j].key);
    if (((j - h) & mask_) >= ((j - i) & mask_)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].state = kEmpty;
  --used_;
}

template <typename V>
bool TrackedMap<V>::erase(std::uint64_t key) {
  Slot& s = slots_[probe(key)];
  if (s.state != kLive) return false;
  const V old = s.value;
  if (!s.dirty) {
    s.dirty = true;
    s.base = old;
    s.was_present = true;
    dirty_.push_back(key);
  }
  s.state = kErased;
  s.value = V{};
  --live_;
  if (!s.was_present) {
    --new_keys_;
    ++erased_new_;
  }
  div_.change(s.base, old, V{});
  if (div_.drifted()) [[unlikely]]
    recompute();
  // Amortized O(1): a purge costs O(dirty) and runs only once they are half of it.
  if (erased_new_ > 1024 && 2 * erased_new_ > dirty_.size()) drop_erased_new_keys();
  return true;
}

template <typename V>
void TrackedMap<V>::drop_erased_new_keys() {
  // Absent at the backup and absent now: no entry in the delta, no part in the divergence (0 to 0).
  std::size_t kept = 0;
  for (const std::uint64_t k : dirty_) {
    const std::size_t i = probe(k);
    const Slot& s = slots_[i];
    if (s.state == kErased && !s.was_present) {
      remove_at(i);
    } else {
      dirty_[kept++] = k;
    }
  }
  dirty_.resize(kept);
  erased_new_ = 0;
}

template <typename V>
void TrackedMap<V>::recompute() {
  div_.reset_sum();
  for (const std::uint64_t k : dirty_) {
    const Slot& s = slots_[probe(k)];
    div_.accumulate(s.base, s.state == kLive ? s.value : V{});
  }
}

template <typename V>
void TrackedMap<V>::mark_backed_up() {
  for (const std::uint64_t k : dirty_) {
    const std::size_t i = probe(k);
    Slot& s = slots_[i];
    if (s.state == kEmpty) continue;
    s.dirty = false;
    if (s.state == kErased) remove_at(i);
  }
  const bool shrink = dirty_.capacity() > (1u << 16) && dirty_.size() < dirty_.capacity() / 8;
  dirty_.clear();
  if (shrink) dirty_.shrink_to_fit();
  new_keys_ = 0;
  erased_new_ = 0;
  div_.reset();
}

template <typename V>
void TrackedMap<V>::write_full(ByteWriter& w) const {
  detail::write_container_header(w, tag() | detail::kTagFull, live_);
  // In key order, so equal states give equal bytes whatever the table's history (canonical snapshots).
  std::vector<std::pair<std::uint64_t, V>> entries;
  entries.reserve(live_);
  for_each([&](std::uint64_t k, V v) { entries.emplace_back(k, v); });
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::uint64_t> keys;
  std::vector<V> values;
  keys.reserve(live_);
  values.reserve(live_);
  for (const auto& [k, v] : entries) {
    keys.push_back(k);
    values.push_back(v);
  }
  w.put_array<std::uint64_t>(keys);
  w.put_array<V>(values);
}

template <typename V>
void TrackedMap<V>::write_delta(ByteWriter& w) const {
  detail::write_container_header(w, tag() | detail::kTagDelta, live_);
  std::vector<std::uint64_t> keys;
  std::vector<V> values;
  std::vector<std::uint64_t> erased;
  for (const std::uint64_t k : dirty_) {
    const Slot& s = slots_[probe(k)];
    if (s.state == kLive) {
      keys.push_back(k);
      values.push_back(s.value);
    } else {
      erased.push_back(k);
    }
  }
  w.put_array<std::uint64_t>(keys);
  w.put_array<V>(values);
  w.put_array<std::uint64_t>(erased);
}

template <typename V>
void TrackedMap<V>::read_full(ByteReader& r) {
  const std::uint16_t t = tag() | detail::kTagFull;
  const std::string what = detail::container_tag_name(t);
  const std::uint64_t n = detail::read_container_header(r, t);
  const std::vector<std::uint64_t> keys = r.get_array<std::uint64_t>((what + " keys").c_str());
  const std::vector<V> values = r.get_array<V>((what + " values").c_str());
  if (keys.size() != n || values.size() != n) {
    throw FormatError(what + ": header says " + std::to_string(n) + " keys but " + std::to_string(keys.size()) +
                      " keys and " + std::to_string(values.size()) + " values follow");
  }
  TrackedMap fresh(metric());
  fresh.reserve(n);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::size_t i = fresh.probe(keys[k]);
    if (fresh.slots_[i].state != kEmpty) {
      throw FormatError(what + ": key " + std::to_string(keys[k]) + " appears twice");
    }
    fresh.slots_[i] = Slot{keys[k], values[k], V{}, kLive, false, false};
    ++fresh.used_;
    ++fresh.live_;
  }
  *this = std::move(fresh);
}

template <typename V>
typename TrackedMap<V>::Delta TrackedMap<V>::read_delta(ByteReader& r) const {
  const std::uint16_t t = tag() | detail::kTagDelta;
  const std::string what = detail::container_tag_name(t);
  Delta d;
  d.keys_before = live_;
  d.keys_after = detail::read_container_header(r, t);
  d.keys = r.get_array<std::uint64_t>((what + " keys").c_str());
  d.values = r.get_array<V>((what + " values").c_str());
  d.erased = r.get_array<std::uint64_t>((what + " erased keys").c_str());
  if (d.keys.size() != d.values.size()) {
    throw FormatError(what + ": " + std::to_string(d.keys.size()) + " keys but " + std::to_string(d.values.size()) +
                      " values");
  }
  std::vector<std::uint64_t> all(d.keys);
  all.insert(all.end(), d.erased.begin(), d.erased.end());
  std::sort(all.begin(), all.end());
  const auto dup = std::adjacent_find(all.begin(), all.end());
  if (dup != all.end()) throw FormatError(what + ": key " + std::to_string(*dup) + " appears twice");
  std::size_t after = live_;
  for (const std::uint64_t k : d.keys) after += contains(k) ? 0 : 1;
  for (const std::uint64_t k : d.erased) after -= contains(k) ? 1 : 0;
  if (after != d.keys_after) {
    throw FormatError(what + ": the writer had " + std::to_string(d.keys_after) +
                      " keys after this delta but applying it here " + "would give " + std::to_string(after) +
                      " (delta applied to the wrong base state)");
  }
  return d;
}

template <typename V>
void TrackedMap<V>::apply_delta(const Delta& d) {
  // Validated by read_delta against this map as it is (two deltas of one map read before either is applied would
  // not be): now mutate. Dropping the local change records first leaves no tombstones in the table.
  assert(live_ == d.keys_before && "TrackedMap::apply_delta: the map changed since read_delta");
  mark_backed_up();
  if (d.keys_after > live_) reserve(d.keys_after);
  for (std::size_t k = 0; k < d.keys.size(); ++k) {
    Slot& s = find_or_insert(d.keys[k]);
    if (s.state != kLive) {
      s.state = kLive;
      ++live_;
    }
    s.value = d.values[k];
  }
  for (const std::uint64_t k : d.erased) {
    const std::size_t i = probe(k);
    if (slots_[i].state == kLive) {
      remove_at(i);
      --live_;
    }
  }
}

template <typename V>
void TrackedMap<V>::apply_delta(ByteReader& r) {
  apply_delta(read_delta(r));
}

template <typename V>
double TrackedMap<V>::distance(const TrackedMap& other) const {
  if (metric() == Metric::NewKeys) {
    std::size_t n = 0;
    for_each([&](std::uint64_t k, V) { n += other.contains(k) ? 0 : 1; });
    return static_cast<double>(n);
  }
  detail::DivergenceTracker<V> acc(metric());
  for_each([&](std::uint64_t k, V v) { acc.accumulate(other.get(k), v); });
  other.for_each([&](std::uint64_t k, V v) {
    if (!contains(k)) acc.accumulate(v, V{});
  });
  return acc.value();
}

template class TrackedMap<std::int64_t>;
template class TrackedMap<double>;

}  // namespace afs
