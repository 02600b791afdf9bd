// HyperLogLog: hashing, the estimator with its small-range correction, merge and the checksummed binary form.
#include "algorithms/distinct/hyperloglog.h"

#include <xxhash.h>

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

#include "afstream/core/errors.h"

namespace afs::distinct {

namespace {
std::string precision_problem(long long p) {
  if (p < HyperLogLog::kMinPrecision || p > HyperLogLog::kMaxPrecision) {
    return "precision " + std::to_string(p) + " is outside [" + std::to_string(HyperLogLog::kMinPrecision) + ", " +
           std::to_string(HyperLogLog::kMaxPrecision) + "]";
  }
  return "";
}

// The bias constant alpha_m of the raw estimator (Flajolet et al., figure 3).
double alpha(std::size_t m) {
  switch (m) {
    case 16:
      return 0.673;
    case 32:
      return 0.697;
    case 64:
      return 0.709;
    default:
      return 0.7213 / (1 + 1.079 / static_cast<double>(m));
  }
}
}  // namespace

HyperLogLog::HyperLogLog(int precision, std::uint64_t seed) : precision_(precision), seed_(seed) {
  if (auto problem = precision_problem(precision); !problem.empty()) throw ConfigError("HyperLogLog: " + problem);
  registers_.assign(std::size_t{1} << precision, 0);
}

int HyperLogLog::precision_for_error(double relative_error) {
  if (!(relative_error > 0 && relative_error < 1)) {
    throw ConfigError("HyperLogLog: relative error must be in (0, 1) (got " + std::to_string(relative_error) + ")");
  }
  for (int p = kMinPrecision; p <= kMaxPrecision; ++p) {
    if (standard_error(p) <= relative_error) return p;
  }
  throw ConfigError("HyperLogLog: relative error " + std::to_string(relative_error) + " needs more than 2^" +
                    std::to_string(kMaxPrecision) +
                    " registers (standard error there: " + std::to_string(standard_error(kMaxPrecision)) + ")");
}

double HyperLogLog::standard_error(int precision) {
  return 1.04 / std::sqrt(static_cast<double>(std::size_t{1} << precision));
}

HyperLogLog::Slot HyperLogLog::slot(std::uint64_t key, int precision, std::uint64_t seed) {
  const std::uint64_t h = XXH3_64bits_withSeed(&key, sizeof key, seed);
  const std::size_t index = static_cast<std::size_t>(h >> (64 - precision));
  // The bits after the index, with a guard bit so that the rank is at most 64 - p + 1.
  const std::uint64_t rest = (h << precision) | (std::uint64_t{1} << (precision - 1));
  return {index, static_cast<std::uint8_t>(std::countl_zero(rest) + 1)};
}

double HyperLogLog::estimate(std::span<const std::uint8_t> registers, int precision) {
  const std::size_t m = std::size_t{1} << precision;
  if (registers.size() != m) throw std::invalid_argument("HyperLogLog::estimate: register count is not 2^precision");
  double z = 0;
  std::size_t zeros = 0;
  for (const std::uint8_t r : registers) {
    z += std::ldexp(1.0, -static_cast<int>(r));
    zeros += r == 0;
  }
  const double md = static_cast<double>(m);
  const double raw = alpha(m) * md * md / z;
  // Small range: linear counting on the empty registers (Flajolet et al., section 4).
  if (raw <= 2.5 * md && zeros > 0) return md * std::log(md / static_cast<double>(zeros));
  return raw;
}

double HyperLogLog::lower_bound(double k) const {
  const double e = estimate();
  return std::max(0.0, e * (1 - k * standard_error(precision_)));
}

double HyperLogLog::upper_bound(double k) const { return estimate() * (1 + k * standard_error(precision_)); }

void HyperLogLog::merge(const HyperLogLog& other) {
  if (other.precision_ != precision_ || other.seed_ != seed_) {
    throw std::invalid_argument("HyperLogLog::merge: sketches differ in precision or seed (precision " +
                                std::to_string(precision_) + " vs " + std::to_string(other.precision_) + ")");
  }
  for (std::size_t i = 0; i < registers_.size(); ++i) {
    if (registers_[i] < other.registers_[i]) registers_[i] = other.registers_[i];
  }
}

void HyperLogLog::serialize(ByteWriter& out) const {
  const std::size_t start = out.size();
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<std::uint16_t>(static_cast<std::uint16_t>(precision_));
  out.put<std::uint64_t>(seed_);
  out.put_array<std::uint8_t>(registers_);
  out.put<std::uint64_t>(XXH3_64bits(out.buffer().data() + start, out.size() - start));
}

HyperLogLog HyperLogLog::deserialize(ByteReader& in) {
  const std::span<const std::uint8_t> record = in.rest();
  const std::size_t start = in.position();
  const auto tag = in.get<std::uint32_t>("HyperLogLog tag");
  if (tag != kTag) throw FormatError("HyperLogLog snapshot: wrong tag " + std::to_string(tag) + " (not a HyperLogLog)");
  const auto version = in.get<std::uint16_t>("HyperLogLog format version");
  if (version != kVersion) {
    throw FormatError("HyperLogLog snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  const auto flags = in.get<std::uint16_t>("HyperLogLog flags");
  if (flags != 0) throw FormatError("HyperLogLog snapshot: unknown flags " + std::to_string(flags));
  const auto precision = in.get<std::uint16_t>("HyperLogLog precision");
  if (auto problem = precision_problem(precision); !problem.empty()) {
    throw FormatError("HyperLogLog snapshot: " + problem);
  }
  const auto seed = in.get<std::uint64_t>("HyperLogLog seed");
  auto registers = in.get_array<std::uint8_t>("HyperLogLog registers");
  if (registers.size() != (std::size_t{1} << precision)) {
    throw FormatError("HyperLogLog snapshot: " + std::to_string(registers.size()) + " registers for precision " +
                      std::to_string(precision));
  }
  for (const std::uint8_t r : registers) {
    if (r > max_rank(precision)) {
      throw FormatError("HyperLogLog snapshot: a register holds rank " + std::to_string(r) + ", above the maximum " +
                        std::to_string(max_rank(precision)));
    }
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  if (in.get<std::uint64_t>("HyperLogLog checksum") != computed) {
    throw FormatError("HyperLogLog snapshot: checksum mismatch (corrupt data)");
  }
  HyperLogLog h(precision, seed);
  h.registers_ = std::move(registers);
  return h;
}

}  // namespace afs::distinct
