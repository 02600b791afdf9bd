// Local recovery (DESIGN sections 4-5): a worker process keeps its own copy of its state chain in a local directory
// beside the backup server's, so that its next incarnation, restarted on the same host after the process was killed,
// restores from that copy instead of receiving the chain from the server. The server stays the source of truth: the
// copy is used only as far as the server vouches for it, record by record (Flink's task-local recovery works alike).
//
// Every put_state first appends the record to the local file (a full record starts it again), then puts it on the
// server with its digest (XXH3-64; RemoteStore::put_state with a digest), which the server keeps beside the chain.
// state_chain reads the local file, checks each record against the digest written with it, and asks the server
// whether these records are its chain (RemoteStore::state_chain_held): the server answers how many of them are (its
// whole chain, which may end one record short of the copy when the process died between the local write and the
// server's put), and only if it cannot vouch for them (no copy, a torn or corrupt one, a chain compacted or put by
// another client, a server restarted) sends the records, which then replace the local copy. So what a restore gets
// is what the server holds, either way. A server on the same host given the copies' directory (`afstream
// backup-server --store.local-dir`) also reads each put's record from the copy (the put names the frame's place,
// size and digest; RemoteStore::put_state_in_copy), so the record crosses no socket; one that cannot is answered
// by sending the record.
//
// The copy is for failures of the process, not of the host: it is written to the page cache (no fsync), and a
// directory on tmpfs (/dev/shm) keeps it off the disk. One file per worker, `worker-<id>.chain`: frames of
// [u32 magic "AFLR" | u32 flags (1: full) | u64 record bytes | u64 XXH3-64 of the record | the record], then an end
// marker (24 zero bytes). A full record is written over the file from its start, in place (the pages of tmpfs are
// reused rather than freed and allocated again: that halved what the copy costs a KDD-like learner), so what an
// earlier, longer chain left lies after the marker and is never read. A failed
// local write (disk full, no permission) removes the copy and is counted; the put goes on to the server as without
// one. Everything else forwards to the RemoteStore. Thread-safe: puts are serialized (the local file and the
// server's chain get the records in the same order); reads hold the same lock while they touch the file. Never
// prints or exits.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "afstream/store/backup_store.h"
#include "afstream/store/remote_store.h"

namespace afs {

// What the local copy did, for tests (the backup server counts the restores and the puts read from the copies, and
// prints them when it stops).
struct LocalRecoveryCounters {
  std::uint64_t restores_local = 0;   // chain reads answered from the local copy
  std::uint64_t restores_remote = 0;  // chain reads whose records came from the server (no usable copy)
  std::uint64_t records_written = 0;  // records appended to the local copy
  std::uint64_t bytes_written = 0;    // their bytes (frames included)
  std::uint64_t write_errors = 0;     // puts not written to the copy (a write failed, or a delta had no copy to go
                                      // after: the copy is then removed until the next full record)
  std::uint64_t bad_frames = 0;       // local frames found torn or failing their digest on read
  std::uint64_t puts_in_copy = 0;     // puts the server read from the copy (the record sent by its place)
  std::uint64_t copies_refused = 0;   // puts by place the server refused (the record then sent)
};

class LocalRecoveryStore final : public BackupStore {
 public:
  // remote: the worker's client of the backup server (must outlive this object). dir: the directory of the local
  // copies, created if missing. Throws ConfigError naming dir if it cannot be created or is not a directory.
  // offer_copies: put records by their place in the copy (RemoteStore::put_state_in_copy), for a server on this
  // host that reads them from there; each refusal is answered by sending the record, and after kMaxRefusals in a
  // row (a server that reads no copies after all) the records are sent without asking.
  LocalRecoveryStore(RemoteStore& remote, std::string dir, bool offer_copies = false);
  static constexpr int kMaxRefusals = 8;
  ~LocalRecoveryStore() override;
  LocalRecoveryStore(const LocalRecoveryStore&) = delete;
  LocalRecoveryStore& operator=(const LocalRecoveryStore&) = delete;

  bool remote() const override { return true; }
  ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) override;
  std::vector<Bytes> state_chain(int worker, ChainInfo* info = nullptr) const override;
  // The server's answer (RemoteStore reads the chain for it); the copy is not touched.
  ChainInfo chain_info(int worker) const override { return remote_.chain_info(worker); }
  bool compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) override {
    return remote_.compact_state(worker, generation, count, std::move(full));
  }
  void put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) override {
    remote_.put_items(worker, std::move(record), std::move(infos));
  }
  std::vector<Bytes> item_records(int worker) const override { return remote_.item_records(worker); }
  void drop(int worker) override;
  void confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final = false) override {
    remote_.confirm_checkpoint(worker, id, workers, final);
  }
  CheckpointStatus checkpoint_status() const override { return remote_.checkpoint_status(); }
  CheckpointStatus rejoin_checkpoints(int worker) override { return remote_.rejoin_checkpoints(worker); }
  StoreStats stats() const override { return remote_.stats(); }

  // The local file of worker's copy in dir.
  static std::string path(const std::string& dir, int worker);
  std::string path(int worker) const { return path(dir_, worker); }
  // For a backup server on this host that reads puts from the copies (BackupServerOptions::local_dir): the record
  // of the frame at byte `offset` of worker's copy in dir, provided the frame is whole, holds `size` bytes and
  // has digest `digest`, which the record read must have too; else nullopt, with the reason in *why.
  static std::optional<Bytes> read_record(const std::string& dir, int worker, std::uint64_t offset, std::uint64_t size,
                                          std::uint64_t digest, std::string* why);
  const std::string& dir() const { return dir_; }
  LocalRecoveryCounters counters() const;

 private:
  struct Frame {
    bool full = false;
    std::uint64_t digest = 0;
    Bytes record;
    std::uint64_t end = 0;  // file offset just past the frame
  };
  struct Copy {
    int fd = -1;
    std::uint64_t end = 0;  // where the next frame goes (the end marker's offset)
  };
  // The frame at byte `at` of a copy of file_size bytes: nullopt at the end marker or the file's end (*bad false),
  // or when it is torn, malformed or does not match its digest (*bad true).
  static std::optional<Frame> read_frame(int fd, std::uint64_t at, std::uint64_t file_size, bool* bad);
  // The frames of worker's copy up to its end marker or the first torn or corrupt one (counted in bad_frames).
  std::vector<Frame> read_frames(int worker) const;
  // worker's open copy, opened (created) if need be: for a full record written from the start, else after the
  // frames it holds; null if it cannot be opened.
  Copy* open_copy(int worker, bool full) const;
  // Writes one frame at the copy's end (at its start when full) and the end marker after it; returns where the
  // frame went, or nullopt (and the copy removed) if the write failed.
  std::optional<std::uint64_t> append(int worker, bool full, std::uint64_t digest, const Bytes& record) const;
  // Ends the copy at `end` (a frame boundary): the end marker goes there and the next frame after it.
  void cut(int worker, std::uint64_t end) const;
  // Replaces the copy by these records (the server's chain); or removes it if empty.
  void rewrite(int worker, const std::vector<Bytes>& records) const;
  void remove_copy(int worker) const;

  RemoteStore& remote_;
  std::string dir_;
  bool offer_copies_;
  int refusals_in_a_row_ = 0;
  mutable std::mutex mu_;  // serializes puts (local write, then server) and the reads and rewrites of the files
  mutable LocalRecoveryCounters counters_;
  mutable std::unordered_map<int, Copy> copies_;  // the open copies (one per worker written or read)
};

}  // namespace afs
