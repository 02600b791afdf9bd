// Run-time configuration of a job on a cluster: the fault-tolerance mode and thresholds, batching, the failure
// plan. One struct filled by the command-line layer (afstream/cli/options.cc is the single place options are
// declared) or by tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/thresholds.h"

namespace afs {

struct FailureEvent {
  std::uint64_t at_items = 0;                        // when the job has processed this many input items
  std::vector<int> workers;                          // which workers are killed at once
  std::optional<std::chrono::milliseconds> at_time;  // instead: this long after the start
  bool produced = false;                             // at_items counts the items the sources produced instead
};

struct RunConfig {
  FtMode mode = FtMode::Approx;
  UserBounds bounds{1e5, 1e3, 1e3};
  ResetPolicy reset = ResetPolicy::Fixed;
  std::uint64_t reset_window = 0;        // items; for hopping/sliding
  std::size_t batch_items = 1024;        // items per message
  std::uint64_t flow_window = 1u << 16;  // unacked items a sender may hold when gamma does not bound it
  // approx, sources (they keep no copies): items one channel may have in flight, sent and not acknowledged (0: no
  // limit). A failure makes the source produce all of them again, and a receiver's queue of them is latency.
  std::uint64_t in_flight_max = 0;
  std::size_t queue_items = 1u << 14;        // received, unprocessed items a worker holds before it stops reading
  std::uint64_t exact_state_every = 100000;  // exact mode: items between state backups
  std::chrono::milliseconds microbatch_interval{1000};  // microbatch mode: a batch closes after this long
  std::uint64_t microbatch_items = 0;                   // microbatch mode: or after this many items (0: no limit)
  std::chrono::milliseconds ack_timeout{30000};         // ack mode: a tree not complete after this is replayed
  std::uint64_t ack_max_pending = 16384;                // ack mode: incomplete trees a source may have
  std::uint64_t ack_state_every = 4096;                 // ack mode: items between state backups (acks wait for them)
  std::uint64_t ask_every = 8192;                       // ask mode: items a worker processes between checkpoints
  std::chrono::milliseconds ask_idle{2};  // ask mode: an idle worker checkpoints what it processed after this

  // checkpoint mode (Flink style; runtime/README.md "Checkpoint mode"): a source starts a checkpoint this long
  // after the previous one started, or after this many items (0: by interval only); one at a time
  std::chrono::milliseconds checkpoint_interval{1000};
  std::uint64_t checkpoint_items = 0;
  std::chrono::milliseconds checkpoint_timeout{60000};  // not complete by then: abandoned (a failed checkpoint)
  std::chrono::milliseconds checkpoint_min_pause{0};    // from one checkpoint's completion to the next one's start
  std::uint64_t checkpoint_tolerable_failures = 0;      // more abandoned checkpoints than this fail the job

  double state_headroom = 0.0;   // approx: share of theta left for drift while a backup is written
  int full_backup_every = 1024;  // longest chain of deltas after a full snapshot
  // approx: a state backup may leave up to this share of its trigger, theta * (1 - state_headroom), unwritten
  // (Operator::backup_partial_delta; 0: whole deltas), and at most the trigger minus 4 alpha (else it is whole).
  double delta_residual = 0.5;
  // approx, workers fed only by replayable sources: a recovery processes again every item since the backup it
  // restores (Proposition S), so a state backup is also taken after this many items (0: only by theta). Sources
  // back up their position at least as often.
  std::uint64_t replay_items_max = 0;
  // approx, workers fed only by replayable sources: take those backups as often as keeps their cost (measured: the
  // compute thread's CPU time in backup_state plus the backup thread's CPU time writing them, or its wall time for a
  // remote store) at most this share of the compute thread's time between backups, so that a small state is backed
  // up every few hundred items and a large one rarely (0: off, except 0.01 for a worker with a remote store, which
  // backs up by this rule instead of theta: Worker::after_update_checked). The interval is at least 256 items and at
  // most replay_items_max (when set) or exact_state_every.
  double replay_overhead_max = 0;
  std::vector<FailureEvent> failures;
  bool measure_losses = false;  // tests: keep the state at each crash to measure what it lost
  std::string job_id = "job";
  // The wall-clock origin of the run's times (ns since the Unix epoch; 0: not set): `afstream run` takes it at its
  // start and passes it to its worker processes (--run.started-ns), so that times an operator measures from the
  // start (the learners' trace) agree across processes and restarted incarnations.
  std::int64_t started_ns = 0;
};

// The batching and flow options that fit together (ConfigError naming the option): a sender sends whole batches, so
// a flow window or an in-flight limit below one batch could send nothing (worker processes hung on it). Called by
// the command-line layer and by LocalCluster, for callers that fill a RunConfig themselves. (A receive queue below a
// batch works, one batch at a time: the command line refuses it, tests use it.)
inline void validate_transport(const RunConfig& c) {
  const auto batch = std::to_string(c.batch_items);
  if (c.batch_items == 0) throw ConfigError("net.batch-items: expected > 0");
  if (c.flow_window < c.batch_items) {
    throw ConfigError("net.flow-window: expected at least net.batch-items = " + batch + ", got " +
                      std::to_string(c.flow_window));
  }
  if (c.in_flight_max > 0 && c.in_flight_max < c.batch_items) {
    throw ConfigError("net.in-flight-max: expected 0 (no limit) or at least net.batch-items = " + batch + ", got " +
                      std::to_string(c.in_flight_max));
  }
}

}  // namespace afs
