// The in-process runtime: every worker of a job runs as a thread of this process, connected by ZeroMQ inproc://
// sockets; a monitor (the controller's role) injects failures on the plan, restarts crashed workers with their
// failure count, and samples metrics once a second.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/metrics.h"
#include "afstream/store/backup_store.h"

namespace afs {

struct MetricsSample {
  double t = 0;                    // seconds since start
  std::uint64_t source_items = 0;  // source items emitted so far
  double items_per_s = 0;          // over the last interval
  std::uint64_t items_out = 0;     // items emitted by non-source workers so far
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t backup_bytes = 0;
  double divergence = 0;  // sum over workers of the divergence at their last update
  std::uint64_t unbacked = 0;
  std::uint64_t unacked = 0;
  std::uint64_t failures = 0;
  double last_recovery_ms = 0;
};

struct RunResult {
  double seconds = 0;
  std::uint64_t source_items = 0;
  std::vector<FailureRecord> failures;  // in the order the recoveries completed
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t backup_bytes = 0;
  std::uint64_t duplicates_dropped = 0;
  std::uint64_t gaps = 0;
  std::uint64_t bad_messages = 0;
};

class LocalCluster {
 public:
  // store: where backups go; nullptr uses an in-memory store owned by the cluster.
  LocalCluster(const Topology& topology, const Registry& registry, RunConfig config,
               std::shared_ptr<BackupStore> store = nullptr);
  ~LocalCluster();

  // Runs the job to the end. on_sample is called about once per sample_every with the latest metrics.
  RunResult run(const std::function<void(const MetricsSample&)>& on_sample = {},
                std::chrono::milliseconds sample_every = std::chrono::milliseconds(1000));

  // After run(): the final operator instance of a worker (nullptr for sources), e.g. a sink's results.
  Operator* final_operator(int worker);
  BackupStore& store() { return *store_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<BackupStore> store_;
};

// Expands "all" / "1,3" into worker ids, checking the range.
std::vector<int> parse_worker_list(const std::string& spec, int worker_count);
// K failure points evenly spread over [from, to] of total items (the paper injects after 10% of the input).
std::vector<FailureEvent> spread_failures(int count, std::uint64_t total_items, const std::vector<int>& workers,
                                          double from = 0.1, double to = 0.9);

}  // namespace afs
