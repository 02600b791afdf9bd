// In-memory backup store: the backend of the in-process runtime and of tests. Thread-safe.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "afstream/store/backup_store.h"
#include "afstream/store/checkpoint_ledger.h"

namespace afs {

class MemoryStore final : public BackupStore {
 public:
  ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) override;
  std::vector<Bytes> state_chain(int worker, ChainInfo* info = nullptr) const override;
  std::vector<std::shared_ptr<const Bytes>> state_chain_shared(int worker, ChainInfo* info = nullptr) const override;
  ChainInfo chain_info(int worker) const override;
  bool compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) override;
  void put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) override;
  std::vector<Bytes> item_records(int worker) const override;
  void drop(int worker) override;
  void confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final = false) override;
  CheckpointStatus checkpoint_status() const override;
  CheckpointStatus rejoin_checkpoints(int worker) override;
  StoreStats stats() const override;

  // For tests: flip one byte of the newest state record of worker (simulates storage corruption).
  void corrupt_latest_state(int worker);

 private:
  struct Sealed {
    std::shared_ptr<const Bytes> data;  // never null; shared with the restores reading it, so never changed
    std::uint64_t checksum = 0;
  };
  struct ItemRecord {
    Sealed sealed;
    std::vector<ItemRecordInfo> infos;
  };
  struct WorkerData {
    std::vector<Sealed> chain;
    std::uint64_t chain_bytes = 0;  // sum of the chain's record sizes: info_of in O(1), not a walk per put
    std::uint64_t generation = 0;
    std::deque<ItemRecord> items;
  };
  static Sealed seal(Bytes b);
  static const Bytes& verified(const Sealed& s, int worker, const char* what);
  static ChainInfo info_of(const WorkerData& w);

  mutable std::mutex mu_;
  std::unordered_map<int, WorkerData> workers_;
  std::uint64_t next_generation_ = 1;  // store-wide, so a worker dropped and backed up again never repeats one
  StoreStats stats_;
  CheckpointLedger ledger_;
};

}  // namespace afs
