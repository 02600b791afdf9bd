// Space-Saving: the min-heap of monitored keys, replacement, mergeable-summary merge and the binary form.
#include "algorithms/heavy_hitters/space_saving.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "afstream/core/errors.h"

namespace afs::hh {

SpaceSaving::SpaceSaving(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0 || capacity > kMaxCapacity) {
    throw ConfigError("SpaceSaving: capacity must be in [1, " + std::to_string(kMaxCapacity) + "] (got " +
                      std::to_string(capacity) + ")");
  }
  heap_.reserve(capacity);
}

std::size_t SpaceSaving::capacity_for_error(double epsilon) {
  if (!(epsilon > 0 && epsilon < 1)) {
    throw ConfigError("SpaceSaving: epsilon must be in (0, 1) (got " + std::to_string(epsilon) + ")");
  }
  const double k = std::ceil(1 / epsilon);
  if (k > static_cast<double>(kMaxCapacity)) {
    throw ConfigError("SpaceSaving: epsilon " + std::to_string(epsilon) + " needs more than " +
                      std::to_string(kMaxCapacity) + " counters");
  }
  return static_cast<std::size_t>(k);
}

void SpaceSaving::place(std::size_t i) { index_[heap_[i].key] = i; }

void SpaceSaving::sift_up(std::size_t i) {
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (heap_[parent].count <= heap_[i].count) break;
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
    if (l < n && heap_[l].count < heap_[smallest].count) smallest = l;
    if (r < n && heap_[r].count < heap_[smallest].count) smallest = r;
    if (smallest == i) break;
    std::swap(heap_[smallest], heap_[i]);
    place(i);
    i = smallest;
  }
  place(i);
}

void SpaceSaving::insert(const Entry& e) {
  heap_.push_back(e);
  sift_up(heap_.size() - 1);
}

void SpaceSaving::update(std::uint64_t key, std::int64_t weight) {
  if (weight < 0) throw std::invalid_argument("SpaceSaving::update: negative weight " + std::to_string(weight));
  total_ += weight;
  if (auto it = index_.find(key); it != index_.end()) {
    heap_[it->second].count += weight;
    sift_down(it->second);  // counts only grow: the entry can only move down a min-heap
    return;
  }
  if (heap_.size() < capacity_) {
    insert({key, weight, 0});
    return;
  }
  // Replace the minimum: the newcomer inherits its count as error.
  Entry& min = heap_.front();
  index_.erase(min.key);
  const std::int64_t c = min.count;
  min = {key, c + weight, c};
  sift_down(0);
}

std::int64_t SpaceSaving::upper_bound(std::uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? min_count() : heap_[it->second].count;
}

std::int64_t SpaceSaving::lower_bound(std::uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? 0 : heap_[it->second].count - heap_[it->second].error;
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
  heap_.clear();
  index_.clear();
  for (const Entry& e : v) insert(e);
}

void SpaceSaving::serialize(ByteWriter& out) const {
  const std::size_t start = out.size();
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<std::uint64_t>(capacity_);
  out.put<std::int64_t>(total_);
  const auto v = entries();
  out.put<std::uint64_t>(v.size());
  for (const Entry& e : v) {
    out.put<std::uint64_t>(e.key);
    out.put<std::int64_t>(e.count);
    out.put<std::int64_t>(e.error);
  }
  out.put<std::uint64_t>(XXH3_64bits(out.buffer().data() + start, out.size() - start));
}

SpaceSaving SpaceSaving::deserialize(ByteReader& in) {
  const auto record = in.rest();
  const std::size_t start = in.position();
  if (in.get<std::uint32_t>("SpaceSaving tag") != kTag) throw FormatError("SpaceSaving snapshot: wrong tag");
  const auto version = in.get<std::uint16_t>("SpaceSaving format version");
  if (version != kVersion) {
    throw FormatError("SpaceSaving snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  if (in.get<std::uint16_t>("SpaceSaving flags") != 0) throw FormatError("SpaceSaving snapshot: unknown flags");
  const auto capacity = in.get<std::uint64_t>("SpaceSaving capacity");
  if (capacity == 0 || capacity > kMaxCapacity) {
    throw FormatError("SpaceSaving snapshot: capacity " + std::to_string(capacity) + " out of range");
  }
  const auto total = in.get<std::int64_t>("SpaceSaving total");
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
    if (s.index_.count(e.key)) throw FormatError("SpaceSaving snapshot: key " + std::to_string(e.key) + " twice");
    s.insert(e);
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  if (in.get<std::uint64_t>("SpaceSaving checksum") != computed) {
    throw FormatError("SpaceSaving snapshot: checksum mismatch (corrupt data)");
  }
  s.total_ = total;
  return s;
}

}  // namespace afs::hh
