// Precision, recall and average relative error of a heavy-hitter report (definitions in evaluation.h).
#include "algorithms/heavy_hitters/evaluation.h"

#include <cmath>
#include <string>

#include "afstream/core/errors.h"

namespace afs::hh {

HeavyHitterScore score_heavy_hitters(const std::unordered_map<std::uint64_t, std::int64_t>& reported_estimates,
                                     const std::unordered_map<std::uint64_t, std::int64_t>& exact_counts, double phi) {
  if (!(phi >= 0.0)) throw ConfigError("score_heavy_hitters: phi must be >= 0 (got " + std::to_string(phi) + ")");
  HeavyHitterScore score;
  score.reported = reported_estimates.size();
  double relative_error_sum = 0.0;
  for (const auto& [key, exact] : exact_counts) {
    if (!(static_cast<double>(exact) > phi)) continue;
    ++score.true_heavy;
    const auto it = reported_estimates.find(key);
    const std::int64_t estimate = it == reported_estimates.end() ? 0 : it->second;
    if (it != reported_estimates.end()) ++score.true_positives;
    relative_error_sum +=
        std::abs(static_cast<double>(estimate) - static_cast<double>(exact)) / static_cast<double>(exact);
  }
  score.precision =
      score.reported == 0 ? 1.0 : static_cast<double>(score.true_positives) / static_cast<double>(score.reported);
  score.recall =
      score.true_heavy == 0 ? 1.0 : static_cast<double>(score.true_positives) / static_cast<double>(score.true_heavy);
  score.are = score.true_heavy == 0 ? 0.0 : relative_error_sum / static_cast<double>(score.true_heavy);
  return score;
}

}  // namespace afs::hh
