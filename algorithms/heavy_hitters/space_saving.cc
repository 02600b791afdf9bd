// Space-Saving: the min-heap of monitored keys, replacement, mergeable-summary merge and the binary form.
#include "algorithms/heavy_hitters/space_saving.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"

namespace afs::hh {

namespace {
// The entries in increasing key order: the canonical order of the serialized form (equal summaries, equal bytes,
// whatever the heap's history). An LSD radix sort on the key's bytes that skips the bytes every key shares: a full
// snapshot of a summary is written often (each operator backup chain restarts from one), and a comparison sort of
// its entries was 6% of Space-Saving's approx-mode time (perf).
std::vector<SpaceSaving::Entry> sorted_by_key(const std::vector<SpaceSaving::Entry>& in) {
  std::vector<SpaceSaving::Entry> a = in, b(in.size());
  for (int shift = 0; shift < 64; shift += 8) {
    std::size_t count[257] = {};
    for (const auto& e : a) ++count[((e.key >> shift) & 0xFF) + 1];
    if (std::find(count + 1, count + 257, a.size()) != count + 257) continue;  // one value: already in order
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (const auto& e : a) b[count[(e.key >> shift) & 0xFF]++] = e;
    a.swap(b);
  }
  return a;
}
}  // namespace

SpaceSaving::SpaceSaving(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0 || capacity > kMaxCapacity) {
    throw ConfigError("SpaceSaving: capacity must be in [1, " + std::to_string(kMaxCapacity) + "] (got " +
                      std::to_string(capacity) + ")");
  }
  heap_.reserve(capacity);
}

std::size_t SpaceSaving::capacity_for_error(double epsilon) {
  if (!(epsilon > 0 && epsilon < 1)) {
    throw ConfigError("SpaceSaving: epsilon must be in (0, 1) (got " + readable_text(epsilon) + ")");
  }
  const double k = std::ceil(1 / epsilon);
  if (k > static_cast<double>(kMaxCapacity)) {
    throw ConfigError("SpaceSaving: epsilon " + readable_text(epsilon) + " needs more than " +
                      std::to_string(kMaxCapacity) + " counters");
  }
  return static_cast<std::size_t>(k);
}

const std::uint32_t* SpaceSaving::KeyIndex::find(std::uint64_t key) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(key);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.used) return nullptr;
    if (s.key == key) return &s.pos;
  }
}

void SpaceSaving::KeyIndex::set(std::uint64_t key, std::size_t pos) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(key);; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used) {
      s = {key, static_cast<std::uint32_t>(pos), 1};
      ++size_;
      return;
    }
    if (s.key == key) {
      s.pos = static_cast<std::uint32_t>(pos);
      return;
    }
  }
}

void SpaceSaving::KeyIndex::erase(std::uint64_t key) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(key);
  for (;; i = (i + 1) & mask) {
    if (!slots_[i].used) return;
    if (slots_[i].key == key) break;
  }
  // Backward shift: move later members of the probe run into the hole when their home does not lie in (hole, j].
  for (std::size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
    const std::size_t h = home(slots_[j].key);
    const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].used = 0;
  --size_;
}

void SpaceSaving::KeyIndex::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

void SpaceSaving::KeyIndex::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  --shift_;
  size_ = 0;
  for (const Slot& s : old) {
    if (s.used) set(s.key, s.pos);
  }
}

void SpaceSaving::place(std::size_t i) { index_.set(heap_[i].key, i); }

void SpaceSaving::sift_up(std::size_t i) {
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!less(heap_[i], heap_[parent])) break;
    std::swap(heap_[parent], heap_[i]);
    place(i);
    i = parent;
  }
  place(i);
}

void SpaceSaving::sift_down(std::size_t i) {
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t l = 2 * i + 1, r = l + 1;
    std::size_t smallest = i;
    if (l < n && less(heap_[l], heap_[smallest])) smallest = l;
    if (r < n && less(heap_[r], heap_[smallest])) smallest = r;
    if (smallest == i) break;
    std::swap(heap_[smallest], heap_[i]);
    place(i);
    i = smallest;
  }
  place(i);
}

void SpaceSaving::fix(std::size_t i) {
  if (i > 0 && less(heap_[i], heap_[(i - 1) / 2])) {
    sift_up(i);
  } else {
    sift_down(i);
  }
}

void SpaceSaving::insert(const Entry& e) {
  heap_.push_back(e);
  sift_up(heap_.size() - 1);
}

std::optional<std::uint64_t> SpaceSaving::update(std::uint64_t key, std::int64_t weight) {
  if (weight < 0) throw std::invalid_argument("SpaceSaving::update: negative weight " + std::to_string(weight));
  total_ += weight;
  if (const auto* pos = index_.find(key)) {
    Entry& e = heap_[*pos];
    e.count += weight;
    sift_down(*pos);  // counts only grow: the entry can only move down a min-heap
    return std::nullopt;
  }
  if (heap_.size() < capacity_) {
    insert({key, floor_ + weight, floor_});
    return std::nullopt;
  }
  // Replace the minimum: the newcomer inherits its count as error.
  Entry& min = heap_.front();
  const std::uint64_t evicted = min.key;
  index_.erase(evicted);
  const std::int64_t c = min.count;
  min = {key, c + weight, c};
  sift_down(0);
  return evicted;
}

void SpaceSaving::add_to_all(std::int64_t c) {
  if (c < 0) throw std::invalid_argument("SpaceSaving::add_to_all: negative amount " + std::to_string(c));
  for (Entry& e : heap_) {  // a uniform shift keeps the heap order
    e.count += c;
    e.error += c;
  }
  floor_ += c;
}

std::optional<SpaceSaving::Entry> SpaceSaving::find(std::uint64_t key) const {
  const auto* pos = index_.find(key);
  if (!pos) return std::nullopt;
  return heap_[*pos];
}

void SpaceSaving::assign(const Entry& e) {
  if (e.error < 0 || e.error > e.count) {
    throw std::invalid_argument("SpaceSaving::assign: key " + std::to_string(e.key) + " has error " +
                                std::to_string(e.error) + " outside [0, count " + std::to_string(e.count) + "]");
  }
  if (const auto* pos = index_.find(e.key)) {
    const std::size_t i = *pos;
    heap_[i] = e;
    fix(i);
    return;
  }
  if (heap_.size() >= capacity_) throw std::invalid_argument("SpaceSaving::assign: the summary is full");
  insert(e);
}

void SpaceSaving::erase(std::uint64_t key) {
  const auto* pos = index_.find(key);
  if (!pos) return;
  const std::size_t i = *pos;
  index_.erase(key);
  const std::size_t last = heap_.size() - 1;
  if (i != last) {
    heap_[i] = heap_[last];
    heap_.pop_back();
    fix(i);
  } else {
    heap_.pop_back();
  }
}

void SpaceSaving::set_totals(std::int64_t total, std::int64_t floor) {
  total_ = total;
  floor_ = floor;
}

std::int64_t SpaceSaving::upper_bound(std::uint64_t key) const {
  const auto* pos = index_.find(key);
  return pos ? heap_[*pos].count : min_count();
}

std::int64_t SpaceSaving::lower_bound(std::uint64_t key) const {
  const auto* pos = index_.find(key);
  return pos ? heap_[*pos].count - heap_[*pos].error : 0;
}

std::vector<SpaceSaving::Entry> SpaceSaving::top(std::size_t k) const {
  std::vector<Entry> v = heap_;
  std::sort(v.begin(), v.end(),
            [](const Entry& a, const Entry& b) { return a.count != b.count ? a.count > b.count : a.key < b.key; });
  if (v.size() > k) v.resize(k);
  return v;
}

void SpaceSaving::merge(const SpaceSaving& other) {
  const std::int64_t m1 = min_count(), m2 = other.min_count();
  std::unordered_map<std::uint64_t, Entry> all;
  for (const Entry& e : heap_) all[e.key] = {e.key, e.count + m2, e.error + m2};
  for (const Entry& e : other.heap_) {
    auto [it, fresh] = all.try_emplace(e.key, Entry{e.key, e.count + m1, e.error + m1});
    if (!fresh) {  // in both: the counts and errors add (undo the charge for "missing from other")
      it->second.count += e.count - m2;
      it->second.error += e.error - m2;
    }
  }
  std::vector<Entry> v;
  v.reserve(all.size());
  for (auto& [k, e] : all) v.push_back(e);
  std::sort(v.begin(), v.end(),
            [](const Entry& a, const Entry& b) { return a.count != b.count ? a.count > b.count : a.key < b.key; });
  if (v.size() > capacity_) v.resize(capacity_);
  total_ += other.total_;
  floor_ = m1 + m2;
  heap_.clear();
  index_.clear();
  for (const Entry& e : v) insert(e);
}

void SpaceSaving::serialize(ByteWriter& out, EntryOrder order) const {
  const std::size_t start = out.size();
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<std::uint64_t>(capacity_);
  out.put<std::int64_t>(total_);
  out.put<std::int64_t>(floor_);
  static_assert(sizeof(Entry) == 3 * sizeof(std::uint64_t));  // key, count, error: written as they lie in memory
  if (order == EntryOrder::ByKey) {
    out.put_array<Entry>(sorted_by_key(heap_));
  } else {
    out.put_array<Entry>(heap_);
  }
  out.put<std::uint64_t>(XXH3_64bits(out.buffer().data() + start, out.size() - start));
}

SpaceSaving SpaceSaving::deserialize(ByteReader& in) {
  const auto record = in.rest();
  const std::size_t start = in.position();
  if (in.get<std::uint32_t>("SpaceSaving tag") != kTag) throw FormatError("SpaceSaving snapshot: wrong tag");
  const auto version = in.get<std::uint16_t>("SpaceSaving format version");
  if (version != kVersion && version != 1) {
    throw FormatError("SpaceSaving snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  if (in.get<std::uint16_t>("SpaceSaving flags") != 0) throw FormatError("SpaceSaving snapshot: unknown flags");
  const auto capacity = in.get<std::uint64_t>("SpaceSaving capacity");
  if (capacity == 0 || capacity > kMaxCapacity) {
    throw FormatError("SpaceSaving snapshot: capacity " + std::to_string(capacity) + " out of range");
  }
  const auto total = in.get<std::int64_t>("SpaceSaving total");
  const std::int64_t floor = version >= 2 ? in.get<std::int64_t>("SpaceSaving floor") : 0;
  if (floor < 0) throw FormatError("SpaceSaving snapshot: negative floor");
  const auto n = in.get<std::uint64_t>("SpaceSaving entry count");
  if (n > capacity) {
    throw FormatError("SpaceSaving snapshot: " + std::to_string(n) + " entries for capacity " +
                      std::to_string(capacity));
  }
  SpaceSaving s(capacity);
  for (std::uint64_t i = 0; i < n; ++i) {
    Entry e;
    e.key = in.get<std::uint64_t>("SpaceSaving key");
    e.count = in.get<std::int64_t>("SpaceSaving count");
    e.error = in.get<std::int64_t>("SpaceSaving error");
    if (e.error < 0 || e.error > e.count) throw FormatError("SpaceSaving snapshot: an entry's error exceeds its count");
    if (s.monitored(e.key)) throw FormatError("SpaceSaving snapshot: key " + std::to_string(e.key) + " twice");
    s.insert(e);
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  if (in.get<std::uint64_t>("SpaceSaving checksum") != computed) {
    throw FormatError("SpaceSaving snapshot: checksum mismatch (corrupt data)");
  }
  s.total_ = total;
  s.floor_ = floor;
  return s;
}

}  // namespace afs::hh
