// The backup store interface (DESIGN sections 4-5): where state backups and item backups live.
//
// State backups form a chain per worker: the latest full snapshot followed by the deltas taken after it, in order.
// Item backups are records of received, unprocessed items per worker; those wholly covered by a newer state backup
// (every item's sequence number at or below what that state reflects on its channel) are dropped, so storage
// stays bounded on endless streams. Records are opaque bytes to the store; each is kept with an xxh3 checksum
// that is verified on every read, and a corrupt record is reported (FormatError), never returned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace afs {

using Bytes = std::vector<std::uint8_t>;
using SeqByChannel = std::map<std::uint32_t, std::uint64_t>;  // channel -> last sequence number

struct StoreStats {
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t bytes_written = 0;  // everything ever written
  std::uint64_t bytes_stored = 0;   // what is held now
};

struct ItemRecordInfo {
  std::uint32_t channel = 0;
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
};

// The shape of a worker's state chain, as a put or a read left it.
struct ChainInfo {
  std::uint64_t generation = 0;   // changes whenever the chain's records change other than by an appended delta
  std::uint64_t length = 0;       // records: the full snapshot and the deltas after it
  std::uint64_t full_bytes = 0;   // size of the full record
  std::uint64_t delta_bytes = 0;  // total size of the deltas
};

// Checkpoint mode (checkpoint_ledger.h): the latest checkpoint every worker of the job confirmed (0: none), and the
// current round.
struct CheckpointStatus {
  std::uint64_t complete = 0;
  std::uint32_t round = 0;
  friend bool operator==(const CheckpointStatus&, const CheckpointStatus&) = default;
};

class BackupStore {
 public:
  virtual ~BackupStore() = default;

  // Append a state backup for worker; full == true starts a new chain. covered: per input channel, the last
  // sequence number the state reflects (item records at or below are dropped). Returns the chain after the put, so
  // the writer can tell whether the store keeps it short (compaction) or it should write a full snapshot itself.
  virtual ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) = 0;
  // The latest chain: full snapshot first, then deltas in order. Empty if the worker has no backup. With info, also
  // the chain's shape, read together with the records.
  virtual std::vector<Bytes> state_chain(int worker, ChainInfo* info = nullptr) const = 0;
  // The same records, shared and read-only: a store that holds them in memory hands them out without a copy (a
  // restore reads up to five times the state; copying it was an eighth of a KDD-like learner's restore). The default
  // moves state_chain()'s copies into shared buffers.
  virtual std::vector<std::shared_ptr<const Bytes>> state_chain_shared(int worker, ChainInfo* info = nullptr) const {
    std::vector<std::shared_ptr<const Bytes>> out;
    for (auto& b : state_chain(worker, info)) out.push_back(std::make_shared<const Bytes>(std::move(b)));
    return out;
  }
  // The chain's shape (state_chain's info) without reading its records. The default reads them; MemoryStore and
  // RocksDbStore answer from their index.
  virtual ChainInfo chain_info(int worker) const {
    ChainInfo info;
    (void)state_chain(worker, &info);
    return info;
  }
  // Compaction: replaces the first `count` records of the chain (the full snapshot and the deltas after it) by
  // `full`, a full record of the same state, provided the chain still has the given generation (no full snapshot,
  // compaction or drop came since it was read) and at least `count` records; else changes nothing and returns
  // false. Atomic like a put. The records' checksums are verified as they are read, as ever.
  virtual bool compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) = 0;

  // A record holding received items of several channels; infos say which sequence numbers it holds.
  virtual void put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) = 0;
  // All item records of worker still held, in the order they were put.
  virtual std::vector<Bytes> item_records(int worker) const = 0;

  // Forget everything about worker (a job restarted from scratch), its checkpoint confirmations included.
  virtual void drop(int worker) = 0;

  // Checkpoint mode (DESIGN 6, checkpoint; checkpoint_ledger.h): worker, of a job of `workers`, holds its state
  // record for checkpoint `id` (put and confirmed before this call); the status of the job's checkpoints; and a
  // restarted worker rejoining, which returns the checkpoint to roll back to. Atomic, like a put.
  // final: the worker finished its stream in checkpoint `id` (no later checkpoint waits for it).
  virtual void confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final = false) = 0;
  virtual CheckpointStatus checkpoint_status() const = 0;
  virtual CheckpointStatus rejoin_checkpoints(int worker) = 0;

  virtual StoreStats stats() const = 0;

  // True when every call is a round trip to another process (a backup server): a worker then avoids waiting for a
  // put where it may (Worker::after_update_checked). An in-process store's put costs only its own work, which a
  // worker's compute thread does faster inline than by handing it to its backup thread.
  virtual bool remote() const { return false; }
};

}  // namespace afs
