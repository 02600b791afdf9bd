// Test helpers shared by the operator tests of algorithms/: an emitter that drops everything, an operator's full
// snapshot as bytes, and the RecoveryInfo of a run of failures with given thresholds.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/operator.h"

namespace afs::testing {

class NullEmitter final : public Emitter {
 public:
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
};

inline std::vector<std::uint8_t> full_of(const Operator& op) {
  ByteWriter w;
  op.snapshot_full(w);
  return w.take();
}

// Failures 1..k with thresholds thetas[j], ls[j] (k = thetas.size()), none of their losses measured.
inline RecoveryInfo recovery(std::vector<double> thetas, std::vector<double> ls, double alpha) {
  RecoveryInfo info;
  info.failure_count = static_cast<int>(thetas.size());
  info.theta = thetas.back();
  info.l = ls.back();
  info.alpha = alpha;
  info.theta_by_failure = std::move(thetas);
  info.l_by_failure = std::move(ls);
  return info;
}

}  // namespace afs::testing
