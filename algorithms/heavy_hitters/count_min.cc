// Count-Min sketch: construction, sizing helpers, merge, Theorem 2 compensation and the versioned binary snapshot.
#include "algorithms/heavy_hitters/count_min.h"

#include <xxhash.h>

#include <cmath>
#include <numbers>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"

namespace afs::hh {

namespace {

// Returns an empty string if (width, depth) is a valid shape, otherwise a message naming the bad parameter.
std::string shape_problem(std::size_t width, std::size_t depth) {
  if (width == 0) return "width must be positive (got 0)";
  if (depth == 0) return "depth must be positive (got 0)";
  if (width > CountMinHash::kMaxWidth) {
    return "width " + std::to_string(width) + " exceeds the maximum " + std::to_string(CountMinHash::kMaxWidth);
  }
  if (depth > CountMinHash::kMaxDepth) {
    return "depth " + std::to_string(depth) + " exceeds the maximum " + std::to_string(CountMinHash::kMaxDepth);
  }
  if (width * depth > CountMinHash::kMaxCounters) {
    return "width * depth = " + std::to_string(width * depth) + " exceeds the maximum of " +
           std::to_string(CountMinHash::kMaxCounters) + " counters";
  }
  return {};
}

}  // namespace

CountMinHash::CountMinHash(std::size_t width, std::size_t depth, std::uint64_t seed)
    : width_(width), depth_(depth), seed_(seed) {
  if (auto problem = shape_problem(width, depth); !problem.empty()) throw ConfigError("CountMin: " + problem);
  // A splitmix64 sequence started at the seed supplies the key salt and each row's (odd multiplier, addend).
  std::uint64_t state = seed;
  auto next = [&state] { return internal::mix64(state += 0x9e3779b97f4a7c15ULL); };
  key_salt_ = next();
  rows_.resize(depth);
  for (Row& r : rows_) {
    r.mul = next() | 1;
    r.add = next();
  }
}

std::size_t CountMin::width_for_epsilon(double epsilon) {
  if (!(epsilon > 0.0 && epsilon < 1.0)) {
    throw ConfigError("CountMin: epsilon must be in (0, 1) (got " + readable_text(epsilon) + ")");
  }
  const double w = std::ceil(std::numbers::e / epsilon);
  if (w > static_cast<double>(CountMinHash::kMaxWidth)) {
    throw ConfigError("CountMin: epsilon " + readable_text(epsilon) + " needs a width above the maximum " +
                      std::to_string(CountMinHash::kMaxWidth));
  }
  return static_cast<std::size_t>(w);
}

std::size_t CountMin::depth_for_delta(double delta) {
  if (!(delta > 0.0 && delta < 1.0)) {
    throw ConfigError("CountMin: delta must be in (0, 1) (got " + readable_text(delta) + ")");
  }
  const double r = std::ceil(std::log(1.0 / delta));
  if (r > static_cast<double>(CountMinHash::kMaxDepth)) {
    throw ConfigError("CountMin: delta " + readable_text(delta) + " needs a depth above the maximum " +
                      std::to_string(CountMinHash::kMaxDepth));
  }
  return r < 1.0 ? 1 : static_cast<std::size_t>(r);
}

CountMin CountMin::from_error(double epsilon, double delta, std::uint64_t seed) {
  return CountMin(width_for_epsilon(epsilon), depth_for_delta(delta), seed);
}

CountMin::CountMin(std::size_t width, std::size_t depth, std::uint64_t seed)
    : hash_(width, depth, seed), counters_(width * depth, 0) {}

CountMin::CountMin(CountMinHash hash, std::int64_t total, std::vector<std::int64_t> counters)
    : hash_(std::move(hash)), total_(total), counters_(std::move(counters)) {}

void CountMin::merge(const CountMin& other) {
  if (!(hash_ == other.hash_)) {
    throw ConfigError("CountMin::merge: sketches differ in shape or seed (width " + std::to_string(width()) + " vs " +
                      std::to_string(other.width()) + ", depth " + std::to_string(depth()) + " vs " +
                      std::to_string(other.depth()) + ", seed " + std::to_string(seed()) + " vs " +
                      std::to_string(other.seed()) + ")");
  }
  for (std::size_t i = 0; i < counters_.size(); ++i) counters_[i] += other.counters_[i];
  total_ += other.total_;
}

void CountMin::add_to_all(std::int64_t c) {
  for (auto& v : counters_) v += c;
}

double CountMin::epsilon() const { return std::numbers::e / static_cast<double>(width()); }

double CountMin::delta() const { return std::exp(-static_cast<double>(depth())); }

void CountMin::serialize(ByteWriter& out) const {
  const std::size_t start = out.size();
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<std::uint64_t>(width());
  out.put<std::uint64_t>(depth());
  out.put<std::uint64_t>(seed());
  out.put<std::int64_t>(total_);
  out.put_array<std::int64_t>(counters_);
  const std::uint64_t checksum = XXH3_64bits(out.buffer().data() + start, out.size() - start);
  out.put<std::uint64_t>(checksum);
}

CountMin CountMin::deserialize(ByteReader& in) {
  const std::span<const std::uint8_t> record = in.rest();
  const std::size_t start = in.position();

  const auto tag = in.get<std::uint32_t>("CountMin tag");
  if (tag != kTag)
    throw FormatError("CountMin snapshot: wrong tag " + std::to_string(tag) + " (not a Count-Min sketch)");
  const auto version = in.get<std::uint16_t>("CountMin format version");
  if (version != kVersion) {
    throw FormatError("CountMin snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  const auto flags = in.get<std::uint16_t>("CountMin flags");
  if (flags != 0) throw FormatError("CountMin snapshot: unknown flags " + std::to_string(flags));
  const auto width = in.get<std::uint64_t>("CountMin width");
  const auto depth = in.get<std::uint64_t>("CountMin depth");
  if (auto problem = shape_problem(width, depth); !problem.empty()) {
    throw FormatError("CountMin snapshot: invalid shape: " + problem);
  }
  const auto seed = in.get<std::uint64_t>("CountMin seed");
  const auto total = in.get<std::int64_t>("CountMin total count");
  auto counters = in.get_array<std::int64_t>("CountMin counters");
  if (counters.size() != width * depth) {
    throw FormatError("CountMin snapshot: " + std::to_string(counters.size()) + " counters for a " +
                      std::to_string(width) + " x " + std::to_string(depth) + " sketch");
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  const auto stored = in.get<std::uint64_t>("CountMin checksum");
  if (stored != computed) throw FormatError("CountMin snapshot: checksum mismatch (corrupt data)");

  return CountMin(CountMinHash(width, depth, seed), total, std::move(counters));
}

}  // namespace afs::hh
