// TrackedVector: dense updates, serialization, backup bookkeeping and brute-force distance (DESIGN.md section 3).
#include "afstream/state/tracked_vector.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/prefetch.h"
#include "afstream/state/container_format.h"

namespace afs {
namespace {

constexpr std::uint16_t kFullTag = detail::kTagVector | detail::kTagFull;
constexpr std::uint16_t kDeltaTag = detail::kTagVector | detail::kTagDelta;
constexpr std::uint8_t kDeltaSparse = 0;
constexpr std::uint8_t kDeltaFullCopy = 1;
constexpr std::uint8_t kDeltaBitmap = 2;
constexpr std::size_t kMaxEntries = 0xFFFFFFFEu;  // indices are u32 (a delta's, the list of changed entries)

std::size_t checked_size(std::size_t n, Metric m) {
  if (m != Metric::L2) {
    throw ConfigError(std::string("TrackedVector tracks the l2 divergence only, not ") + to_string(m));
  }
  if (n > kMaxEntries) {
    throw ConfigError("TrackedVector size " + std::to_string(n) + " exceeds the limit of " +
                      std::to_string(kMaxEntries) + " entries");
  }
  return n;
}

// A u64-counted array of n doubles, in place in the payload: a full copy is applied straight from it (a copy into a
// vector of its own first cost a restore of the KDD-like learner a 2 MB allocation, its page faults and a pass).
ArrayView<double> get_values(ByteReader& r, std::uint64_t n, const char* what) {
  const auto values = r.get_array_view<double>(what);
  if (values.size() != n) {
    throw FormatError(std::string(what) + ": expected " + std::to_string(n) + " values but " +
                      std::to_string(values.size()) + " follow");
  }
  return values;
}

// The sparse regime's delta after its header. When the indices of the changed entries would take more room than a
// bit per entry, the bitmap and the values in index order (gathered in one sweep over the vector instead of at
// scattered places); else the indices, in the order of their first change, and their values. `pairs` is the stored
// layout (each weight followed by its backed-up value); visit(pair) follows each entry's write (backup_delta: the
// backed-up value becomes the weight, while the line is in the cache).
template <typename Double, typename Visit>
void put_changed(ByteWriter& w, Double* pairs, const std::vector<std::uint64_t>& bits,
                 const std::vector<std::uint32_t>& changed, Visit visit) {
  auto& buf = w.buffer();
  const std::size_t words = bits.size();
  const bool bitmap = changed.size() * sizeof(std::uint32_t) > words * sizeof(std::uint64_t);
  buf.reserve(buf.size() + 17 + (bitmap ? words * sizeof(std::uint64_t) : changed.size() * sizeof(std::uint32_t)) +
              changed.size() * sizeof(double));
  w.put<std::uint8_t>(bitmap ? kDeltaBitmap : kDeltaSparse);
  if (bitmap) {
    w.put_array<std::uint64_t>(bits);
  } else {
    w.put_array<std::uint32_t>(changed);
  }
  w.put<std::uint64_t>(changed.size());
  const std::size_t at = buf.size();
  buf.resize(at + changed.size() * sizeof(double));
  std::uint8_t* out = buf.data() + at;
  const auto put = [&](Double* pair) {
    const double x = pair[0];
    std::memcpy(out, &x, sizeof x);
    out += sizeof x;
    visit(pair);
  };
  if (bitmap) {
    for (std::size_t k = 0; k < words; ++k) {
      for (std::uint64_t b = bits[k]; b != 0; b &= b - 1) put(pairs + 2 * (k * 64 + std::countr_zero(b)));
    }
    return;
  }
  constexpr std::size_t kAhead = 16;  // scattered entries: start the misses well ahead of the reads
  for (std::size_t k = 0; k < changed.size(); ++k) {
    if (k + kAhead < changed.size()) afs::prefetch(pairs + 2 * std::size_t{changed[k + kAhead]});
    put(pairs + 2 * std::size_t{changed[k]});
  }
}

}  // namespace

// All zero, weights and backed-up values alike: the storage's own zero-initialization, without a vector of zeros to
// copy in (a restarted worker builds its operator before it restores: three passes over the KDD-like sink's 8 MB).
TrackedVector::TrackedVector(std::size_t n, Metric m)
    : n_(checked_size(n, m)), data_(2 * n_), changed_bits_((n_ + 63) / 64, 0), div_(m) {}

TrackedVector::TrackedVector(const Eigen::VectorXd& initial, Metric m)
    : n_(checked_size(static_cast<std::size_t>(initial.size()), m)),
      data_(2 * n_),
      changed_bits_((n_ + 63) / 64, 0),
      div_(m) {
  weights() = initial;
  backup() = initial;
}

void TrackedVector::clear_changed() {
  if (changed_.size() > changed_bits_.size()) {
    std::fill(changed_bits_.begin(), changed_bits_.end(), 0);
  } else {
    for (const std::uint32_t i : changed_) changed_bits_[i >> 6] = 0;
  }
  changed_.clear();
}

void TrackedVector::enter_dense() {
  clear_changed();
  dense_ = true;
}

void TrackedVector::add_dense(const Eigen::VectorXd& d) {
  if (d.size() != static_cast<Eigen::Index>(n_)) {
    throw std::invalid_argument("TrackedVector::add_dense: update has " + std::to_string(d.size()) +
                                " entries but the vector has " + std::to_string(n_));
  }
  if (untracked_) {
    weights() += d;
    return;
  }
  if (!dense_) {
    const auto nonzero = static_cast<std::size_t>((d.array() != 0.0).count());
    if (2 * (changed_.size() + nonzero) <= size()) {
      for (Eigen::Index i = 0; i < d.size(); ++i) {
        if (d[i] != 0.0) add(static_cast<std::size_t>(i), d[i]);
      }
      return;
    }
    enter_dense();
  }
  weights() += d;
  div_.set_sum((values() - backup()).squaredNorm());
}

void TrackedVector::recompute() {
  if (dense_) {
    div_.set_sum((values() - backup()).squaredNorm());
    return;
  }
  div_.reset_sum();
  for (const std::uint32_t i : changed_) div_.accumulate(data_[2 * std::size_t{i} + 1], data_[2 * std::size_t{i}]);
}

void TrackedVector::stop_tracking() {
  if (!untracked_) {  // the weights alone from now on
    std::vector<double> w(n_);
    for (std::size_t i = 0; i < n_; ++i) w[i] = data_[2 * i];
    data_ = std::move(w);
    shift_ = 0;
  }
  untracked_ = true;
  dense_ = false;
  changed_bits_ = {};
  changed_ = {};
  div_.reset();
}

void TrackedVector::mark_backed_up() {
  if (untracked_) return;
  if (dense_) {
    backup() = values();
    dense_ = false;
  } else {
    constexpr std::size_t kAhead = 16;  // scattered entries: start the misses well ahead of the copies
    double* const data = data_.data();
    for (std::size_t k = 0; k < changed_.size(); ++k) {
      if (k + kAhead < changed_.size()) afs::prefetch(data + 2 * std::size_t{changed_[k + kAhead]});
      double* const pair = data + 2 * std::size_t{changed_[k]};
      pair[1] = pair[0];
    }
    clear_changed();
  }
  div_.reset();
}

// The n weights as put_array writes an array (u64 count, then the values), gathered from the stored layout.
void TrackedVector::put_weights(ByteWriter& w) const {
  if (shift_ == 0) {
    w.put_array<double>(std::span<const double>(data_.data(), n_));
  } else {
    detail::put_array_gathered<double>(w, detail::StridedValues<double>{data_.data(), shift_, n_});
  }
}

void TrackedVector::write_full(ByteWriter& w) const {
  detail::write_container_header(w, kFullTag, size());
  put_weights(w);
}

void TrackedVector::write_empty_delta(ByteWriter& w) const {
  detail::write_container_header(w, kDeltaTag, size());
  w.put<std::uint8_t>(kDeltaSparse);
  w.put_array<std::uint32_t>(std::span<const std::uint32_t>());
  w.put<std::uint64_t>(0);
}

void TrackedVector::write_delta(ByteWriter& w) const {
  detail::write_container_header(w, kDeltaTag, size());
  if (full_copy_delta()) {
    w.put<std::uint8_t>(kDeltaFullCopy);
    put_weights(w);
    return;
  }
  put_changed(w, data_.data(), changed_bits_, changed_, [](const double*) {});
}

void TrackedVector::backup_delta(ByteWriter& w) {
  if (full_copy_delta()) {
    write_delta(w);
    mark_backed_up();
    return;
  }
  detail::write_container_header(w, kDeltaTag, size());
  put_changed(w, data_.data(), changed_bits_, changed_, [](double* pair) { pair[1] = pair[0]; });
  clear_changed();
  div_.reset();
}

void TrackedVector::read_full(ByteReader& r) { apply_delta(read_full_values(r)); }

TrackedVector::Delta TrackedVector::read_full_values(ByteReader& r) const {
  const char* what = detail::container_tag_name(kFullTag);
  const std::uint64_t n = detail::read_container_header(r, kFullTag);
  if (n != size()) {
    throw FormatError(std::string(what) + ": holds " + std::to_string(n) + " entries but this vector has " +
                      std::to_string(size()));
  }
  Delta d;
  d.full_copy = true;
  d.entries = get_values(r, n, what);
  return d;
}

void TrackedVector::apply_delta(ByteReader& r) { apply_delta(read_delta(r)); }

TrackedVector::Delta TrackedVector::read_delta(ByteReader& r) const {
  const char* what = detail::container_tag_name(kDeltaTag);
  const std::uint64_t n = detail::read_container_header(r, kDeltaTag);
  if (n != size()) {
    throw FormatError(std::string(what) + ": written for " + std::to_string(n) + " entries but this vector has " +
                      std::to_string(size()));
  }
  Delta d;
  const auto mode = r.get<std::uint8_t>("TrackedVector delta mode");
  if (mode == kDeltaFullCopy) {
    d.full_copy = true;
    d.entries = get_values(r, n, what);
    return d;
  }
  if (mode == kDeltaBitmap) {
    d.bits = r.get_array_view<std::uint64_t>(what);
    const std::size_t words = (n + 63) / 64;
    if (d.bits.size() != words) {
      throw FormatError(std::string(what) + ": " + std::to_string(d.bits.size()) + " words of changed-entry bits for " +
                        std::to_string(n) + " entries (expected " + std::to_string(words) + ")");
    }
    d.entries = r.get_array_view<double>(what);
    // Checked by counting: apply_delta walks the bits themselves (a list of their indices cost a KDD-like learner's
    // restore a quarter of its time).
    std::size_t set = 0;
    for (std::size_t k = 0; k < words; ++k) set += static_cast<std::size_t>(std::popcount(d.bits[k]));
    if (const std::size_t used = n % 64; used != 0) {  // the bits of the last word past entry n - 1
      if (const std::uint64_t past = d.bits[words - 1] >> used; past != 0) {
        throw FormatError(std::string(what) + ": changed-entry bit " +
                          std::to_string(n + static_cast<std::size_t>(std::countr_zero(past))) +
                          " out of range (size " + std::to_string(n) + ")");
      }
    }
    if (set != d.entries.size()) {
      throw FormatError(std::string(what) + ": " + std::to_string(set) + " changed-entry bits but " +
                        std::to_string(d.entries.size()) + " values");
    }
    return d;
  }
  if (mode != kDeltaSparse) {
    throw FormatError(std::string(what) + ": unknown delta mode " + std::to_string(mode) +
                      " (expected 0 = sparse, 1 = full copy or 2 = bitmap)");
  }
  d.indices = r.get_array_view<std::uint32_t>(what);
  d.entries = r.get_array_view<double>(what);
  if (d.indices.size() != d.entries.size()) {
    throw FormatError(std::string(what) + ": " + std::to_string(d.indices.size()) + " indices but " +
                      std::to_string(d.entries.size()) + " values");
  }
  for (std::size_t k = 0; k < d.indices.size(); ++k) {
    if (const std::uint32_t i = d.indices[k]; i >= n) {
      throw FormatError(std::string(what) + ": entry index " + std::to_string(i) + " out of range (size " +
                        std::to_string(n) + ")");
    }
  }
  return d;
}

void TrackedVector::apply_delta(Delta&& d) {
  if (d.full_copy) {
    assert(d.entries.size() == n_);
    double* const data = data_.data();
    if (untracked_) {
      d.entries.copy_to(std::span<double>(data, n_));
    } else {
      for (std::size_t i = 0; i < n_; ++i) data[2 * i] = data[2 * i + 1] = d.entries[i];
      clear_changed();
      dense_ = false;
      div_.reset();
    }
    return;
  }
  double* const data = data_.data();
  const unsigned shift = shift_;
  if (!d.bits.empty()) {  // in index order: a sweep, no prefetch needed
    std::size_t k = 0;
    for (std::size_t w = 0; w < d.bits.size(); ++w) {
      for (std::uint64_t b = d.bits[w]; b != 0; b &= b - 1, ++k) {
        double* const slot = data + ((w * 64 + static_cast<std::size_t>(std::countr_zero(b))) << shift);
        slot[0] = d.entries[k];
        if (!untracked_) slot[1] = d.entries[k];
      }
    }
    assert(k == d.entries.size());
    mark_backed_up();
    return;
  }
  assert(d.indices.size() == d.entries.size());
  // The indices are scattered over the vector (4 MB for 2^18 weights and their backed-up values): prefetch ahead of
  // the stores. Each entry is set, with its backed-up value while tracking.
  constexpr std::size_t kAhead = 16;
  for (std::size_t k = 0; k < d.indices.size(); ++k) {
    if (k + kAhead < d.indices.size()) afs::prefetch(data + (std::size_t{d.indices[k + kAhead]} << shift));
    double* const slot = data + (std::size_t{d.indices[k]} << shift);
    slot[0] = d.entries[k];
    if (!untracked_) slot[1] = d.entries[k];
  }
  mark_backed_up();  // the entries changed before the delta count as backed up too
}

double TrackedVector::distance(const TrackedVector& other) const {
  if (other.size() != size()) {
    throw std::invalid_argument("TrackedVector::distance: sizes differ (" + std::to_string(size()) + " vs " +
                                std::to_string(other.size()) + ")");
  }
  return (values() - other.values()).norm();
}

}  // namespace afs
