// RecoveryInfo's loss bound for states of integer sums, and the default feedback channel (operator.h).
#include "afstream/core/operator.h"

#include <cmath>

#include "afstream/core/errors.h"

namespace afs {

void Emitter::feed_back(std::uint64_t, std::int64_t, std::int64_t) {
  throw RuntimeError("feed_back: this runtime has no feedback channel");
}

std::int64_t RecoveryInfo::integer_sum_loss_bound(std::size_t done, std::int64_t alpha_per_item) const {
  const std::size_t k = theta_by_failure.size();
  if (k <= done) return 0;
  // Saturating at kLossBoundCap: Theta and L are any finite numbers >= 0 (1e18 is "never backed up"), and
  // floor(theta_j) >= 2^63 cast to int64, or l_j * alpha past it, was undefined (on x86 the cast gave INT64_MIN: a
  // negative bound that won over the measured loss, so Count-Min compensated nothing and Space-Saving refused its
  // own negative compensation, ending the run).
  const auto saturated = [](double v) {
    return v >= static_cast<double>(kLossBoundCap) ? kLossBoundCap : static_cast<std::int64_t>(v);
  };
  const auto plus = [](std::int64_t a, std::int64_t b) {
    std::int64_t s = 0;
    return __builtin_add_overflow(a, b, &s) || s > kLossBoundCap ? kLossBoundCap : s;
  };
  std::int64_t bound = 0;
  double measured = 0;
  bool all_measured = true;
  for (std::size_t j = done; j < k; ++j) {
    std::int64_t l_alpha = 0;
    if (__builtin_mul_overflow(saturated(j < l_by_failure.size() ? l_by_failure[j] : 0), alpha_per_item, &l_alpha)) {
      l_alpha = kLossBoundCap;
    }
    bound = plus(plus(bound, saturated(std::floor(theta_by_failure[j]))), l_alpha);
    if (j < missing_by_failure.size() && missing_by_failure[j]) {
      measured += static_cast<double>(*missing_by_failure[j]) * static_cast<double>(alpha_per_item);
      // What a partial backup left unwritten (integer sums: a whole number).
      if (j < residual_by_failure.size()) measured += std::floor(residual_by_failure[j]);
    } else {
      all_measured = false;
    }
  }
  return all_measured && measured < static_cast<double>(bound) ? static_cast<std::int64_t>(measured) : bound;
}

}  // namespace afs
