// Wire codec: turns messages (batches of items, acks, controller messages, backup store requests and replies) into
// Cap'n Proto frames (afstream/net/wire.capnp) and back. The runtime only sees the plain structs below; no capnp
// type leaks out.
//
// Hot path: one Encoder per sending thread (its output stays valid until its next call, so the bytes can go
// straight into a ZeroMQ message), and decode_batch_into / decode_into on the receiving side, which reuse the
// items vector. Every decoding error (bad size, truncation, version, malformed content) is an afs::FormatError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "afstream/core/item.h"

namespace afs::net {

// Mirrors `wireVersion` in wire.capnp (static_assert'ed against the generated WIRE_VERSION in codec.cc).
inline constexpr std::uint16_t kWireVersion = 3;

// Default largest frame a decoder accepts: 64 MiB (Cap'n Proto's own default traversal limit).
inline constexpr std::size_t kDefaultMaxMessageBytes = std::size_t{64} << 20;

// Default largest backup-store request or reply (BackupServerOptions, RemoteStoreOptions): 1 GiB. A put carries a
// whole full snapshot (8 bytes per Count-Min counter), and a state-chain reply the full snapshot and the deltas after
// it, which the workers' compaction keeps below about six times the state (a full one once the deltas weigh four
// times as much): 64 MiB failed the first full backup of a 1e7-counter state. One record can never exceed Cap'n
// Proto's limit for a Data field (2^29 - 1 bytes).
inline constexpr std::size_t kDefaultStoreMaxMessageBytes = std::size_t{1} << 30;

// Limits for decoding untrusted frames. The reader's traversal limit is max_message_bytes / 8 words (each
// object is read once, so a valid frame never exceeds it) and its nesting limit is nesting_limit.
struct DecodeLimits {
  std::size_t max_message_bytes = kDefaultMaxMessageBytes;
  int nesting_limit = 8;  // our messages nest 3 deep (envelope, body, list)
};

// Items i = 0..n-1 of one channel carry seq first_seq + i. Encoding ignores Item::seq; decoding sets it.
struct BatchMsg {
  std::uint32_t channel = 0;
  std::uint64_t first_seq = 0;
  std::vector<Item> items;
  bool end_of_stream = false;          // the channel ends after the last item of this batch
  std::vector<std::uint64_t> roots{};  // ack mode: each item's root id (same length as items); else empty
  std::int64_t emitted_ns = 0;         // when its oldest item was emitted (steady clock ns; 0: unknown)

  friend bool operator==(const BatchMsg&, const BatchMsg&) = default;
};

// Cumulative: every item with seq <= `seq` on `channel` was received.
struct AckMsg {
  std::uint32_t channel = 0;
  std::uint64_t seq = 0;
  std::uint64_t covered = 0;           // items with seq <= covered are in a confirmed backup of the receiver
  std::vector<std::uint64_t> trees{};  // ack mode, to a source: pairs (root, xor of edge ids); channel/seq unused

  friend bool operator==(const AckMsg&, const AckMsg&) = default;
};

// Values equal those of wire.capnp's Control.Kind (checked in codec.cc). 0 (unset) is rejected on decode.
enum class ControlKind : std::uint16_t {
  kPeerRestarted = 1,  // worker `worker` restarted as incarnation `epoch`
  kResendFrom = 2,     // resend items of `channel` starting at `seq`
  kStop = 3,           // stop the job (or the addressed worker)
  kHeartbeat = 4,      // liveness ping/reply
  kAsk = 5,            // ask mode: a recovered receiver asks for `channel` again from `seq` (its checkpoint + 1)
  kBarrier = 6,        // checkpoint mode: checkpoint `checkpoint` on `channel` lies after item `seq`
};
std::string_view to_string(ControlKind kind);

struct ControlMsg {
  ControlKind kind = ControlKind::kHeartbeat;
  std::uint32_t worker = 0;
  std::uint32_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint32_t channel = 0;
  std::uint64_t checkpoint = 0;  // kBarrier: the checkpoint's id

  friend bool operator==(const ControlMsg&, const ControlMsg&) = default;
};

// --- Backup store requests and replies ----------------------------------------------------------------------------
// The BackupStore interface (afstream/store/backup_store.h) over the network: afs::RemoteStore (client,
// afstream/store/remote_store.h) and afs::BackupServer (afstream/runtime/backup_server.h). The plain types below
// mirror the store's without depending on afs_store.

struct ChannelSeqMsg {
  std::uint32_t channel = 0;
  std::uint64_t seq = 0;

  friend bool operator==(const ChannelSeqMsg&, const ChannelSeqMsg&) = default;
};

struct ItemRangeMsg {
  std::uint32_t channel = 0;
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;

  friend bool operator==(const ItemRangeMsg&, const ItemRangeMsg&) = default;
};

struct PutStateReq {
  std::int32_t worker = 0;
  bool full = false;  // true starts a new chain
  std::vector<std::uint8_t> record;
  std::vector<ChannelSeqMsg> covered;  // at most one entry per channel (a decoder rejects repeats)
  std::uint64_t digest = 0;            // XXH3-64 of record, as the client computed it (0: none given)
  // The record is in the client's local copy instead (wire.capnp, putState.inCopy): copy_size bytes at copy_offset
  // of its worker's file in the server's local directory; `record` is then empty.
  bool in_copy = false;
  std::uint64_t copy_offset = 0;
  std::uint64_t copy_size = 0;

  friend bool operator==(const PutStateReq&, const PutStateReq&) = default;
};

struct PutItemsReq {
  std::int32_t worker = 0;
  std::vector<std::uint8_t> record;
  std::vector<ItemRangeMsg> infos;

  friend bool operator==(const PutItemsReq&, const PutItemsReq&) = default;
};

struct StateChainReq {
  std::int32_t worker = 0;
  // The digests (XXH3-64, in chain order) of the chain records the client holds itself: when they are the server's
  // chain, the reply is a StoreChainMsg (its shape) instead of the records. Empty: the records.
  std::vector<std::uint64_t> held;
  friend bool operator==(const StateChainReq&, const StateChainReq&) = default;
};

struct ItemRecordsReq {
  std::int32_t worker = 0;
  friend bool operator==(const ItemRecordsReq&, const ItemRecordsReq&) = default;
};

struct DropReq {
  std::int32_t worker = 0;
  friend bool operator==(const DropReq&, const DropReq&) = default;
};

struct StatsReq {
  friend bool operator==(const StatsReq&, const StatsReq&) = default;
};

// Checkpoint mode (afstream/store/checkpoint_ledger.h).
struct ConfirmCheckpointReq {
  std::int32_t worker = 0;
  std::uint64_t checkpoint = 0;
  std::int32_t workers = 0;
  bool final = false;  // the worker finished its stream in this checkpoint
  friend bool operator==(const ConfirmCheckpointReq&, const ConfirmCheckpointReq&) = default;
};

struct CheckpointStatusReq {
  friend bool operator==(const CheckpointStatusReq&, const CheckpointStatusReq&) = default;
};

struct RejoinCheckpointsReq {
  std::int32_t worker = 0;
  friend bool operator==(const RejoinCheckpointsReq&, const RejoinCheckpointsReq&) = default;
};

using StoreOp = std::variant<PutStateReq, PutItemsReq, StateChainReq, ItemRecordsReq, DropReq, StatsReq,
                             ConfirmCheckpointReq, CheckpointStatusReq, RejoinCheckpointsReq>;

// request_id: echoed by the reply. session: the client's sequential request stream (one request in flight at a
// time, ids increasing); the server applies a put or drop at most once per (session, request_id) while it runs.
// 0: no deduplication.
struct StoreRequestMsg {
  std::uint64_t request_id = 0;
  std::uint64_t session = 0;
  StoreOp op;

  friend bool operator==(const StoreRequestMsg&, const StoreRequestMsg&) = default;
};

// "put_state", "put_items", "state_chain", "item_records", "drop", "stats", "confirm_checkpoint",
// "checkpoint_status", "rejoin_checkpoints".
std::string_view op_name(const StoreOp& op);
// The worker an operation is about (nullopt for stats and checkpoint_status, which are about none).
std::optional<std::int32_t> op_worker(const StoreOp& op);
// Puts, drop, confirm_checkpoint and rejoin_checkpoints change the store (and are deduplicated); the others do not.
bool op_mutates(const StoreOp& op);

struct StoreOkMsg {
  friend bool operator==(const StoreOkMsg&, const StoreOkMsg&) = default;
};

struct StoreRecordsMsg {
  std::vector<std::vector<std::uint8_t>> records;
  friend bool operator==(const StoreRecordsMsg&, const StoreRecordsMsg&) = default;
};

struct StoreStatsMsg {
  std::uint64_t state_backups = 0;
  std::uint64_t item_backups = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_stored = 0;

  friend bool operator==(const StoreStatsMsg&, const StoreStatsMsg&) = default;
};

// Values equal those of wire.capnp's StoreError.Kind (checked in codec.cc). 0 (unset) is rejected on decode.
enum class StoreErrorKind : std::uint16_t {
  kCorruptRecord = 1,     // a record failed its checksum (the store's FormatError)
  kStoreFailure = 2,      // the store could not do it
  kBadRequest = 3,        // the request could not be decoded, or is not a request
  kStaleIncarnation = 4,  // from an incarnation older than one that has used the store since (fenced off)
  kNoLocalCopy = 5,       // a put in_copy the server cannot read from the client's local copy
};
std::string_view to_string(StoreErrorKind kind);

struct StoreErrorMsg {
  StoreErrorKind kind = StoreErrorKind::kStoreFailure;
  std::string message;

  friend bool operator==(const StoreErrorMsg&, const StoreErrorMsg&) = default;
};

// The shape of a worker's state chain after a put_state (afs::ChainInfo).
struct StoreChainMsg {
  std::uint64_t generation = 0;
  std::uint64_t length = 0;
  std::uint64_t full_bytes = 0;
  std::uint64_t delta_bytes = 0;

  friend bool operator==(const StoreChainMsg&, const StoreChainMsg&) = default;
};

// The checkpoint ledger's status (afs::CheckpointStatus).
struct StoreCheckpointsMsg {
  std::uint64_t complete = 0;
  std::uint32_t round = 0;
  friend bool operator==(const StoreCheckpointsMsg&, const StoreCheckpointsMsg&) = default;
};

// chain for put_state, ok for put_items and drop, records for state_chain and item_records (or chain for a
// state_chain whose held digests are the server's chain), stats for stats; error for any; checkpoints for the
// checkpoint operations.
struct StoreReplyMsg {
  std::uint64_t request_id = 0;
  std::variant<StoreOkMsg, StoreRecordsMsg, StoreStatsMsg, StoreErrorMsg, StoreChainMsg, StoreCheckpointsMsg> result;

  friend bool operator==(const StoreReplyMsg&, const StoreReplyMsg&) = default;
};

// Worker process <-> controller (wire.capnp: WorkerReport, Directory, Assignment; afstream/runtime/
// process_cluster.h). kRegister: a worker started by hand asks for its incarnation (answered by an AssignmentMsg).
// kStandby: a spare process started by the controller is ready (sender: its slot), answered by an AssignmentMsg
// when a worker fails.
enum class ReportKind : std::uint16_t {
  kHello = 1,
  kStatus = 2,
  kFinished = 3,
  kRegister = 4,
  kStandby = 5,
  kFailed = 6
};

struct WorkerStatusMsg {
  std::uint64_t items_in = 0, items_out = 0, state_backups = 0, item_backups = 0, backup_bytes = 0;
  std::uint64_t duplicates_dropped = 0, gaps = 0, bad_messages = 0, unbacked = 0, unacked = 0;
  double divergence = 0;
  std::uint64_t source_offset = 0;
  std::uint64_t unauthorized_connections = 0;  // CURVE: connections refused (the client's key not authorized)
  std::uint64_t trees_replayed = 0;            // ack mode (sources): items replayed after their tree timed out
  std::vector<std::uint64_t> latency;          // batches by latency bucket (afstream/runtime/metrics.h)
  // Checkpoint mode (WorkerCounters): completed / abandoned checkpoints and their durations (sources), checkpoint
  // bytes, alignments and their durations, items held.
  std::uint64_t checkpoints = 0, checkpoints_abandoned = 0;
  double checkpoint_ms = 0, checkpoint_ms_max = 0;
  std::uint64_t checkpoint_bytes = 0, alignments = 0;
  double alignment_ms = 0, alignment_ms_max = 0;
  std::uint64_t items_held = 0;
  std::uint64_t input_position = 0;     // WorkerCounters::input_position
  std::uint64_t outputs_after_end = 0;  // WorkerCounters::outputs_after_end
  friend bool operator==(const WorkerStatusMsg&, const WorkerStatusMsg&) = default;
};

struct RecoveryReportMsg {
  std::uint32_t failure_count = 0;  // 0: not a recovered incarnation
  double theta = 0;
  std::uint64_t l = 0, gamma = 0;
  double alpha = 0, restore_ms = 0, recovered_ms = 0;
  std::uint64_t replayed_items = 0;
  std::int64_t missing_items = -1;
  bool done = false;
  double replay_ms = 0;
  double residual = 0;
  double first_item_ms = -1;
  double caught_up_ms = -1;
  std::int64_t repeated_items = -1;
  std::uint64_t lost_items = 0, lost_outputs = 0;
  friend bool operator==(const RecoveryReportMsg&, const RecoveryReportMsg&) = default;
};

struct WorkerReportMsg {
  ReportKind kind = ReportKind::kStatus;
  WorkerStatusMsg status;
  std::vector<std::uint8_t> final_state;
  RecoveryReportMsg recovery;
  std::string data_endpoint;  // hello: the endpoints this incarnation bound (where its peers reach it)
  std::string ack_endpoint;
  std::string curve_key;   // hello: the CURVE public key (Z85) its sockets serve with; "": CURVE off
  std::string error;       // failed: the error it stops on
  std::string job_config;  // hello: the job's options in force ("key = value" lines); "": not said
  friend bool operator==(const WorkerReportMsg&, const WorkerReportMsg&) = default;
};

struct PeerStateMsg {
  std::uint32_t worker = 0, epoch = 0;
  bool up = false, finished = false;
  std::string data_endpoint;  // as announced in the incarnation's hello (empty before it)
  std::string ack_endpoint;
  std::string curve_key;  // as announced: the CURVE public key its sockets serve with ("": CURVE off)
  bool killed = false;    // the incarnation before `epoch` was killed by the failure plan (remote workers die by it)
  friend bool operator==(const PeerStateMsg&, const PeerStateMsg&) = default;
};

// The controller's answer to a registering worker. epoch 0: refused, `error` says why.
struct AssignmentMsg {
  std::uint32_t worker = 0, epoch = 0;
  std::vector<std::uint64_t> failures;  // items processed at each earlier failure
  std::vector<std::string> job_args;    // the job's options
  std::string directory;                // the controller's directory endpoint
  std::string store;                    // the backup server's endpoint
  std::uint32_t heartbeat_ms = 0;
  std::string error;
  std::string store_key;  // the backup server's CURVE public key ("": CURVE off)
  friend bool operator==(const AssignmentMsg&, const AssignmentMsg&) = default;
};

struct DirectoryMsg {
  std::vector<PeerStateMsg> peers;
  friend bool operator==(const DirectoryMsg&, const DirectoryMsg&) = default;
};

// Feedback items from a worker to the workers upstream of it (afstream/core/operator.h, Emitter::feed_back): soft
// state, no channel and no sequence numbers (decoding leaves Item::seq 0).
struct FeedbackMsg {
  std::vector<Item> items;

  friend bool operator==(const FeedbackMsg&, const FeedbackMsg&) = default;
};

struct Message {
  std::uint32_t sender = 0;  // worker id
  std::uint32_t epoch = 0;   // the sender's incarnation
  std::variant<BatchMsg, AckMsg, ControlMsg, StoreRequestMsg, StoreReplyMsg, WorkerReportMsg, DirectoryMsg,
               AssignmentMsg, FeedbackMsg>
      body;

  friend bool operator==(const Message&, const Message&) = default;
};

// The envelope fields of a decoded frame.
struct FrameHeader {
  std::uint32_t sender = 0;
  std::uint32_t epoch = 0;
};

// Encodes into a reusable, 8-byte aligned buffer: the returned bytes stay valid until the next call on this
// Encoder (or its destruction). A batch of n items is one flat frame of 8 * (10 + 3n) bytes, built in place
// with no per-call allocation once the buffer has grown to the largest batch. Not thread-safe: one per thread.
// A moved-from Encoder may only be destroyed or assigned to.
class Encoder {
 public:
  Encoder();
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
  Encoder(Encoder&&) noexcept;
  Encoder& operator=(Encoder&&) noexcept;

  std::span<const std::uint8_t> encode_batch(std::uint32_t sender, std::uint32_t epoch, std::uint32_t channel,
                                             std::uint64_t first_seq, std::span<const Item> items, bool end_of_stream,
                                             std::span<const std::uint64_t> roots = {}, std::int64_t emitted_ns = 0);
  // Feedback items (Item::seq ignored); at most the batch limit of items per frame (FormatError beyond).
  std::span<const std::uint8_t> encode_feedback(std::uint32_t sender, std::uint32_t epoch, std::span<const Item> items);
  std::span<const std::uint8_t> encode_ack(std::uint32_t sender, std::uint32_t epoch, std::uint32_t channel,
                                           std::uint64_t seq, std::uint64_t covered = 0,
                                           std::span<const std::uint64_t> trees = {});
  std::span<const std::uint8_t> encode_control(std::uint32_t sender, std::uint32_t epoch, const ControlMsg& control);
  std::span<const std::uint8_t> encode_worker_report(std::uint32_t sender, std::uint32_t epoch,
                                                     const WorkerReportMsg& report);
  std::span<const std::uint8_t> encode_directory(std::uint32_t sender, std::uint32_t epoch,
                                                 const DirectoryMsg& directory);
  std::span<const std::uint8_t> encode_assignment(std::uint32_t sender, std::uint32_t epoch,
                                                  const AssignmentMsg& assignment);
  // Store messages are sized up front (one segment for any record that fits one); a record or reply over the
  // wire's limit of 2^29 - 1 bytes per record throws FormatError.
  std::span<const std::uint8_t> encode_store_request(std::uint32_t sender, std::uint32_t epoch,
                                                     const StoreRequestMsg& request);
  std::span<const std::uint8_t> encode_store_reply(std::uint32_t sender, std::uint32_t epoch,
                                                   const StoreReplyMsg& reply);
  std::span<const std::uint8_t> encode(const Message& message);

  // Frees the buffer (it regrows on demand), e.g. after an unusually large batch.
  void release_memory();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Convenience (allocates): an owned copy of the frame for `message`.
std::vector<std::uint8_t> encode(const Message& message);

// Decodes one frame. The frame may have any alignment (it is copied to an aligned buffer only if it is not
// 8-byte aligned). Throws FormatError if the frame is empty, not a multiple of 8 bytes, larger than
// limits.max_message_bytes, truncated or malformed, of another wire version, has trailing bytes, or holds a
// batch whose keys/values/times lengths differ.
Message decode(std::span<const std::uint8_t> frame, const DecodeLimits& limits = {});

// As decode, but reuses `out`: if out.body already holds a BatchMsg its items storage is reused. `out` is
// unspecified after a throw.
void decode_into(std::span<const std::uint8_t> frame, const DecodeLimits& limits, Message& out);

// For answering a frame that does not decode: the request id of a frame that holds a store request, read as
// leniently as possible (any version, any size, whatever the rest holds), or nullopt. Never throws.
std::optional<std::uint64_t> peek_store_request_id(std::span<const std::uint8_t> frame) noexcept;

// Hot path for data sockets: decodes a batch into `out`, reusing out.items' storage. Throws FormatError (as
// decode) and also if the frame is a valid message that is not a batch. `out` is unspecified after a throw.
FrameHeader decode_batch_into(std::span<const std::uint8_t> frame, const DecodeLimits& limits, BatchMsg& out);

}  // namespace afs::net
