// What the two runtimes offer a job (DESIGN 4): LocalCluster runs every worker as a thread of this process,
// ProcessCluster as processes with a backup server, killed for real. Same job, same results.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/runtime/metrics.h"

namespace afs {

struct MetricsSample {
  double t = 0;                    // seconds since start
  std::uint64_t source_items = 0;  // source items emitted so far
  double items_per_s = 0;          // over the last interval
  // Input items processed so far by the stages the sources feed (InputProgress, failure_plan.h: the failure plan's
  // measure), and per second over the last interval: the job's progress, where the sources may run far ahead of it
  // (a word count's source has produced all its chunks a second into the run).
  std::uint64_t input_items = 0;
  double input_per_s = 0;
  std::uint64_t items_out = 0;  // items emitted by non-source workers so far
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t backup_bytes = 0;
  double divergence = 0;  // sum over workers of the divergence at their last update
  std::uint64_t unbacked = 0;
  std::uint64_t unacked = 0;
  std::uint64_t failures = 0;
  double last_recovery_ms = 0;
  // Process runtime with the RocksDB store: bytes on disk in the backup server's directory (files of the store, its
  // write-ahead log and its info logs); 0 otherwise.
  std::uint64_t store_bytes = 0;
  std::uint64_t unauthorized_connections = 0;  // CURVE: connections refused so far, the client's key not authorized
  std::uint64_t trees_replayed = 0;            // ack mode: source items replayed so far (RunResult::trees_replayed)
};

struct RunResult {
  double seconds = 0;
  std::uint64_t source_items = 0;
  std::vector<FailureRecord> failures;  // in the order the recoveries completed
  // Failures the plan injected: its events that fired (FailurePlan::due: one due while its workers restarted waits
  // for them, and the run may end first) and killed a worker (not one whose workers had all finished).
  std::uint64_t failure_events = 0;
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t backup_bytes = 0;
  std::uint64_t duplicates_dropped = 0;
  std::uint64_t trees_replayed = 0;  // ack mode: source items replayed after their tree timed out (at least once)
  std::vector<std::uint64_t> latency_buckets;  // batches by latency (metrics.h), every worker of every incarnation
  std::uint64_t gaps = 0;
  std::uint64_t outputs_after_end = 0;  // emitted after their channel's end of stream went out: dropped
  std::uint64_t bad_messages = 0;
  std::uint64_t unauthorized_connections = 0;  // CURVE (process runtime on tcp): refused, the key not authorized
  // Checkpoint mode (WorkerCounters; both runtimes): completed and abandoned checkpoints, their mean and largest
  // duration (start at the source to the last worker's confirmation), bytes of checkpoint records, and the mean and
  // largest alignment time of a worker (first barrier notice to aligned).
  std::uint64_t checkpoints = 0;
  std::uint64_t checkpoints_abandoned = 0;
  double checkpoint_ms_mean = 0;
  double checkpoint_ms_max = 0;
  std::uint64_t checkpoint_bytes = 0;
  double alignment_ms_mean = 0;
  double alignment_ms_max = 0;
  std::uint64_t items_held = 0;  // items that waited for their worker to align a checkpoint
};

class Cluster {
 public:
  virtual ~Cluster() = default;
  // Runs the job to the end. on_sample is called about once per sample_every with the latest metrics.
  virtual RunResult run(const std::function<void(const MetricsSample&)>& on_sample = {},
                        std::chrono::milliseconds sample_every = std::chrono::milliseconds(1000)) = 0;
  // After run(): the final operator instance of a worker (nullptr for sources), e.g. a sink's results.
  virtual Operator* final_operator(int worker) = 0;
};

}  // namespace afs
