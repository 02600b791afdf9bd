// HyperLogLog (Flajolet, Fusy, Gandouet & Meunier 2007): the engine-free core of distinct counting (issue 4). A
// plain value type in the house vocabulary: update, merge, estimate, bounds, serialize, static deserialize, and
// static sizing helpers. 2^p registers of one byte each; register j keeps the largest rank (position of the first
// 1 bit after the p index bits, from 1) of the hashes that fall in bucket j. Hashes are 64-bit (XXH3 with the
// sketch's seed), so no large-range correction is needed; small cardinalities use linear counting as in the paper.
//
// Accuracy: relative standard error about 1.04 / sqrt(2^p) (standard_error); the estimate is within k of those of
// the true count with roughly the normal probability for k (about 95% for k = 2) once the count is well above 2^p.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"

namespace afs::distinct {

class HyperLogLog {
 public:
  static constexpr int kMinPrecision = 4;
  static constexpr int kMaxPrecision = 18;

  // 2^precision registers. Throws ConfigError if precision is outside [kMinPrecision, kMaxPrecision].
  explicit HyperLogLog(int precision, std::uint64_t seed = 1);

  // The smallest precision whose standard error is at most relative_error (in (0, 1)); ConfigError if none in range.
  static int precision_for_error(double relative_error);
  // 1.04 / sqrt(2^precision).
  static double standard_error(int precision);
  // The largest rank a register can hold: 64 - precision + 1.
  static int max_rank(int precision) { return 64 - precision + 1; }

  int precision() const { return precision_; }
  std::uint64_t seed() const { return seed_; }
  std::size_t size() const { return registers_.size(); }
  std::span<const std::uint8_t> registers() const { return registers_; }

  // The register a key falls in and the rank it offers there (what update applies; an operator keeping the
  // registers in a tracked array uses the same two numbers).
  struct Slot {
    std::size_t index;
    std::uint8_t rank;
  };
  Slot slot(std::uint64_t key) const { return slot(key, precision_, seed_); }
  static Slot slot(std::uint64_t key, int precision, std::uint64_t seed);
  void update(std::uint64_t key) {
    const Slot s = slot(key);
    if (registers_[s.index] < s.rank) registers_[s.index] = s.rank;
  }

  // The cardinality estimate of registers of this precision (any array of 2^precision ranks: a tracked one too).
  static double estimate(std::span<const std::uint8_t> registers, int precision);
  double estimate() const { return estimate(registers_, precision_); }
  // estimate() -/+ k standard errors (the lower bound not below 0).
  double lower_bound(double k = 2) const;
  double upper_bound(double k = 2) const;

  // Register-wise maximum: afterwards this sketch equals one fed with both streams. Throws std::invalid_argument if
  // the precisions or seeds differ.
  void merge(const HyperLogLog& other);

  // Versioned binary form: tag, version, flags, precision, seed, registers, XXH3-64 checksum.
  void serialize(ByteWriter& out) const;
  // Throws FormatError (naming what is wrong) on a truncated, corrupt or mismatched buffer.
  static HyperLogLog deserialize(ByteReader& in);

  friend bool operator==(const HyperLogLog&, const HyperLogLog&) = default;

 private:
  static constexpr std::uint32_t kTag = 0x314C4C48;  // "HLL1"
  static constexpr std::uint16_t kVersion = 1;
  int precision_;
  std::uint64_t seed_;
  std::vector<std::uint8_t> registers_;
};

}  // namespace afs::distinct
