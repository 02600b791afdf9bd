// Background compaction of state chains (issue 3; DESIGN 4 and 5): the store side of "deltas applied in order,
// compacted into a full snapshot in the background".
//
// A worker's state chain is a full snapshot followed by deltas. Restoring reads and applies all of them, so a
// long chain slows recovery and wastes space. The compactor rebuilds the operator that wrote the chain from the
// OperatorSpec its full record carries (ft/records.h), restores the chain into it, writes one full snapshot of the
// same state, and swaps it in for the records it replaces (BackupStore::compact_state: only if no full snapshot or
// compaction came meanwhile; deltas appended meanwhile stay after it). The compacted record keeps the metadata of
// the last record it replaces (sequence numbers, source offset, residuals, measured losses), so restoring it is
// restoring the chain it replaces: the bounds of proofs/general-bounds.md do not change.
//
// Operators are rebuilt with the program's registry, so a chain of an operator the program does not know is left
// as it is (counted in `unknown`); the worker then keeps its own chain short by writing full snapshots itself,
// which it decides from the ChainInfo each put returns (runtime/worker.cc). So is the chain of an operator whose
// deltas cost a replay of their items to apply (Operator::store_compacts_deltas false, counted in `left_to_worker`):
// writing a full snapshot from the live state costs the worker less than the replay would cost the store.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/ft/records.h"
#include "afstream/store/backup_store.h"

namespace afs {

// When a chain is worth compacting. The worker writes a full snapshot itself at 4x / 1024 deltas
// (--ft.full-backup-every); compacting at 1x keeps that from happening when the store compacts, and bounds what a
// restore reads to about twice the state, at the cost of writing one full snapshot per full snapshot's worth of
// deltas. Many small deltas cost little to apply, so the count limit is the worker's.
struct CompactionPolicy {
  double delta_ratio = 1.0;         // the deltas weigh at least this many times the full record
  std::uint64_t max_deltas = 1024;  // or there are at least this many deltas
};

bool needs_compaction(const ChainInfo& info, const CompactionPolicy& policy);

// Builds an operator like the one that wrote a chain (typically Registry::make_operator). Throws ConfigError if it
// does not know the operator.
using OperatorMaker = std::function<std::unique_ptr<Operator>(const OperatorSpec&)>;

// Compacts a chain (full record first, then deltas, as BackupStore::state_chain returns it) into one full record
// of the same state. Throws FormatError if a record does not decode or the chain does not start with a full record
// carrying an OperatorSpec, and whatever `make` or the operator throws.
Bytes compact_chain(const std::vector<Bytes>& chain, const OperatorMaker& make);

struct CompactorCounters {
  std::uint64_t compactions = 0;        // chains compacted
  std::uint64_t records_merged = 0;     // records those compactions replaced
  std::uint64_t bytes_read = 0;         // record bytes read by them
  std::uint64_t bytes_written = 0;      // full records written by them
  std::uint64_t superseded = 0;         // compactions not applied: the chain was replaced meanwhile
  std::uint64_t unknown = 0;            // chains left alone: their operator could not be rebuilt
  std::uint64_t failures = 0;           // chains left alone: a record did not decode or the operator failed
  std::uint64_t checkpoint_chains = 0;  // chains left alone: checkpoint mode's (records of several checkpoints)
  std::uint64_t left_to_worker = 0;     // chains left alone: deltas applied by replay (!store_compacts_deltas)
};

// Runs compactions on a thread of its own, for the workers notify() names. Thread-safe.
class ChainCompactor {
 public:
  // on_error (optional, called on the compactor's thread) hears of each chain left alone, with the reason; a
  // chain is retried only once its generation changes.
  // on_compacted (optional, called on the compactor's thread) hears of each compaction applied: the chain of
  // `generation` had its first `count` records replaced by one full record (the chain now has another generation).
  ChainCompactor(BackupStore& store, OperatorMaker make, CompactionPolicy policy = {},
                 std::function<void(int worker, const std::string& reason)> on_error = {},
                 std::function<void(int worker, std::uint64_t generation, std::uint64_t count)> on_compacted = {});
  ~ChainCompactor();  // finishes the compaction in progress, drops the queue
  ChainCompactor(const ChainCompactor&) = delete;
  ChainCompactor& operator=(const ChainCompactor&) = delete;

  // After a put: queues the worker if its chain needs compaction (cheap; never blocks on a compaction).
  void notify(int worker, const ChainInfo& info);
  // Blocks until the queue is empty and no compaction runs (for tests and orderly shutdown).
  void wait_idle();
  CompactorCounters counters() const;
  const CompactionPolicy& policy() const { return policy_; }

 private:
  void loop();
  void compact_one(int worker);

  BackupStore& store_;
  OperatorMaker make_;
  CompactionPolicy policy_;
  std::function<void(int, const std::string&)> on_error_;
  std::function<void(int, std::uint64_t, std::uint64_t)> on_compacted_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  std::map<int, std::uint64_t> queued_;    // worker -> generation queued (one entry per worker)
  std::map<int, std::uint64_t> given_up_;  // worker -> generation that could not be compacted
  bool busy_ = false;
  bool stop_ = false;
  CompactorCounters counters_;
  std::thread thread_;
};

}  // namespace afs
