// The backup server (DESIGN sections 4, 5 and 8): serves one BackupStore (a RocksDbStore in production, a
// MemoryStore in tests) to RemoteStore clients (afstream/store/remote_store.h) over ZeroMQ, the process behind
// `afstream backup-server`.
//
// One ROUTER socket, one thread (run()): each request (afstream/net/codec.h: StoreRequestMsg) is applied to the
// store and answered with the StoreReplyMsg carrying its request id. A put or drop is applied at most once per
// (session, request id) while the server runs: a resent copy of the last one applied is answered again from a
// cache without being applied; an older copy (overtaken by its own resend) is dropped. The most recently active
// `dedupe_sessions` sessions are remembered.
//
// Bad input never stops the server (DESIGN 8): a frame that does not decode (truncated, corrupt, over the message
// limit, of another wire version, or not a store request) is counted in bad_frames and answered with a bad-request
// error when its request id can still be read, else dropped. An exception from the store becomes an error reply
// (a FormatError, i.e. a record that failed its checksum: kind corrupt record, with the store's message; anything
// else: store failure) and is counted in store_errors. A reply too large for the message limit becomes a
// store-failure reply saying so.
//
// Fencing by incarnation: a request's envelope carries the incarnation (epoch) of its worker (RemoteStoreOptions::
// incarnation; 0: none). Once an incarnation of a worker has made a request, those of older incarnations are
// refused (kind stale incarnation; counted in stale_incarnations): a worker replaced while it still runs cannot
// write into the backups its successor restored from. The server remembers this while it runs; after a restart
// the next request of the current incarnation establishes it again.
//
// Clients holding their own copy of a chain (LocalRecoveryStore): a put_state may carry the record's digest
// (XXH3-64, checked against the record: a wrong one counts as none). For each worker whose every chain record came
// with one, the server keeps the digests of its chain in memory, with the chain's generation (a drop, a put without
// a digest or a restart forgets them; a compaction by the compactor is followed: the new full record stands for the
// client's records it replaced). A state_chain request listing the digests the client holds is answered with the
// chain's shape alone (StoreChainMsg, its length the number of the client's records that stand for the chain) when
// the server's digests are the first of the client's; else with the records, as without them. Counted in
// chains_held.
// A server on the clients' host (options.local_dir) also takes a put_state whose record is in the client's copy
// (in_copy: its offset, size and digest there) by reading it from the copy (a regular file, the frame whole and
// within the message limit, the digest the record's): the record then crosses no socket. Else the put is refused
// with no local copy, and its client sends the record.
//
// CURVE (BackupServerOptions::curve, on a tcp:// endpoint): the socket serves with the given keypair and lets in
// only clients whose public key is authorized (afstream/runtime/gatekeeper.h); refusals are counted
// (unauthorized_connections) and each refused key is reported once to on_refused.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "afstream/ft/compactor.h"
#include "afstream/net/codec.h"
#include "afstream/net/curve.h"
#include "afstream/runtime/gatekeeper.h"
#include "afstream/store/backup_store.h"

namespace afs {

struct BackupServerOptions {
  // Largest request accepted and reply sent (clients have the same limit in RemoteStoreOptions). ZeroMQ itself
  // drops the connection of a peer sending a frame over twice this size, so such frames are never read.
  std::size_t max_message_bytes = net::kDefaultStoreMaxMessageBytes;
  std::size_t dedupe_sessions = 4096;           // sessions whose last put is remembered
  std::chrono::milliseconds poll_interval{50};  // how often run() looks at `stop`
  // CURVE on a tcp:// endpoint: the server's keypair and the client keys let in. Unset (or ipc://): no CURVE.
  std::optional<net::CurveConfig> curve;
  // Called from run() once for each client key refused (CURVE), e.g. to log it.
  std::function<void(const ZapRefusal&)> on_refused;
  // Compaction (afstream/ft/compactor.h): with an operator maker (the program's registry), chains are compacted
  // into one full snapshot in the background once they need it by `compaction`. Unset: chains are left to their
  // workers, which then write full snapshots themselves.
  OperatorMaker make_operator;
  CompactionPolicy compaction;
  // Called from the compactor's thread for each chain it had to leave alone, e.g. to log it.
  std::function<void(int worker, const std::string& reason)> on_compaction_error;
  // The directory of the local copies of the workers on this host (LocalRecoveryStore; `afstream backup-server
  // --store.local-dir`): a put_state whose record is in the client's copy (in_copy) is read from there, checked
  // against its digest. "": such puts are refused (no local copy), and their clients send the records.
  std::string local_dir;
};

// What the server did; each readable at any time from any thread.
struct BackupServerCounters {
  std::uint64_t requests = 0;                  // store requests decoded (and answered, unless duplicates)
  std::uint64_t bad_frames = 0;                // frames that were not a decodable store request
  std::uint64_t duplicates = 0;                // puts and drops received again after being applied (not re-applied)
  std::uint64_t store_errors = 0;              // requests the store failed (answered with an error)
  std::uint64_t unroutable_replies = 0;        // replies dropped because their client was gone or not reading
  std::uint64_t stale_incarnations = 0;        // requests refused: a newer incarnation of their worker came since
  std::uint64_t unauthorized_connections = 0;  // CURVE: connections refused, the client's key not authorized
  std::uint64_t chains_held = 0;       // state_chain requests answered by the client's own copy (no records sent)
  std::uint64_t puts_from_copies = 0;  // put_state records read from the clients' local copies (local_dir)
  std::uint64_t copies_refused = 0;    // put_state in_copy refused (no local_dir, or the copy did not hold it)
};

class BackupServer {
 public:
  // Binds to endpoint: tcp://HOST:PORT (port 0 or * for an ephemeral one) or ipc://PATH. Throws ConfigError naming
  // the endpoint if it cannot bind (bad syntax, address in use, no permission).
  BackupServer(std::string endpoint, std::unique_ptr<BackupStore> store, BackupServerOptions options = {});
  ~BackupServer();
  BackupServer(const BackupServer&) = delete;
  BackupServer& operator=(const BackupServer&) = delete;

  // The endpoint actually bound (for tcp://127.0.0.1:0, the port the system chose): what clients connect to.
  const std::string& bound_endpoint() const { return bound_endpoint_; }

  // Serves requests until `stop` becomes true (checked every poll_interval). Call from one thread at a time; it
  // may be another thread than the constructor's. Throws RuntimeError only if the socket itself fails.
  void run(const std::atomic<bool>& stop);

  BackupServerCounters counters() const;
  // What the compactor did (all zero without one).
  CompactorCounters compactor_counters() const;
  // Blocks until the compactor has nothing queued or running (for tests).
  void wait_compactions();
  std::uint64_t bad_frames() const { return bad_frames_.load(std::memory_order_relaxed); }

  // The served store (e.g. for tests to inspect it; not to be used while run() serves from another thread unless
  // the store is thread-safe, as MemoryStore and RocksDbStore are).
  BackupStore& store() { return *store_; }

 private:
  struct Impl;
  std::unique_ptr<BackupStore> store_;
  BackupServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::string bound_endpoint_;

  std::atomic<std::uint64_t> requests_{0}, bad_frames_{0}, duplicates_{0}, store_errors_{0}, unroutable_{0}, stale_{0},
      held_{0}, from_copies_{0}, copies_refused_{0};
};

}  // namespace afs
