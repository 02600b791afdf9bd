// The distinct-counting operators: HyperLogLog registers in a tracked array, and the merging sink.
#include "algorithms/distinct/distinct_operators.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/distinct/hyperloglog.h"

namespace afs::distinct {

int precision_of(const Params& p) {
  if (p.has("epsilon")) return HyperLogLog::precision_for_error(p.get_double("epsilon", 0));
  const auto precision = p.get_int("precision", 12);
  (void)HyperLogLog(static_cast<int>(precision));  // ConfigError naming the range when it is outside
  return static_cast<int>(precision);
}

HllRegisters::HllRegisters(int precision)
    : precision_(precision), registers_(std::size_t{1} << precision, Metric::MaxAbs) {}

double HllRegisters::alpha() const { return HyperLogLog::max_rank(precision_); }

void HllRegisters::restore_full(ByteReader& in) {
  auto values = registers_.read_full_values(in);
  in.expect_end("HyperLogLog registers snapshot");
  registers_.apply_full(std::move(values));
}

void HllRegisters::apply_delta(ByteReader& in) {
  const auto d = registers_.read_delta(in);
  in.expect_end("HyperLogLog registers delta");
  registers_.apply_delta(d);
}

double HllRegisters::distance(const Operator& other) const {
  return registers_.distance(dynamic_cast<const HllRegisters&>(other).registers_);
}

// The registers as HyperLogLog::estimate takes them (ranks are at most 64 - p + 1, so they fit a byte).
std::vector<std::uint8_t> HllRegisters::ranks() const {
  std::vector<std::uint8_t> r(registers_.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<std::uint8_t>(registers_[i]);
  return r;
}

double HllRegisters::estimate() const { return HyperLogLog::estimate(ranks(), precision_); }

HllOperator::HllOperator(const Params& p) : HllRegisters(precision_of(p)), seed_(p.get_uint("seed", 1)) {}

void HllOperator::process(const Item& item, Emitter&) {
  const auto s = HyperLogLog::slot(item.key, precision(), seed_);
  raise(s.index, s.rank);
}

void HllOperator::finish(Emitter& out) {
  for (std::size_t i = 0; i < registers().size(); ++i) {
    if (registers()[i] > 0) out.emit(i, registers()[i]);
  }
}

HllMerge::HllMerge(const Params& p) : HllRegisters(precision_of(p)) {}

void HllMerge::process(const Item& item, Emitter&) {
  if (item.key >= registers().size() || item.value < 0 || item.value > HyperLogLog::max_rank(precision())) {
    throw FormatError("hll-merge: item (" + std::to_string(item.key) + ", " + std::to_string(item.value) +
                      ") is not a register of a precision-" + std::to_string(precision()) + " HyperLogLog");
  }
  raise(item.key, item.value);
}

void register_distinct(Registry& registry) {
  registry.add_operator("distinct-hll", "HyperLogLog distinct count (precision | epsilon; seed)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<HllOperator>(p); });
  registry.add_operator("hll-merge", "merges HyperLogLog registers (sink; precision | epsilon)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<HllMerge>(p); });
}

}  // namespace afs::distinct
