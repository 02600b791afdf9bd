// Client of the backup server (DESIGN sections 4, 5 and 8): a BackupStore whose records live in an
// `afstream backup-server` process (afstream/runtime/backup_server.h), reached over ZeroMQ at a tcp:// or ipc://
// endpoint. Each call sends one request (afstream/net/codec.h: StoreRequestMsg) and blocks for its reply.
//
// Retries: a call waits attempt_timeout for the reply; then it drops its socket (a DEALER: unlike REQ it never gets
// stuck when the server dies mid-request), pauses (backoff), connects a new one and sends the same request again
// (same session and request id), with both the wait and the pause doubling up to their maxima, until `deadline`
// has passed since the call began: then afs::RuntimeError naming the endpoint, the operation and the worker. A
// reply carrying another request id (the answer to an earlier attempt) is dropped and counted; so is a frame that
// does not decode as a store reply.
//
// Sending a put again is safe:
//   - While the server runs, it applies each (session, request id) once: a put it already applied is answered
//     again without being applied again (BackupServer), also when the old copy arrives after the new one.
//   - If the server died after applying a put but before its reply left, the restarted server applies the resent
//     put a second time, right after the first (the client sends nothing else in between on that session). This is
//     harmless for what the runtime writes: a repeated full state just starts the chain again with the same
//     record; a repeated delta is applied twice in a row on restore, and the runtime's deltas (afstream/state/
//     tracked containers, and the StateRecord around them) set absolute values (the current value of each changed
//     slot, the last sequence numbers) or name the state they follow (space-saving-hh's log of updates), so applying
//     one twice equals applying it once; a repeated item record is
//     replayed once, since replay drops items at or below the last sequence number seen on their channel. An
//     operator whose snapshot_delta() wrote increments without naming the state they follow would not have it.
//   - After a RuntimeError (deadline passed) the put may or may not have been applied.
//
// Errors: a server reply of kind "corrupt record" becomes afs::FormatError with the store's own message (so callers
// handle a corrupt remote backup exactly like a local one); every other failure is afs::RuntimeError naming the
// endpoint. Thread-safe: each concurrent call uses its own connection (a session), taken from a pool under a mutex,
// so the worker's compute and backup threads never wait for each other's round trips. Never prints or exits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "afstream/net/curve.h"
#include "afstream/store/backup_store.h"

namespace afs {

namespace net {
struct PutStateReq;
}  // namespace net

struct RemoteStoreOptions {
  std::chrono::milliseconds attempt_timeout{500};       // wait for the reply to the first attempt
  std::chrono::milliseconds attempt_timeout_max{5000};  // the wait doubles per attempt up to this
  std::chrono::milliseconds backoff{50};                // pause before the second attempt
  std::chrono::milliseconds backoff_max{1000};          // the pause doubles per attempt up to this
  std::chrono::milliseconds deadline{10000};            // a call gives up this long after it began
  // Largest request this client sends and largest reply it accepts (the server has the same limit, in
  // BackupServerOptions; both default to net::kDefaultStoreMaxMessageBytes, 1 GiB). A put whose request would be
  // larger throws RuntimeError without sending anything.
  std::size_t max_message_bytes = std::size_t{1} << 30;
  // The incarnation (epoch) of the worker this client serves, sent with every request: once an incarnation has used
  // the server, it refuses requests from older ones (RuntimeError, "stale incarnation"), so that a worker replaced
  // while still running cannot write into its successor's backups. 0: none (never refused).
  std::uint32_t incarnation = 0;
  // CURVE on tcp:// (afstream/net/curve.h): this client's keypair and the server's public key. Unset, or an ipc://
  // endpoint: no CURVE. A server that refuses the key never answers: calls end at the deadline, saying so.
  std::optional<net::CurveClient> curve;
};

// What the client did, for tests and metrics (DESIGN 8: nothing is dropped without a counter).
struct RemoteStoreCounters {
  std::uint64_t calls = 0;          // requests made (one per BackupStore call)
  std::uint64_t resends = 0;        // attempts after the first
  std::uint64_t stale_replies = 0;  // replies to an earlier attempt or request, dropped
  std::uint64_t bad_replies = 0;    // frames that were not a decodable store reply, dropped
  std::uint64_t timeouts = 0;       // calls that gave up at the deadline
};

class RemoteStore final : public BackupStore {
 public:
  // endpoint: tcp://HOST:PORT or ipc://PATH (what `afstream backup-server` prints when it is ready). Does not
  // contact the server (it may start later); throws ConfigError naming the endpoint if ZeroMQ rejects it.
  explicit RemoteStore(std::string endpoint, RemoteStoreOptions options = {});
  ~RemoteStore() override;
  bool remote() const override { return true; }
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

  ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) override;
  // info: length and sizes of the records read; generation 0 (the server's generations are not sent).
  std::vector<Bytes> state_chain(int worker, ChainInfo* info = nullptr) const override;
  // The server compacts its own chains (afstream/ft/compactor.h): a client does not; always false.
  bool compact_state(int, std::uint64_t, std::uint64_t, Bytes) override { return false; }
  // For a client that keeps its own copy of its chain (LocalRecoveryStore; BackupServer: "Clients holding their
  // own copy"): put_state with the record's digest (XXH3-64) sent along, and a chain read that names the digests of
  // the records held (in order). Its answer: `held`, how many of them (the first ones) are the server's chain, with
  // the chain's shape in `info` and no records; or, when the server cannot vouch for them (held 0), the chain's
  // records as state_chain returns them.
  ChainInfo put_state(int worker, bool full, Bytes record, const SeqByChannel& covered, std::uint64_t digest);
  // The same put with the record left in the client's copy on the server's host (`size` bytes at frame `offset` of
  // worker's file; BackupServerOptions::local_dir): nullopt if the server cannot read it from there (it was given
  // no local directory, or the copy does not hold that record), and then nothing was put.
  std::optional<ChainInfo> put_state_in_copy(int worker, bool full, std::uint64_t offset, std::uint64_t size,
                                             std::uint64_t digest, const SeqByChannel& covered);
  struct HeldChain {
    std::uint64_t held = 0;
    ChainInfo info;
    std::vector<Bytes> records;
  };
  HeldChain state_chain_held(int worker, std::vector<std::uint64_t> held) const;
  void put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) override;
  std::vector<Bytes> item_records(int worker) const override;
  void drop(int worker) override;
  void confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final = false) override;
  CheckpointStatus checkpoint_status() const override;
  CheckpointStatus rejoin_checkpoints(int worker) override;
  // The server's store's stats (for a RocksDbStore: the puts since the server process started).
  StoreStats stats() const override;

  // Points the client at another endpoint (a backup server restarted elsewhere, e.g. on a new port). Calls in
  // progress switch at their next attempt. Throws ConfigError (and keeps the old endpoint) if ZeroMQ rejects it.
  void set_endpoint(std::string endpoint);
  std::string endpoint() const;

  RemoteStoreCounters counters() const;
  const RemoteStoreOptions& options() const { return options_; }

 private:
  std::optional<ChainInfo> put(net::PutStateReq req);
  struct Impl;
  RemoteStoreOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace afs
