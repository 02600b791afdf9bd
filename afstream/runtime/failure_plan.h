// The failure plan of a run (RunConfig::failures; DESIGN sections 5 and 7): which workers are killed at once, and
// when: once the sources have emitted a number of items, or at a time since the start. Both runtimes fire it the
// same way (LocalCluster emulates the crash, ProcessCluster sends SIGKILL).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "afstream/runtime/config.h"

namespace afs {

class FailurePlan {
 public:
  explicit FailurePlan(std::vector<FailureEvent> events);
  // The events that have become due, each returned once, in plan order.
  std::vector<FailureEvent> due(std::uint64_t source_items, std::chrono::milliseconds elapsed);

 private:
  std::vector<FailureEvent> events_;
  std::vector<bool> fired_;
};

// "all", "ID[,ID...]", or the name of a failure domain (a named group of workers killed together, e.g. a rack):
// the worker ids, checked against worker_count. Throws ConfigError naming what was wrong.
std::vector<int> parse_worker_list(const std::string& spec, int worker_count,
                                   const std::vector<std::pair<std::string, std::string>>& domains = {});
// K failure points evenly spread over [from, to] of total items (the paper injects after 10% of the input).
std::vector<FailureEvent> spread_failures(int count, std::uint64_t total_items, const std::vector<int>& workers,
                                          double from = 0.1, double to = 0.9);
// K failure points at seeded uniformly random positions in [from, to] of total items.
std::vector<FailureEvent> random_failures(int count, std::uint64_t total_items, const std::vector<int>& workers,
                                          std::uint64_t seed, double from = 0.1, double to = 0.9);
// fail.at: comma-separated points: item counts (1000), fractions of total (0.25), or times (500ms, 2s).
std::vector<FailureEvent> parse_failure_points(const std::string& spec, std::uint64_t total_items,
                                               const std::vector<int>& workers);

}  // namespace afs
