// Durable backup store on RocksDB (DESIGN sections 4, 5 and 8): the backend of the backup server, with the exact
// semantics of MemoryStore (state chains per worker, item records in put order, trimming by `covered`, drop, stats).
//
// Durability: every put is one atomic rocksdb::WriteBatch (a new full state, the deletion of the old chain and of
// the item records it covers happen together), so a crash never leaves a half-written backup; after a crash the
// store holds exactly the puts up to some point, at least every put that returned.
//   - sync = false: each put is written to RocksDB's write-ahead log before it returns (in the OS page cache), so a
//     SIGKILL of the process loses nothing that was acknowledged; a machine crash may lose the last puts.
//   - sync = true: each put is also fsynced before it returns, so it survives a machine crash too (slower).
//
// Layout: key = worker (4 bytes, big-endian, sign bit flipped so iteration follows worker order) | kind (1 byte:
// 1 = state, 2 = items) | per-worker record counter (8 bytes, big-endian, so iteration is in put order).
// Value = u64 xxh3 checksum of everything after it | u8 format version | u8 kind | kind-specific header (state: u8
// full; items: u32 count and count x (u32 channel, u64 first_seq, u64 last_seq)) | the record bytes (little-endian
// numbers). The checksum is verified on every read; a mismatch throws FormatError and the record is never returned.
// Opening scans the store once to rebuild the in-memory index (record sizes, item infos, the next counter of each
// worker: one past its last key). An item record that fails its checksum there is kept but never trimmed (its infos
// cannot be trusted); reading it throws FormatError until the worker is dropped.
//
// Large state records live in value files (key-value separation, as WiscKey and RocksDB's BlobDB do): a state record
// of at least `value_file_min_bytes` is written to a file under `<path>/state-values/` (named by a number no file of
// the store has) before the batch that puts, under its key, a reference instead of the record (format version 2: u8
// full, u64 file, u64 offset, u64 size, u64 xxh3 of the record). A chain's records are appended to one file; a full
// record or a compaction starts a new one, and a file is removed once the batch that deletes its last reference is
// on disk (without sync, after the next fsync of the write-ahead log, which the store calls once for up to 64 files
// or 64 MB of them). RocksDB then writes tens of bytes for such a put instead of the record, which it would copy into
// its write batch, its write-ahead log and its memtable, and flush and compress into a table file, most often after the
// chain was already replaced. With sync, the file (and the directory of a new one) is fsynced before the batch. On
// open, files no reference names (a crash between a file's write and its batch, or between a batch and the removal
// of the files it released) are removed. Every read checks the record's size and xxh3. Without sync, a machine crash
// may also leave a reference whose bytes never reached the disk (the write-ahead log and the file are written back
// independently): reading that chain then reports it (FormatError naming the file) instead of restoring it, until
// the worker's next full backup. A store of format 1 is marked format 2 by its first batch with a reference.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "afstream/store/backup_store.h"
#include "afstream/store/checkpoint_ledger.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace afs {

struct RocksDbStoreOptions {
  // false: a put survives a SIGKILL of this process once it returns (the write-ahead log is in the OS page cache).
  // true: a put is fsynced before it returns and also survives a machine crash or power loss.
  bool sync = false;
  // State records of at least this many bytes go to value files beside the RocksDB store (see above); 0: every
  // record inside RocksDB.
  std::size_t value_file_min_bytes = 16 * 1024;
};

class RocksDbStore final : public BackupStore {
 public:
  // Opens (creating the directory and the store if missing) the store in directory `path`. Throws ConfigError,
  // naming the path and RocksDB's message, when it cannot be created or opened (not a directory, no permission,
  // already open by another process or another RocksDbStore in this one, not an afstream backup store), and
  // FormatError when the store holds a key that is not an afstream backup record.
  explicit RocksDbStore(std::string path, RocksDbStoreOptions options = {});
  ~RocksDbStore() override;
  RocksDbStore(const RocksDbStore&) = delete;
  RocksDbStore& operator=(const RocksDbStore&) = delete;

  // The BackupStore contract; RocksDB failures at run time throw RuntimeError naming the operation and the worker.
  ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) override;
  // Reads the chain's references and opens their value files under the store's lock (puts wait), so that records
  // and info agree and no put removes a file before it is read; reads the files after.
  std::vector<Bytes> state_chain(int worker, ChainInfo* info = nullptr) const override;
  ChainInfo chain_info(int worker) const override;
  // One batch: the compacted full record takes the key of the last record it replaces (so it sorts before the
  // deltas after it) and the records before it are deleted. Generations live in memory: after a reopen every chain
  // has a new one.
  bool compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) override;
  void put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) override;
  std::vector<Bytes> item_records(int worker) const override;
  void drop(int worker) override;
  // The checkpoint ledger is one value of its own, written in place on every change (survives a reopen).
  void confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final = false) override;
  CheckpointStatus checkpoint_status() const override;
  CheckpointStatus rejoin_checkpoints(int worker) override;
  // state_backups, item_backups and bytes_written count the puts of this process (this object); bytes_stored is
  // what the store holds now, including what earlier processes wrote. Bytes are record bytes, as given to put_*
  // (RocksDB's own overhead and compression are not counted).
  StoreStats stats() const override;

  const std::string& path() const { return path_; }

  // For tests: flip one byte of the newest state record of worker on disk (simulates storage corruption).
  void corrupt_latest_state(int worker);

 private:
  struct StateEntry {
    std::uint64_t counter = 0;
    std::uint64_t size = 0;  // record bytes
    std::uint64_t file = 0;  // the record's value file, 0: the record is in RocksDB
    std::uint64_t at = 0;    // where the record starts in its file
  };
  // A state record as read from RocksDB under the lock: the record itself, or its reference (state_chain opens the
  // referenced files under the lock too: an open file stays readable when a put removes it).
  struct PendingState;
  struct ItemEntry {
    std::uint64_t counter = 0;
    std::uint64_t size = 0;
    std::vector<ItemRecordInfo> infos;
    bool infos_known = true;  // false: the record failed its checksum on open; it is never trimmed, only dropped
  };
  struct WorkerIndex {
    std::vector<StateEntry> chain;
    std::deque<ItemEntry> items;
    std::uint64_t next_counter = 0;
    std::uint64_t generation = 0;
    std::uint64_t append_file = 0;  // the value file the worker's next large delta goes to (0: a new one)
    std::uint64_t append_at = 0;
  };
  struct ValueWrite {
    std::uint64_t file = 0;
    std::uint64_t at = 0;
    bool created = false;
  };

  void load_index();
  void remove_unreferenced_value_files();
  void retire_value_file(std::uint64_t file);
  void remove_retired_value_files();
  static ChainInfo info_of(const WorkerIndex& w);
  // The value file functions run under mu_.
  // Writes a record at the end of the worker's append file, or of a new one (synced when options_.sync).
  ValueWrite write_value(int worker, const WorkerIndex& w, bool new_file, const Bytes& record);
  // Puts header + record, or a reference to the record written to a value file first, into the batch.
  std::optional<ValueWrite> put_state_value(rocksdb::WriteBatch& batch, int worker, const WorkerIndex& w,
                                            std::uint64_t counter, bool full, bool new_file, const Bytes& record);
  void write_with_value(rocksdb::WriteBatch& batch, const char* operation, int worker, WorkerIndex& w,
                        const std::optional<ValueWrite>& value, std::uint64_t size);
  void release_value_file(const WorkerIndex& w, std::uint64_t file);
  void set_append_file(WorkerIndex& w, std::uint64_t file, std::uint64_t at);
  void remove_value_file(std::uint64_t file) const;
  std::string value_file_path(std::uint64_t file) const;
  void write(rocksdb::WriteBatch& batch, const char* operation, int worker);
  void save_ledger(const char* operation, int worker);  // under mu_

  std::string path_;
  RocksDbStoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;

  mutable std::mutex mu_;  // guards index_ and stats_, and serialises writes
  std::unordered_map<int, WorkerIndex> index_;
  StoreStats stats_;
  std::uint64_t next_generation_ = 1;
  std::string values_dir_;
  std::uint64_t next_file_ = 1;
  std::unordered_map<std::uint64_t, std::uint64_t> file_refs_;  // value file -> records naming it
  // Files no record names, waiting for the write-ahead log's next fsync (sync = false; retire_value_file).
  static constexpr std::uint64_t kRetiredBytesMax = 64 << 20;
  static constexpr std::size_t kRetiredFilesMax = 64;
  std::vector<std::uint64_t> retired_;
  std::uint64_t retired_bytes_ = 0;
  bool format_1_ = false;  // opened a store of format 1: the first batch with a reference marks it format 2
  CheckpointLedger ledger_;
};

}  // namespace afs
