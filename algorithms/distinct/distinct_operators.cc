// The distinct-counting operators: HyperLogLog registers in a tracked array, and the merging sink.
#include "algorithms/distinct/distinct_operators.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/distinct/hyperloglog.h"

namespace afs::distinct {

namespace {
// The registers as HyperLogLog::estimate takes them (ranks are at most 64 - p + 1, so they fit a byte).
double estimate_of(const TrackedArray<std::int64_t>& registers, int precision) {
  std::vector<std::uint8_t> r(registers.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<std::uint8_t>(registers[i]);
  return HyperLogLog::estimate(r, precision);
}
}  // namespace

int precision_of(const Params& p) {
  if (p.has("epsilon")) return HyperLogLog::precision_for_error(p.get_double("epsilon", 0));
  const auto precision = p.get_int("precision", 12);
  (void)HyperLogLog(static_cast<int>(precision));  // ConfigError naming the range when it is outside
  return static_cast<int>(precision);
}

HllOperator::HllOperator(const Params& p)
    : precision_(precision_of(p)),
      seed_(p.get_uint("seed", 1)),
      registers_(std::size_t{1} << precision_, Metric::MaxAbs) {}

void HllOperator::process(const Item& item, Emitter&) {
  const auto s = HyperLogLog::slot(item.key, precision_, seed_);
  if (registers_[s.index] < s.rank) registers_.set(s.index, s.rank);
}

void HllOperator::finish(Emitter& out) {
  for (std::size_t i = 0; i < registers_.size(); ++i) {
    if (registers_[i] > 0) out.emit(i, registers_[i]);
  }
}

double HllOperator::alpha() const { return HyperLogLog::max_rank(precision_); }

void HllOperator::restore_full(ByteReader& in) {
  auto values = registers_.read_full_values(in);
  in.expect_end("distinct-hll snapshot");
  registers_.apply_full(std::move(values));
}

void HllOperator::apply_delta(ByteReader& in) {
  const auto d = registers_.read_delta(in);
  in.expect_end("distinct-hll delta");
  registers_.apply_delta(d);
}

double HllOperator::distance(const Operator& other) const {
  return registers_.distance(dynamic_cast<const HllOperator&>(other).registers_);
}

double HllOperator::estimate() const { return estimate_of(registers_, precision_); }

HllMerge::HllMerge(const Params& p)
    : precision_(precision_of(p)), registers_(std::size_t{1} << precision_, Metric::MaxAbs) {}

void HllMerge::process(const Item& item, Emitter&) {
  if (item.key >= registers_.size() || item.value < 0 || item.value > HyperLogLog::max_rank(precision_)) {
    throw FormatError("hll-merge: item (" + std::to_string(item.key) + ", " + std::to_string(item.value) +
                      ") is not a register of a precision-" + std::to_string(precision_) + " HyperLogLog");
  }
  if (registers_[item.key] < item.value) registers_.set(item.key, item.value);
}

double HllMerge::alpha() const { return HyperLogLog::max_rank(precision_); }

void HllMerge::restore_full(ByteReader& in) {
  auto values = registers_.read_full_values(in);
  in.expect_end("hll-merge snapshot");
  registers_.apply_full(std::move(values));
}

void HllMerge::apply_delta(ByteReader& in) {
  const auto d = registers_.read_delta(in);
  in.expect_end("hll-merge delta");
  registers_.apply_delta(d);
}

double HllMerge::distance(const Operator& other) const {
  return registers_.distance(dynamic_cast<const HllMerge&>(other).registers_);
}

double HllMerge::estimate() const { return estimate_of(registers_, precision_); }

void register_distinct(Registry& registry) {
  registry.add_operator("distinct-hll", "HyperLogLog distinct count (precision | epsilon; seed)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<HllOperator>(p); });
  registry.add_operator("hll-merge", "merges HyperLogLog registers (sink; precision | epsilon)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<HllMerge>(p); });
}

}  // namespace afs::distinct
