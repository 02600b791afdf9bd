// Fault-tolerance modes and the three thresholds (DESIGN section 3; proofs/general-bounds.md).
//
// User bounds (per job): Theta (state divergence), L (unbacked unprocessed items), Gamma (unacknowledged output
// items). Each worker runs with runtime thresholds derived from them:
//   theta = Theta / (2 n B) / 2^k,   l = floor(L / (2 n B) / 2^k),   gamma = floor(Gamma / (2 n B) / 2^k)
// for n parallel copies of its operator (theta without the n for copies whose divergences combine by max), B =
// beta^(m-i) for stage i of an m-stage pipeline (the runtime uses the operator's own beta; proofs/general-bounds.md
// section 6 and its open points), and k failures of this worker so far (rounded toward zero). The sum over any number
// of failures stays below the user bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace afs {

enum class FtMode {
  None,        // no backups at all: the reference for throughput and failure-free accuracy
  Approx,      // AF-Stream: Theta / L / Gamma
  Exact,       // upstream backup: every item logged before processing, state backed up every fixed number of items
  MicroBatch,  // Spark Streaming style: items logged, the state checkpointed at every batch boundary (an interval
               // or a size), outputs released per batch; a failure recomputes the batch from the log
  Ack,         // Storm style: every source item roots a tree of emitted items tracked by XOR of 64-bit edge ids;
               // a tree not complete within a timeout is replayed from the source (at least once)
  Ask,         // backtrack recovery: periodic checkpoints, no per-item acks, senders hold output until a downstream
               // checkpoint covers it, a recovered worker ASKs its senders to resend from its checkpoint (exactly once)
  // Flink style: sources start barrier checkpoints on an interval, workers align their inputs and snapshot
  // asynchronously; a failure rolls every worker back to the last complete checkpoint (runtime/README.md)
  Checkpoint,
};

const char* to_string(FtMode m);
FtMode parse_ft_mode(std::string_view s);  // throws ConfigError
// The modes' names, "none | approx | ...", for help texts and errors: one list.
std::string ft_mode_names();

// How runtime thresholds come back after failures (DESIGN 3, "Reset policy").
enum class ResetPolicy {
  Fixed,    // unbounded or decaying state (heavy hitters over a whole stream, learners): never raised again
  Hopping,  // hopping windows: failure count reset at each window end
  Sliding,  // sliding windows: raised again once the last failure has left the window
};

const char* to_string(ResetPolicy p);
ResetPolicy parse_reset_policy(std::string_view s);

struct UserBounds {
  double theta = 0;       // Theta
  double l = 0;           // L
  double gamma = 0;       // Gamma
  void validate() const;  // throws ConfigError for negative or non-finite values
};

struct RuntimeThresholds {
  double theta = 0;
  std::uint64_t l = 0;
  std::uint64_t gamma = 0;
};

// Where a worker sits, for splitting the user bounds.
struct ThresholdScope {
  int copies = 1;                      // n: parallel copies of the operator
  double downstream_beta_product = 1;  // beta^(m-i): items one lost item here can cause at the pipeline's end
  // Theta is split n ways when the copies' divergences add up (L1 over their states together, or merged sums). When
  // they combine by max (max-abs over key-partitioned copies: Operator::divergence_combines_by_max; Corollary P(3)
  // of proofs/general-bounds.md) each copy may use all of it: theta_shared_by_copies = false. L and Gamma are split
  // n ways in every case (Corollary P(1), (2)).
  bool theta_shared_by_copies = true;
};

RuntimeThresholds runtime_thresholds(const UserBounds& user, const ThresholdScope& scope, int failures);

// Tracks one worker's failure count under a reset policy and yields its current runtime thresholds.
class ThresholdSchedule {
 public:
  ThresholdSchedule(UserBounds user, ThresholdScope scope, ResetPolicy policy = ResetPolicy::Fixed,
                    std::uint64_t window_items = 0);

  const RuntimeThresholds& current() const { return current_; }
  int failures() const { return failures_; }  // failures counted by the policy (what halving uses)
  int total_failures() const { return total_; }

  void on_failure(std::uint64_t at_item);
  // Called as items are processed: applies the Hopping/Sliding reset policy.
  void on_progress(std::uint64_t item);

 private:
  void recompute();
  UserBounds user_;
  ThresholdScope scope_;
  ResetPolicy policy_;
  std::uint64_t window_;
  std::uint64_t last_failure_at_ = 0;
  int failures_ = 0;
  int total_ = 0;
  RuntimeThresholds current_;
};

}  // namespace afs
