// The failure plan of a run (RunConfig::failures; DESIGN sections 5 and 7): which workers are killed at once, and
// when: once the job has processed a number of its input items (InputProgress), or at a time since the start. Both
// runtimes fire it the same way (LocalCluster emulates the crash, ProcessCluster sends SIGKILL).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "afstream/core/topology.h"
#include "afstream/runtime/config.h"

namespace afs {

class FailurePlan {
 public:
  explicit FailurePlan(std::vector<FailureEvent> events);
  // The events to fire now, each returned once, in plan order: those that have become due (input_items:
  // InputProgress; source_items: what the sources have produced, for FailureEvent::produced) and whose workers are
  // all ready (ready(w): its current incarnation is up, or it has finished for good; every worker when ready is
  // empty), at most one event per worker per call. An event that has become due while one of its workers is still
  // restarting from an earlier failure waits for it (and so do later events on its workers): points passed
  // together, as a short input or a stage that ran ahead while its downstream restarted makes them, are each a
  // failure of a started incarnation, not kills of processes that had not started (the process runtime killed the
  // same worker up to 48 times in one poll of the plan).
  std::vector<FailureEvent> due(std::uint64_t input_items, std::uint64_t source_items,
                                std::chrono::milliseconds elapsed, const std::function<bool(int)>& ready = {});
  // Whether some event has not become due yet (the runtime then keeps polling due()).
  bool pending() const;

 private:
  std::vector<FailureEvent> events_;
  std::vector<bool> fired_;
};

// How far a job is through its input, in source items, for failure points ("after 10% of the input", as [J] injects
// them): the items the stages fed by the sources have processed, at most what the sources have produced. The
// sources' own count alone ran far ahead of the processing (an approximate-mode source with no net.in-flight-max
// can produce most of its input into the queues before its receivers have processed a tenth of it), so points
// spread over the input all fired at the start. A stage counts when all its inputs come from sources and none is a
// broadcast (each source item then reaches one of its workers once); the smallest such stage's count is the
// progress. Items a recovery processes again do not count again (WorkerCounters::input_position is a high-water
// mark): counting them made a failure come back at once to a worker that had lost much, and the next, until it
// never got past the point.
class InputProgress {
 public:
  explicit InputProgress(const Topology& topology);
  // source_items: what the sources have produced (each item once); processed(w): worker w's input position
  // (WorkerCounters::input_position: sequence numbers per channel, so one per source item it got).
  template <class Processed>
  std::uint64_t operator()(std::uint64_t source_items, Processed&& processed) const {
    std::uint64_t progress = source_items;
    for (const auto& workers : fed_stages_) {
      std::uint64_t n = 0;
      for (int w : workers) n += processed(w);
      progress = std::min(progress, n);
    }
    return progress;
  }

 private:
  std::vector<std::vector<int>> fed_stages_;  // the workers of each stage that counts
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
// fail.at: comma-separated points: item counts (1000), fractions of total (0.25), or times (500ms, 2s); an item
// count or fraction prefixed by produced: counts the items the sources have produced instead of the input processed
// (produced:0.99 lands after a source has sent nearly all, while its receivers still work). A count past
// total_items (when it is not 0) is refused: it would never come.
std::vector<FailureEvent> parse_failure_points(const std::string& spec, std::uint64_t total_items,
                                               const std::vector<int>& workers);

}  // namespace afs
