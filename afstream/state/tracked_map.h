// TrackedMap<V>: a hash map from u64 keys to counters or weights (per-key counts, join samples, sparse models) whose
// divergence from its last backup is maintained in O(1) per update and whose changes since that backup -- including
// erased keys, as tombstones -- can be written as a delta.
//
// DESIGN.md section 3 (Theta): the runtime compares divergence() with theta after each update and, when exceeded,
// backs up write_delta() (or write_full()) and calls mark_backed_up().
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/state/divergence.h"

namespace afs {

// A map std::uint64_t -> V (std::int64_t or double) with incremental divergence tracking (DESIGN.md section 3).
//
// Metric (fixed at construction), with b the map at the last backup and an absent key counting as value 0:
//  - MaxAbs, L1, L2 over v_k - b_k, exactly as for TrackedArray: L1/L2 exact for int64 and up to rounding for double;
//    MaxAbs is the high-water mark of |v_k - b_k| since the last backup (equal to the current maximum when values
//    only move one way between backups, an upper bound otherwise).
//  - NewKeys: the number of keys present now that were not present at the last backup.
// Storage: open addressing with linear probing (32-byte slots holding key, value and backed-up value; load <= 3/4).
// An erased key stays in the table as a tombstone until the next backup so that the delta records it;
// mark_backed_up() removes tombstones (backward-shift deletion, so lookups never skip markers). A key inserted and
// erased since the last backup changes nothing the delta must say: once such tombstones are most of the changed
// keys they are dropped, so a map that is never backed up (mode none) does not grow with keys long gone.
// add/set/erase/get are O(1) expected; mark_backed_up and write_delta are O(keys changed since the last backup).
// write_full lists the keys sorted, so equal maps give equal bytes; iteration (begin(), for_each) is in table order,
// which depends on the map's history (inserts, erasures, growth, restores): sort before emitting.
// Reset in place, never by assignment: a new map assigned over one in use (`map_ = TrackedMap<V>(m)`) makes the empty
// map its backup base, so divergence() measures from it and the next delta has no tombstones for the old keys: it
// no longer turns what the store holds into the current state. Erase the keys instead (collect them first: an erase
// may move entries). Assigning a map that read_full or apply_delta filled is right: it holds the stored state.
template <typename V>
class TrackedMap {
  static_assert(std::is_same_v<V, std::int64_t> || std::is_same_v<V, double>,
                "TrackedMap holds std::int64_t or double values");

  enum : std::uint8_t { kEmpty = 0, kLive = 1, kErased = 2 };
  // One table slot (32 bytes, two per cache line). The backed-up state of a changed key lives in its own slot, so an
  // update touches one slot and nothing else.
  struct Slot {
    std::uint64_t key;
    V value;
    V base;              // value at the last backup (0 if the key was absent); meaningful only when dirty
    std::uint8_t state;  // kEmpty, kLive, or kErased (absent now; kept only while dirty)
    bool dirty;          // changed since the last backup (the key is then listed in dirty_)
    bool was_present;    // present at the last backup; meaningful only when dirty
  };

 public:
  using key_type = std::uint64_t;
  using mapped_type = V;

  // Iterates the present entries as (key, value) pairs, in table order (it depends on the map's history).
  class const_iterator {
   public:
    using value_type = std::pair<std::uint64_t, V>;
    using reference = value_type;
    using pointer = void;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;
    using iterator_concept = std::forward_iterator_tag;

    const_iterator() = default;
    value_type operator*() const { return {p_->key, p_->value}; }
    const_iterator& operator++() {
      ++p_;
      skip();
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++*this;
      return t;
    }
    bool operator==(const const_iterator& o) const { return p_ == o.p_; }

   private:
    friend class TrackedMap;
    const_iterator(const Slot* p, const Slot* end) : p_(p), end_(end) { skip(); }
    void skip() {
      while (p_ != end_ && p_->state != kLive) ++p_;
    }
    const Slot* p_ = nullptr;
    const Slot* end_ = nullptr;
  };

  // An empty map, counting as backed up. Any metric (MaxAbs, L1, L2, NewKeys).
  explicit TrackedMap(Metric m);

  // v_key += delta; an absent key is inserted with value 0 first. O(1) expected.
  void add(std::uint64_t key, V delta) {
    Slot& s = find_or_insert(key);
    const V old = s.state == kLive ? s.value : V{};
    modify(s, old, old + delta);
  }
  // v_key = v (inserting the key if absent). O(1) expected.
  void set(std::uint64_t key, V v) {
    Slot& s = find_or_insert(key);
    modify(s, s.state == kLive ? s.value : V{}, v);
  }
  // The value of key, or 0 if absent.
  V get(std::uint64_t key) const {
    const Slot& s = slots_[probe(key)];
    return s.state == kLive ? s.value : V{};
  }
  bool contains(std::uint64_t key) const { return slots_[probe(key)].state == kLive; }
  // Removes key; returns false if it was absent. The removal is recorded as a tombstone in the next delta.
  bool erase(std::uint64_t key);

  // Number of keys present.
  std::size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }
  Metric metric() const { return div_.metric(); }
  const_iterator begin() const { return const_iterator(slots_.data(), slots_.data() + slots_.size()); }
  const_iterator end() const { return const_iterator(slots_.data() + slots_.size(), slots_.data() + slots_.size()); }
  // Calls f(key, value) for every present entry.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.state == kLive) f(s.key, s.value);
    }
  }
  // Makes room for n keys without rehashing.
  void reserve(std::size_t n);

  // Distance from the state at the last backup, in metric(). O(1).
  double divergence() const { return metric() == Metric::NewKeys ? static_cast<double>(new_keys_) : div_.value(); }
  // Number of keys changed, inserted or erased since the last backup: the entries of the next delta.
  std::size_t dirty_count() const { return dirty_.size(); }
  // The current state is now the backed-up state: divergence() becomes 0, the delta empty, tombstones are dropped.
  // O(dirty).
  void mark_backed_up();

  // Whole map: header (tag, version, number of keys) then the keys (u64) and their values.
  void write_full(ByteWriter& w) const;
  // Changes since the last backup: header (tag, version, number of keys after applying), then the changed or
  // inserted keys and their values, then the erased keys (tombstones). Applied to the backed-up state it reproduces
  // the current state exactly.
  void write_delta(ByteWriter& w) const;
  // Replace the contents by a write_full payload. Validates everything (counts, duplicate keys) before changing
  // anything: on FormatError the map is unchanged. Afterwards the map counts as backed up.
  void read_full(ByteReader& r);
  // Apply a write_delta payload, all-or-nothing. Besides the format it checks that the resulting number of keys is
  // the one recorded by the writer, which catches a delta applied to the wrong base state. Afterwards the map
  // counts as backed up.
  void apply_delta(ByteReader& r);
  // apply_delta in two steps, for an operator that restores several containers all or nothing without copying
  // them (a copy per delta made a recovery's chain of deltas O(chain * state)): read_delta reads and checks a
  // write_delta payload against this map (FormatError on bad input, the map unchanged), and apply_delta(const
  // Delta&) applies it to the same, unchanged map (it cannot fail) in O(keys in the delta).
  struct Delta {
    std::uint64_t keys_before = 0;  // the keys of the map read_delta checked it against (apply_delta asserts them)
    std::uint64_t keys_after = 0;
    std::vector<std::uint64_t> keys;
    std::vector<V> values;
    std::vector<std::uint64_t> erased;
  };
  Delta read_delta(ByteReader& r) const;
  void apply_delta(const Delta& d);

  // Brute-force distance to another map in metric() over the union of keys (absent = 0); for NewKeys, the number of
  // keys present here and absent in other. O(size() + other.size()).
  double distance(const TrackedMap& other) const;

 private:
  // Home slot of a key: Fibonacci hashing (multiply, keep the top bits) after folding the high half into the low.
  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  // The slot holding key, or the empty slot where it would be inserted.
  std::size_t probe(std::uint64_t key) const {
    std::size_t i = home(key);
    while (slots_[i].state != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    return i;
  }
  // The slot holding key; a missing key is inserted as absent (kErased, clean) for modify() to bring to life.
  Slot& find_or_insert(std::uint64_t key) {
    std::size_t i = probe(key);
    if (slots_[i].state != kEmpty) return slots_[i];
    if (4 * (used_ + 1) > 3 * slots_.size()) [[unlikely]] {
      rehash(slots_.size() * 2);
      i = probe(key);
    }
    ++used_;
    slots_[i] = Slot{key, V{}, V{}, kErased, false, false};
    return slots_[i];
  }
  // Slot s goes from old to now (and becomes present).
  void modify(Slot& s, V old, V now) {
    // A key erased since the backup, and absent at it, comes back (a fresh slot is not dirty yet).
    if (s.dirty && s.state == kErased && !s.was_present) --erased_new_;
    if (!s.dirty) {
      s.dirty = true;
      s.base = old;
      s.was_present = s.state == kLive;
      dirty_.push_back(s.key);
    }
    if (s.state != kLive) {
      s.state = kLive;
      ++live_;
      if (!s.was_present) ++new_keys_;
    }
    s.value = now;
    div_.change(s.base, old, now);
    if (div_.drifted()) [[unlikely]]
      recompute();
  }
  void rehash(std::size_t capacity);
  void remove_at(std::size_t i);
  // Drops the tombstones of keys absent at the last backup (from the table and from dirty_). O(dirty).
  void drop_erased_new_keys();
  void recompute();
  static std::uint16_t tag();

  std::vector<Slot> slots_;           // capacity is a power of two
  std::size_t mask_ = 0;              // capacity - 1
  int shift_ = 64;                    // 64 - log2(capacity)
  std::size_t used_ = 0;              // occupied slots (present keys and tombstones)
  std::size_t live_ = 0;              // present keys
  std::vector<std::uint64_t> dirty_;  // keys changed, inserted or erased since the last backup, in first-change order
  std::size_t new_keys_ = 0;
  std::size_t erased_new_ = 0;  // tombstones of keys absent at the last backup (they need no delta entry)
  detail::DivergenceTracker<V> div_;
};

extern template class TrackedMap<std::int64_t>;
extern template class TrackedMap<double>;

}  // namespace afs
