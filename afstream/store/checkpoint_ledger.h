// Which barrier checkpoints are complete (checkpoint mode, DESIGN 6; afstream/runtime/README.md "Checkpoint mode"):
// the store-side record both runtimes consult. Pure logic, kept by every BackupStore backend (in memory, persisted
// in RocksDB, served by the backup server).
//
// A checkpoint id is (round << 32) | n: sources number their checkpoints n = 1, 2, ... within a round. A worker
// confirms checkpoint id once the store holds its state record for it; checkpoint id is complete when every worker
// of the job confirmed it (or a later one) in the current round, and `complete` is the latest such id.
//
// Rounds fence the workers of a failure off from those after it. A restarted worker rejoins (rejoin()): the first
// to do so after a failure opens a new round (its own mark was already in the current round), the others join it,
// and each sets its mark to "nothing confirmed in this round". Until every worker has rejoined and confirmed a
// checkpoint of the new round, `complete` cannot move, so every worker restarted for the same failure reads the
// same `complete` (the checkpoint they all roll back to); confirmations of earlier rounds, from incarnations not
// stopped yet, are ignored.
//
// A worker that finished its stream confirms its last checkpoint as final: it takes part in no later checkpoint
// (it has exited, or waits to), so completion no longer waits for it, in this round or any later one, until it
// rejoins. A restore of a later checkpoint gives it its final state.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "afstream/store/backup_store.h"

namespace afs {

constexpr std::uint64_t checkpoint_id(std::uint32_t round, std::uint32_t n) {
  return (static_cast<std::uint64_t>(round) << 32) | n;
}
constexpr std::uint32_t checkpoint_round(std::uint64_t id) { return static_cast<std::uint32_t>(id >> 32); }

class CheckpointLedger {
 public:
  // Worker `worker` of a job of `workers` holds its record for checkpoint `id`. False if ignored (an earlier round).
  bool confirm(int worker, std::uint64_t id, int workers, bool final = false);
  CheckpointStatus status() const { return {complete_, round_}; }
  // A restarted worker: opens a new round or joins the one a failure opened (see above).
  CheckpointStatus rejoin(int worker);
  void clear(int worker) {
    marks_.erase(worker);
    finished_.erase(worker);
  }

  Bytes encode() const;
  static CheckpointLedger decode(const Bytes& b);  // throws FormatError

  friend bool operator==(const CheckpointLedger&, const CheckpointLedger&) = default;

 private:
  std::uint64_t complete_ = 0;
  std::uint32_t round_ = 0;
  std::map<int, std::uint64_t> marks_;  // worker -> latest id it confirmed (n = 0: rejoined, nothing confirmed)
  std::set<int> finished_;              // workers whose latest confirmation was final
};

}  // namespace afs
