// Accuracy metrics of the heavy-hitter workload of [J] (precision, and recall; PAPER.md "Workloads"), computed from a
// set of reported keys with their estimates against exact counts. Used by the unit tests, the property tests of
// Theorem 2 and the experiments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace afs::hh {

// Scores of one heavy-hitter report. With H = {x : exact(x) > phi} (the true heavy hitters) and R the reported keys:
//   true_positives = |R intersect H|
//   precision      = |R intersect H| / |R|   (1 if nothing is reported)
//   recall         = |R intersect H| / |H|   (1 if there are no true heavy hitters)
//   are            = mean over x in H of |estimate(x) - exact(x)| / exact(x), where estimate(x) = 0 if x is not
//                    reported (the average relative error; 0 if H is empty)
// Theorem 2 of [J] ([J] section 5) promises recall = 1 after compensation, and bounds the false positives.
struct HeavyHitterScore {
  double precision = 1.0;
  double recall = 1.0;
  double are = 0.0;
  std::size_t reported = 0;
  std::size_t true_heavy = 0;
  std::size_t true_positives = 0;
};

// Scores reported_estimates (reported key -> estimated count) against exact_counts (key -> true count; a missing key
// counts 0) for the absolute threshold phi >= 0 (a key is heavy iff its exact count is > phi). Throws ConfigError if
// phi is negative or NaN.
HeavyHitterScore score_heavy_hitters(const std::unordered_map<std::uint64_t, std::int64_t>& reported_estimates,
                                     const std::unordered_map<std::uint64_t, std::int64_t>& exact_counts, double phi);

}  // namespace afs::hh
