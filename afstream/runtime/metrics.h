// Counters a worker publishes while it runs (read by the progress reporter and the metrics time series), and the
// record kept for every failure (DESIGN 5: recovery time is measured and reported for every failure).
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace afs {

// Item latency (DESIGN 7, metrics): from the emission of the oldest item of a network batch (a source: when it
// produced it) to when the receiver has processed the batch's last item, so it includes what a sender holds back
// (microbatch), the network and the receiver's queue. Kept as a histogram with 4 buckets per octave of
// microseconds (bucket b holds latencies below 2^((b+1)/4) us: percentiles within 19%).
constexpr std::size_t kLatencyBuckets = 112;  // up to 2^28 us (about 4.5 minutes); longer ones land in the last
inline std::size_t latency_bucket(double us) {
  if (!(us > 1)) return 0;
  const auto b = static_cast<std::size_t>(std::floor(4 * std::log2(us)));
  return b < kLatencyBuckets ? b : kLatencyBuckets - 1;
}
// The q-quantile (0 < q <= 1) of a histogram, as its bucket's upper bound in milliseconds; 0 if it is empty.
inline double latency_quantile_ms(const std::vector<std::uint64_t>& counts, double q) {
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  if (total == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    seen += counts[b];
    if (seen >= rank) return std::exp2(static_cast<double>(b + 1) / 4) / 1000;
  }
  return std::exp2(static_cast<double>(counts.size()) / 4) / 1000;
}

// One worker's counters, written by its own threads and read by the metrics sampler. On cache lines of their own,
// so that no other object's writes contend with them.
struct alignas(64) WorkerCounters {
  std::atomic<std::uint64_t> items_in{0};   // items processed (sources: items produced)
  std::atomic<std::uint64_t> items_out{0};  // items emitted
  // How far through its input the worker's state has got: the sum over its input channels of the last sequence
  // number processed, the highest any incarnation reached (items processed again after a recovery do not move it).
  // The failure plan's measure (InputProgress, failure_plan.h).
  std::atomic<std::uint64_t> input_position{0};
  std::atomic<std::uint64_t> state_backups{0};
  std::atomic<std::uint64_t> item_backups{0};
  std::atomic<std::uint64_t> backup_bytes{0};
  std::atomic<std::uint64_t> state_backup_ns{0};  // CPU time the backup thread spent encoding and storing state backups
  // A remote store: the wall time of those writes, round trips included (most of their cost is spent by both
  // processes' ZeroMQ I/O threads and the server, which the backup thread's CPU time does not see).
  std::atomic<std::uint64_t> state_backup_wall_ns{0};
  std::atomic<std::uint64_t> duplicates_dropped{0};
  std::atomic<std::uint64_t> acks_sent{0};    // acknowledgement messages this worker sent its senders
  std::atomic<std::uint64_t> empty_waits{0};  // waits for input (up to 1 ms) that brought nothing
  std::array<std::atomic<std::uint64_t>, kLatencyBuckets> latency{};  // batches by latency bucket
  std::atomic<std::uint64_t> trees_replayed{0};  // ack mode (sources): items emitted again (a tree timed out, or
                                                 // produced again after a restart)
  std::atomic<std::uint64_t> gaps{0};            // items never received (lost upstream)
  // Outputs the operator emitted on a channel after its end of stream had gone out (on_feedback, or processing a
  // restarted sender's items, after finish()): dropped, since the receiver may have finished (Worker::emit).
  std::atomic<std::uint64_t> outputs_after_end{0};
  std::atomic<std::uint64_t> bad_messages{0};  // frames rejected by the decoder
  std::atomic<double> divergence{0};
  std::atomic<std::uint64_t> unbacked{0};
  std::atomic<std::uint64_t> unacked{0};
  // CURVE on tcp://: connections to the worker's sockets refused, the client's key not authorized (process runtime)
  std::atomic<std::uint64_t> unauthorized_connections{0};
  // Checkpoint mode. Sources: checkpoints started and seen complete, abandoned (timeout), and the time from start
  // to completion; every worker: bytes of its checkpoint records, and alignment (first barrier notice to aligned).
  std::atomic<std::uint64_t> checkpoints{0};
  std::atomic<std::uint64_t> checkpoints_abandoned{0};
  std::atomic<double> checkpoint_ms{0};  // sum over completed checkpoints
  std::atomic<double> checkpoint_ms_max{0};
  std::atomic<std::uint64_t> checkpoint_bytes{0};
  std::atomic<std::uint64_t> alignments{0};
  std::atomic<double> alignment_ms{0};  // sum over alignments
  std::atomic<double> alignment_ms_max{0};
  std::atomic<std::uint64_t> items_held{0};  // items that waited in a hold buffer (their channel blocked)
};

struct RunResult;
// Checkpoint mode: the workers' checkpoint counters into the run's result (sums, means and maxima).
void summarize_checkpoints(const std::vector<std::unique_ptr<WorkerCounters>>& counters, RunResult& result);

struct FailureRecord {
  int worker = 0;
  int failure_count = 0;       // k for this worker
  std::uint64_t at_items = 0;  // input items processed when it was killed (InputProgress, failure_plan.h)
  double theta = 0;            // runtime thresholds in force when it failed
  std::uint64_t l = 0;
  std::uint64_t gamma = 0;
  double alpha = 0;  // the operator's alpha as the worker's rules saw it (theta below it: every item logged)
  double divergence_at_crash = 0;  // divergence from the last backup taken (-1 in mode none: not tracked)
  // Acknowledged, unprocessed, unbacked items lost with the worker, and its unacknowledged outputs not covered by a
  // state backup (what receivers then count as items never received, WorkerCounters::gaps). Measured at the crash
  // where it is simulated (in-process runtime); a SIGKILLed worker process leaves them on its progress page
  // (progress_page.h) as of its last batch of items, and without a local directory they read 0.
  std::uint64_t lost_items = 0;
  std::uint64_t lost_outputs = 0;
  double lost_divergence = -1;  // measured d(state at crash, recovered state); -1 if not measured
  double detect_ms = 0;         // failure to its detection (process runtime: a missed heartbeat; 0 when killed
                                // by the plan or seen exiting)
  double restore_ms = 0;        // fetch + restore of the state chain
  double replay_ms = 0;         // restored to every replayed item processed (threads: back where it crashed)
  double recovery_ms = 0;       // kill to restored and replayed (process runtime: kill to the restarted worker's
                                // hello, which follows the restore and precedes the replay)
  // Kill to the first item processed after the replay (sources: produced), i.e. restored, replayed and taking new
  // work: an item from upstream, or, where the crash's positions are known (in-process runtime; worker processes
  // with a local directory, progress_page.h), one the log held past where the crashed incarnation was (its backlog,
  // which it had not processed either); -1: none (input ended).
  double first_item_ms = -1;
  std::uint64_t replayed_items = 0;
  // Input items the crashed incarnation had processed that the recovered one processes again (from the item log or
  // sent again by its senders: behind replayable sources, everything after the restored backup): the work a
  // recovery repeats. -1: not known (a source, or a killed process that left no progress page).
  std::int64_t repeated_items = -1;
  // Kill to the moment the recovered incarnation has processed again everything the crashed one had processed (at
  // the end of its restore when there is nothing to repeat): the time the failure set the worker back (behind
  // replayable sources, with a deterministic operator, it is then in the very state it had). What a failure of all
  // workers delays the job by, measured inside the run, where run-to-run noise does not reach it
  // (experiments/convergence_summary.py). On worker processes the crashed one's positions come from its progress
  // page (progress_page.h), as of its last batch of items. -1: not known (a source, a worker process without a
  // local directory, the run ended first, or the worker failed again first).
  double caught_up_ms = -1;
  std::int64_t missing_items = -1;  // input items the recovered state never reflects (measured); -1 if not known
  double residual = 0;              // what the restored backup left unwritten (a partial delta's residual)
  // false: the restarted incarnation failed too (a kill during recovery, e.g. two failure points passed at once), or
  // the run ended, before it completed its recovery (restored, replayed, compensated, first item from upstream).
  // The failure is real and counted (the thresholds were halved for it); the fields its recovery would have
  // measured are what was known then: recovery_ms -1 if it never came up, replayed_items and the durations 0 if it
  // never reported them, missing_items and first_item_ms -1. What it lost is measured by the next completed
  // recovery (proofs/general-bounds.md §3.5).
  bool recovered = true;
};

}  // namespace afs
