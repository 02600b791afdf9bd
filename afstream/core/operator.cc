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
  std::int64_t bound = 0;
  double measured = 0;
  bool all_measured = true;
  for (std::size_t j = done; j < k; ++j) {
    bound += static_cast<std::int64_t>(std::floor(theta_by_failure[j])) +
             static_cast<std::int64_t>(j < l_by_failure.size() ? l_by_failure[j] : 0) * alpha_per_item;
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
