// One worker (DESIGN 4): runs one operator instance (or a source) on its own thread, connected to its peers by
// ZeroMQ sockets carrying Cap'n Proto frames. It implements the approximate fault-tolerance protocol of DESIGN 3
// and 5 on the receive, compute and send paths; backups are written by its BackupWriter thread.
//
//   receive: dedupe by (channel, seq); count received-unprocessed-unbacked items; when a batch would make that
//            count exceed l, back up all of them and defer the batch's ack until the store confirms; else ack now.
//   compute: process in arrival order; after each item, back up the state when divergence() > theta (waiting for
//            the store's confirmation, so a crash never loses more than theta of state).
//   send:    keep every sent item until acknowledged; block at gamma unacknowledged items; resend to a restarted
//            peer; when gamma is 0 the unacknowledged items are part of every state backup.
// A crash (kill()) abandons everything in memory, as a real crash does: state, queues, unacked buffers and
// backups not yet written.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "afstream/core/operator.h"
#include "afstream/core/registry.h"
#include "afstream/core/thresholds.h"
#include "afstream/core/topology.h"
#include "afstream/ft/backup_writer.h"
#include "afstream/ft/records.h"
#include "afstream/net/codec.h"
#include "afstream/net/curve.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/gatekeeper.h"
#include "afstream/runtime/metrics.h"
#include "afstream/runtime/progress_page.h"
#include "afstream/runtime/ring.h"
#include "afstream/runtime/wakeup.h"
#include "afstream/store/backup_store.h"

namespace afs {

using Clock = std::chrono::steady_clock;

// The endpoints a worker incarnation bound: where its peers send it items and acknowledgements; with CURVE on tcp://
// also the public key they serve with (made for this incarnation: gatekeeper.h).
struct PeerEndpoints {
  std::string data;
  std::string acks;
  std::string key;  // Z85; "": no CURVE
  friend bool operator==(const PeerEndpoints&, const PeerEndpoints&) = default;
};

// Where each worker can be reached, and whether it is up: shared by the workers of one cluster (threads), or kept
// by each worker process from its controller's announcements.
//
// One source of truth for endpoints: what a worker actually bound. `bind` says only where workers of this
// directory bind: an inproc:// or ipc:// prefix (worker w, incarnation e binds prefix + "w<w>-e<e>-data" and
// "-acks", e.g. "inproc://afs-JOB-" or "ipc:///tmp/afs-JOB/"), or tcp://IP (both on ports the operating system
// chooses). The worker records the endpoints it bound (read back from the socket) with set_up(); its peers connect
// to those: in one process they read them here, across processes the worker announces them in its hello and the
// controller's directory carries them to every peer.
class PeerDirectory {
 public:
  PeerDirectory(std::string bind, int workers);
  // Where worker `worker`, incarnation `epoch`, binds its data (acks false) or acknowledgement socket.
  std::string bind_endpoint(int worker, std::uint32_t epoch, bool acks) const {
    return bind_endpoint(bind_, worker, epoch, acks);
  }
  // The same under a directory bind `bind` (for a controller that removes a replaced incarnation's ipc:// files).
  static std::string bind_endpoint(const std::string& bind, int worker, std::uint32_t epoch, bool acks);
  bool binds_tcp() const;
  // Where to reach incarnation `epoch` of `worker`: the endpoint it bound, or "" unless that is its current,
  // announced incarnation.
  std::string endpoint(int worker, std::uint32_t epoch, bool acks) const;
  // The endpoints its current incarnation announced (empty before any).
  PeerEndpoints endpoints(int worker) const;
  // The endpoints (and CURVE key) incarnation `epoch` of `worker` announced, or all empty unless that is its
  // current, announced incarnation.
  PeerEndpoints endpoints(int worker, std::uint32_t epoch) const;
  // A worker's current incarnation and whether it is up, read together: set_up publishes both at once, so a
  // reader never sees a new incarnation still down (mode none drops what it holds for a peer that is down after
  // it started: read apart, a receiver coming up for the first time looked crashed for an instant, and its
  // sender dropped every item it held, about one run in 3,000 under load).
  struct PeerState {
    std::uint32_t epoch = 0;
    bool up = false;
    bool crashed() const { return !up && epoch > 0; }  // down after an incarnation started
  };
  PeerState state(int worker) const {
    const auto s = slots_[worker].state.load(std::memory_order_acquire);
    return {static_cast<std::uint32_t>(s >> 1), (s & 1) != 0};
  }
  std::uint32_t epoch(int worker) const { return state(worker).epoch; }
  bool up(int worker) const { return state(worker).up; }
  // Incarnation `epoch` of `worker` is up and reached at `at`.
  void set_up(int worker, std::uint32_t epoch, PeerEndpoints at);
  void set_down(int worker);
  // A worker that finished its stream for good (every output acknowledged): its receivers may finish too.
  void set_finished(int worker) { slots_[worker].finished.store(true, std::memory_order_release); }
  bool finished(int worker) const { return slots_[worker].finished.load(std::memory_order_acquire); }
  std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::atomic<std::uint64_t> state{0};  // incarnation << 1 | up
    std::atomic<bool> finished{false};
    std::uint32_t endpoints_epoch = 0;  // the incarnation `at` belongs to (under mu_)
    PeerEndpoints at;
  };
  std::string bind_;
  std::unique_ptr<Slot[]> slots_;
  mutable std::mutex mu_;
  std::atomic<std::uint64_t> version_{0};
};

// What a crashed incarnation leaves behind for its successor, to measure the loss (tests) and recovery time.
struct CrashInfo {
  FailureRecord record;
  Clock::time_point killed_at;
  Bytes state_at_crash;    // full snapshot at the crash (only when RunConfig::measure_losses)
  SeqByChannel processed;  // per input channel, the last sequence number the crashed state reflected
  // false: nobody saw the crash (a killed process); the successor fills in the thresholds that were in force.
  bool observed = true;
  // `processed` holds the crashed incarnation's positions: seen at the crash (threads), or read by the successor from
  // the crashed process's progress page (progress_page.h; to within its last batch). false: not known.
  bool positions_known = true;
};

// Everything the workers of one cluster share.
struct ClusterContext {
  const Topology* topology = nullptr;
  const Registry* registry = nullptr;
  RunConfig config;
  BackupStore* store = nullptr;
  zmq::context_t* zmq = nullptr;
  PeerDirectory* directory = nullptr;
  std::vector<std::unique_ptr<WorkerCounters>> counters;               // per worker, survive crashes
  std::vector<std::atomic<std::uint64_t>>* source_progress = nullptr;  // per worker: max source offset reached
  Gatekeeper* gate = nullptr;  // needed when the directory binds tcp:// (gatekeeper.h)
  // CURVE on tcp://: this process's keypair, its identity when it connects to peers; each incarnation's sockets serve
  // with a keypair of their own. nullptr: CURVE off (tcp:// sockets are fenced by PLAIN user names).
  const net::CurveKeypair* curve = nullptr;
  // A recovering worker process fetches its state chain and item records while it sets itself up (worker_process.cc):
  // restore() takes them from here instead of asking the store (the first restore only; exceptions come out of get()).
  std::optional<std::shared_future<std::vector<Bytes>>> prefetched_chain;
  std::optional<std::shared_future<std::vector<Bytes>>> prefetched_items;
  // A worker process's local directory (--worker.local-state): it keeps its input positions there, on its progress
  // page, for its next incarnation (progress_page.h). "": none (threads, where a crash's positions are seen).
  std::string progress_dir;
};

// R-schedule (DESIGN 3; proofs/general-bounds.md): the threshold schedule of worker `worker` before any failure,
// its user bounds split over the copies of its stage and scaled by the pipeline below it. op: the worker's operator
// (its beta, and whether its copies' divergences combine by max), null for a source.
ThresholdSchedule threshold_schedule_of(const Topology& topology, const RunConfig& config, int worker,
                                        const Operator* op);
// The runtime thresholds in force at each of the worker's failures (failures[j]: items it had processed at failure
// j + 1), as its incarnations compute them. For failure records that no incarnation completed (the controller).
std::vector<RuntimeThresholds> thresholds_at_failures(const Topology& topology, const RunConfig& config, int worker,
                                                      const Operator* op, const std::vector<std::uint64_t>& failures);

class Worker {
 public:
  // failures: where (in items this worker had processed) each of its earlier failures happened; its size is k.
  // crash: what the previous incarnation left.
  Worker(ClusterContext& ctx, int id, std::uint32_t epoch, std::vector<std::uint64_t> failures,
         std::optional<CrashInfo> crash);
  ~Worker();

  // The thread body. Returns normally when the worker finished its stream, or after a kill() (crashed() true).
  void run();
  // Safe from any thread. A worker waiting for input wakes at once (it waited out its poll, up to 1 ms: a source
  // held by its window noticed a failure of all workers 1.3-5 ms after the kill, while the restored learners
  // waited for it).
  void kill() {
    kill_.store(true, std::memory_order_release);
    wakeup_.signal();
  }
  bool crashed() const { return crashed_; }
  bool finished() const { return finished_; }
  bool kill_requested() const { return kill_.load(std::memory_order_acquire); }  // kill() was called
  // This incarnation has restored its state (or started with none) and is running. Safe from any thread.
  bool restored() const { return restored_.load(std::memory_order_acquire); }

  // After a crash: what this incarnation lost (read once run() returned).
  CrashInfo take_crash_info() { return std::move(crash_out_); }
  // After a recovery: the record of the failure it recovered from, completed with recovery measurements.
  // True once the recovery is complete (replayed, loss measured, compensated, and the first item from upstream
  // processed or the input ended): recovered_from() is final.
  bool recovery_complete() const { return recovery_complete_.load(std::memory_order_acquire); }
  // Safe to call from another thread while run() is in progress (the process runtime reports it).
  std::optional<FailureRecord> recovered_from() const {
    std::lock_guard lock(recovered_mu_);
    return recovered_;
  }
  // The operator (nullptr for sources), e.g. to read a sink's results after the run.
  Operator* op() { return op_.get(); }

 private:
  struct OutChannel {
    int id = 0;
    int to_worker = 0;
    std::uint64_t out_seq = 0;  // last seq emitted
    std::uint64_t acked = 0;    // highest seq acknowledged
    std::uint64_t sent = 0;     // highest seq handed to the socket
    std::uint64_t eos_seq = 0;  // seq of the end-of-stream punctuation, 0 if not ended
    std::uint64_t covered = 0;  // highest seq the receiver reports in a confirmed backup (what a source replays from)
    // A rewinding source: the highest seq the receiver's current incarnation holds (what its backups cover, or what
    // it has acknowledged), even past what this incarnation has produced again; items up to it are not sent (flush).
    std::uint64_t receiver_holds = 0;
    std::int64_t unsent_since_ns = 0;  // when the oldest item not sent yet was emitted (latency, metrics.h)
    std::uint64_t released = 0;        // microbatch: highest seq of a committed batch (sent; later ones are held)
    // The outputs of finish(), (first, last] (no value before it ran): never lost, as every recovery runs finish()
    // again (an ended input restores as ended), so on_crash() does not count them. Outputs after them (of items
    // processed after finish(): duplicates a restarted sender numbered after its end of stream) are counted.
    std::optional<std::pair<std::uint64_t, std::uint64_t>> finish_outputs;
    bool numbering_pending = false;  // after a recovery: waiting for the receiver to say where to continue
    Clock::time_point queried_at{};
    Ring<Item> unacked;  // items with seq in (acked, out_seq]
    // Mode none (and a rewinding source, and ack mode): the items not sent yet are pending[pending_head, size). The
    // sent ones at the front are dropped only once they are half the vector (or all of it): erasing them at every
    // flush shifted the whole backlog, up to the flow window, for each batch sent.
    std::vector<Item> pending;
    std::vector<std::uint64_t> pending_roots;  // ack mode: the root of each pending item
    std::size_t pending_head = 0;
    std::size_t unsent() const { return pending.size() - pending_head; }
  };
  void drop_acknowledged(OutChannel& o, std::uint64_t seq);
  struct InChannel {
    int id = 0;
    int from_worker = 0;
    bool from_source = false;     // the sender is a replayable source (R-source)
    std::uint64_t received = 0;   // highest seq received
    std::uint64_t processed = 0;  // highest seq processed (reflected in the state)
    bool ended = false;
    // Mode none: the number of the end of stream once received (staged or processed); 0 before (Worker::on_batch).
    std::uint64_t eos_received = 0;
    std::uint64_t ack_due = 0;   // cumulative ack to send at the end of this receive() call
    std::uint64_t admitted = 0;  // highest seq admitted into the queue (and so acknowledged)
    bool touched = false;
    std::deque<std::pair<std::uint64_t, std::uint64_t>> deferred_acks;  // (seq, backup ticket), in order
    std::uint64_t covered = 0;   // highest seq reflected in a confirmed state backup
    std::uint64_t last_ack = 0;  // highest seq acknowledged to the sender
    // A source to acknowledge at once, not at its next step: nothing acknowledged yet in this incarnation, the source
    // restarted (a new incarnation learns what this worker holds from its acks), or this worker dropped items it sent
    // again after a rewind.
    bool ack_now = true;
    std::uint64_t covered_sent = 0;  // covered value last reported to the sender
    bool ask_pending = false;        // ask mode, after a restart: still asking its sender to resend (send_asks)
    Clock::time_point asked_at{};
  };
  // After a recovery, per input channel: what the restored state and the replayed log hold, to measure the items
  // the recovered state never sees once the sender's first batch shows where it resumes (RecoveryInfo).
  struct ResumeGap {
    std::uint64_t restored = 0;  // highest seq in the restored state
    std::uint64_t replayed = 0;  // items replayed from the log (seq above restored)
    std::uint64_t received = 0;  // highest seq after the replay
    bool known = false;          // the sender resumed
    std::uint64_t missing = 0;   // once known: items after restored neither replayed nor sent again
    // Until known, only the holes in the replayed range are certain to be missing (nothing past received is
    // processed before the sender resumes, so a later measurement covers the rest).
    std::uint64_t counted() const { return known ? missing : received - restored - replayed; }
  };
  struct Crash {};
  struct SourceMark {
    std::uint64_t offset = 0;             // source position after a produced batch
    std::vector<std::uint64_t> out_seqs;  // out_seq of each output channel at that point
  };

  class RuntimeEmitter;

  void setup_sockets();
  void restore();
  // Not a recovery nor a later incarnation: the first start of this worker in this run.
  bool first_start() const { return !crash_in_ && epoch_ <= 1; }
  void refresh_peers();
  bool peer_ready(int worker);
  zmq::socket_t& socket_to(int worker, bool acks);
  bool receive(std::chrono::milliseconds wait);
  bool decode(const zmq::message_t& msg);
  void on_batch(const net::BatchMsg& b, std::uint32_t sender, std::uint32_t sender_epoch);
  void on_control(const net::ControlMsg& c, std::uint32_t sender, std::uint32_t sender_epoch);
  void query_numbering();
  void on_ack(const net::AckMsg& a, std::uint32_t sender_epoch);
  void release_acks();
  void admit();
  bool send_ack(InChannel& in, std::uint64_t seq);  // false: the sender is not reachable yet
  void send_due_acks(bool all = false);
  std::size_t process_some(std::size_t budget);
  void process_one(const ChannelItem& ci);
  // After each processed item. Inline fast path: in approx mode, an item that cannot be due for a backup
  // (unchecked_items_: alpha proves it cannot reach the Theta trigger, or, under R-logall, the next periodic backup
  // is further away) and for which no ft.replay-items-max backup is due costs a count and a compare; the rest goes
  // to after_update_checked (every mode's per-item rule).
  void after_update() {
    if (unchecked_items_ > 0 && since_state_backup_ + 1 < replay_limit_) {
      ++since_state_backup_;
      --unchecked_items_;
      return;
    }
    after_update_checked();
  }
  void after_update_checked();
  void produce();
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time);
  // The feedback side channel and ready() (afstream/core/operator.h).
  void broadcast(std::uint64_t key, std::int64_t value, std::int64_t time);
  void send_feedback();
  void call_on_blocked();
  std::vector<Item> feedback_out_;  // fed back since the last send_feedback()
  Clock::time_point blocked_called_at_{};
  void flush(bool force);
  std::uint64_t number_output(OutChannel& o);   // the next output's number (the end of stream kept after it)
  bool dropped_after_end(const OutChannel& o);  // an output on o after its end of stream went out: counted
  bool send_batch(OutChannel& out, std::uint64_t first_seq, std::span<const Item> items, bool eos,
                  std::span<const std::uint64_t> roots = {});
  void finish_outputs();
  bool all_acked() const;
  bool all_covered() const;
  void backup_at_end_of_stream();
  std::uint64_t unacked_total() const;
  std::uint64_t window() const;
  void backup_items();
  // residual > 0: the operator may leave that much of its divergence unwritten (Operator::backup_partial_delta).
  void backup_state(bool wait, double residual = 0);
  void backup_state_now(bool wait, double residual);  // backup_state without adapt_replay_interval's measuring
  void capture_snapshot(StateRecord& rec, bool full, double residual);
  void count_chain_bytes(bool full, std::size_t bytes);
  void check_kill() {
    if (kill_.load(std::memory_order_acquire)) throw Crash{};
  }
  void on_crash();
  void mark_recovered();
  void on_live_item(bool ended);
  void maybe_complete_recovery();
  bool logs_every_item() const;
  bool writes_item_log() const;  // logs_every_item() and the log is needed (not behind replayable sources)
  void refresh_alpha();          // op_alpha_ = op_->alpha(), which may shrink as the state evolves
  void measure_loss();
  void compensate();
  void continue_output_numbering();
  void resolve_gap(InChannel& in, std::uint64_t resumed_at);
  std::int64_t current_missing() const;
  void maybe_compensate();
  void update_coverage();
  void advance_committed_mark();
  void rewind_source();
  void back_up_position_if_due();  // sources
  // Per-batch acknowledgements and held outputs: every mode but none and ack (whose trees do that job).
  bool acks_enabled() const { return ctx_.config.mode != FtMode::None && ctx_.config.mode != FtMode::Ack; }
  bool ack_mode() const { return ctx_.config.mode == FtMode::Ack; }
  // Ack mode (Storm style, DESIGN 6). Sources: the trees of their items, and when each times out.
  struct Tree {
    std::uint64_t xor_ = 0;    // of the edge ids not acknowledged yet: 0 = complete
    std::uint64_t offset = 0;  // the source item it roots (replayed from here)
  };
  std::unordered_map<std::uint64_t, Tree> trees_;
  std::uint64_t trees_completed_ = 0;          // sources: trees completed since the last backup of the position
  Clock::time_point position_backed_up_at_{};  // sources: when the last backup of the position was taken
  std::deque<std::pair<Clock::time_point, std::uint64_t>> tree_deadlines_;  // (deadline, root), emission order
  std::uint64_t next_root_ = 0;
  std::uint64_t current_root_ = 0;        // the tree of the item in process (0: none)
  std::uint64_t tree_xor_ = 0;            // its edge id, xor the edge ids of what processing it emitted so far
  std::vector<std::uint64_t> tree_acks_;  // (root, xor) pairs not yet in a backup
  std::deque<std::pair<std::uint64_t, std::vector<std::uint64_t>>> deferred_tree_acks_;  // (backup ticket, pairs)
  // Ack mode: backed-up tree acknowledgements not yet sent, by source (the source not up yet in this process's
  // directory, or its socket not ready): sent at the next release instead of dropped.
  std::unordered_map<int, std::vector<std::uint64_t>> held_tree_acks_;
  Ring<std::uint64_t> staging_roots_;  // ack mode: the roots of staging_ / queue_, in the same order
  Ring<std::uint64_t> queue_roots_;
  std::uint64_t new_root();
  void register_tree(std::uint64_t root, std::uint64_t offset, Clock::time_point deadline);
  void on_tree_acks(const std::vector<std::uint64_t>& pairs);
  void replay_expired_trees();
  void ack_checkpoint_if_due();
  void release_tree_acks();
  std::uint64_t ack_committed_offset() const;
  void back_up_ack_position_if_due();
  struct EosAck {
    std::uint64_t ticket = 0;
    std::size_t slot = 0;
    std::uint64_t seq = 0;
  };
  std::deque<EosAck> deferred_eos_acks_;
  struct LatencyMark {  // a received batch: its channel slot, last seq, and when its oldest item was emitted
    std::size_t slot = 0;
    std::uint64_t seq = 0;
    std::int64_t emitted_ns = 0;
  };
  std::deque<LatencyMark> latency_marks_;
  void count_processed(std::size_t n);
  void record_latencies();  // ack mode: end-of-stream acks waiting for their backup
  void end_inputs_of_finished_senders();
  void begin_finish_tree();
  void end_finish_tree();
  bool capture_finish_ = false;
  bool finish_pending_ = false;     // ack mode: the end of stream waits for the finish() tree
  std::vector<Item> finish_items_;  // ack mode: what finish() emitted (replayed whole)
  bool ask_mode() const { return ctx_.config.mode == FtMode::Ask; }
  bool microbatch_mode() const { return ctx_.config.mode == FtMode::MicroBatch; }
  void end_microbatch();
  void end_microbatch_if_due();
  Clock::time_point batch_started_ = Clock::now();
  void checkpoint();
  void checkpoint_if_idle();
  void send_asks();
  Clock::time_point last_checkpoint_at_{};
  OutChannel& out_for(std::uint64_t key);

  // Checkpoint mode (Flink-style barrier checkpoints; worker_checkpoint.cc, runtime/README.md "Checkpoint mode").
  bool checkpoint_mode() const { return ctx_.config.mode == FtMode::Checkpoint; }
  struct Barrier {  // a checkpoint whose notices have started to arrive: where it lies on each input channel
    std::uint64_t id = 0;
    std::vector<std::uint64_t> at;  // per input slot: the last item before the barrier
    std::vector<bool> known;        // per input slot: its notice arrived
    Clock::time_point first_notice;
  };
  struct Notice {  // a barrier notice for an output channel, sent (in order with the items) on the data socket
    std::uint64_t id = 0;
    std::uint64_t seq = 0;
    bool sent = false;
  };
  void restore_checkpoint();
  void on_barrier(const net::ControlMsg& c, std::uint32_t sender, std::uint32_t sender_epoch);
  std::size_t process_aligned(std::size_t budget);
  bool held_back(const ChannelItem& ci, std::size_t slot) const;
  void advance_checkpoints();
  void take_aligned_checkpoints();
  void start_checkpoint_if_due();
  bool settle_checkpoint(Clock::time_point now);
  void snapshot_checkpoint(std::uint64_t id);
  void write_checkpoint_record(std::uint64_t id, bool rebase);
  void poll_checkpoints();
  bool send_notices(OutChannel& o);
  bool barrier_due(const OutChannel& o) const;
  void check_round(const std::unordered_set<int>& learned);
  void verify_peers();
  std::unordered_set<int> unverified_peers_;  // restarted peers whose round is not known yet (check_round)
  void acknowledge_admitted();
  bool final_checkpoint_complete() const { return final_checkpoint_ != 0 && complete_ >= final_checkpoint_; }
  std::deque<Barrier> barriers_;               // by id, oldest first
  std::vector<std::deque<ChannelItem>> held_;  // per input slot: items past the pending barrier (channel blocked)
  std::deque<ChannelItem> released_;           // held items, processed before the queue once the barrier passed
  std::vector<std::deque<Notice>> notices_;    // per output slot: notices of checkpoints not known complete
  std::uint32_t round_ = 0;                    // checkpoint round of this incarnation (checkpoint_ledger.h)
  std::uint32_t next_checkpoint_ = 1;          // source: n of the next checkpoint it starts
  std::uint64_t last_taken_ = 0;               // the latest checkpoint this worker snapshotted (or restored)
  std::uint64_t final_checkpoint_ = 0;         // the checkpoint in which it had finished its stream (0: none yet)
  std::uint64_t complete_ = 0;                 // the latest complete checkpoint it knows of
  std::uint64_t in_flight_ = 0;                // source: the checkpoint it started that is not complete yet
  std::uint64_t checkpoint_failures_ = 0;      // source: abandoned checkpoints (ft.checkpoint-timeout)
  std::uint64_t offset_at_start_ = 0;          // source: offset when the latest checkpoint started
  Clock::time_point started_at_ = Clock::now();
  Clock::time_point completed_at_{};
  Clock::time_point polled_at_{};

  ClusterContext& ctx_;
  const int id_;
  const std::uint32_t epoch_;
  const std::vector<std::uint64_t> failure_positions_;
  const int failure_count_;
  const WorkerRef ref_;
  const StageSpec& stage_;
  WorkerCounters& counters_;
  ThresholdSchedule schedule_;
  std::optional<CrashInfo> crash_in_;
  std::unique_ptr<ProgressPage> progress_page_;  // a worker process's input positions, after each batch
  CrashInfo crash_out_;
  std::optional<FailureRecord> recovered_;  // written under recovered_mu_ (set_recovered)
  mutable std::mutex recovered_mu_;
  std::atomic<bool> recovery_complete_{false};
  void set_recovered(const FailureRecord& r) {
    std::lock_guard lock(recovered_mu_);
    recovered_ = r;
  }
  bool awaiting_first_item_ = false;
  bool awaiting_live_item_ = false;  // recovered incarnation: no item from upstream processed yet (first_item_ms)
  bool catching_up_ = false;         // recovered incarnation: not yet back where the crashed one was (caught_up_ms)
  void check_caught_up();
  void publish_progress();                 // onto progress_page_, if any
  std::uint64_t lost_items_now() const;    // what a failure now would lose (FailureRecord::lost_items)
  std::uint64_t lost_outputs_now() const;  // (FailureRecord::lost_outputs)
  bool back_where_crashed(std::optional<std::uint32_t> except = std::nullopt) const;
  bool compensated_ = false;         // compensate() ran; the recovery completes once awaiting_live_item_ is false too
  Clock::time_point restored_at_{};  // end of restore(), for FailureRecord::replay_ms

  std::unique_ptr<Operator> op_;
  std::unique_ptr<Source> source_;
  std::uint32_t op_type_ = 0;
  std::uint64_t unchecked_items_ = 0;  // items that may skip the Theta check (after_update: alpha bounds their drift)
  bool op_waits_ = false;              // op_->waits_for_feedback(): ready() is consulted
  bool silent_process_ = false;        // process() never emits (beta() 0, no feedback): runs before the numbering
  // alpha 0, a StatelessOperator: nothing to back up, so in ack mode its acknowledgements go out as soon as it has
  // processed the items, and behind replayable sources it backs up its positions every ft.exact-state-every items (held
  // for a state backup every ft.ack-state-every items, a tokenizer of 600 chunks never sent them).
  bool stateless_op_ = false;
  bool alpha_bounds_drift_ = false;  // op_->divergence_bounded_by_alpha() with a positive alpha
  // op_->alpha() as last read (refresh_alpha). Constant unless alpha_may_shrink_: then read again every few thousand
  // items under R-logall, after each Theta backup and after a restore; it only shrinks in between, so a value read
  // earlier bounds what follows.
  double op_alpha_ = 0;
  bool alpha_may_shrink_ = false;      // op_->alpha_may_shrink()
  std::size_t numbering_pending_ = 0;  // output channels waiting for their receiver's answer (query_numbering)
  std::uint64_t unacked_ = 0;  // items held unacknowledged over all output channels (sum of OutChannel::unacked)
  // Items emitted and not yet added to counters_.items_out: published once per flush, not by an atomic add per item.
  std::uint64_t emitted_unpublished_ = 0;
  std::uint64_t source_offset_ = 0;
  std::uint64_t source_size_ = 0;
  std::deque<SourceMark> source_marks_;  // produced batches not yet covered on every channel
  SourceMark committed_mark_;            // the latest position every channel's receiver has covered by a backup
  std::uint64_t produced_high_ = 0;      // furthest offset produced (items_in counts each source item once)

  std::vector<OutChannel> outs_;
  // channel id -> index in outs_ / ins_ (-1: not a channel of this worker)
  std::vector<int> out_slot_;
  std::vector<InChannel> ins_;
  std::vector<int> in_slot_;
  std::size_t in_slot(std::uint64_t channel) const { return static_cast<std::size_t>(in_slot_[channel]); }
  std::size_t out_slot(std::uint64_t channel) const { return static_cast<std::size_t>(out_slot_[channel]); }
  std::vector<std::size_t> key_route_;  // downstream instance -> out index, for the single keyed output stage
  bool single_key_route_ = false;
  // Approximate mode, sources: a receiver's restart rewinds the source (rewind_source), which produces again from
  // the position every receiver has covered, so the source keeps no copy of what it sent: its items go out from
  // `pending` as in mode none, and, as there, only the items not sent yet count against the flow window (the
  // sockets' high-water marks bound the rest). Acknowledgements still carry coverage (what it commits and finishes
  // on). A window over what was sent would couple its receivers: one slower receiver (a hotter key range) would
  // hold the whole window and leave the others starved.
  bool resends_by_rewind_ = false;
  // rewind_source() calls so far: a flush whose send learned a restart (peer_ready) and so rewound the source knows
  // that its position in the pending items is gone.
  std::uint64_t rewinds_ = 0;
  // Approximate mode, every input from a replayable source (which rewinds for a restarted receiver): acknowledged
  // items cannot be lost (Proposition S), so admission is not limited by l. Unbacked items are still counted: a
  // punctuation logs them with it, as restore() expects.
  bool inputs_replayable_ = false;
  // Behind replayable sources with a remote store: the state is backed up by the cost rule (ft.replay-overhead-max)
  // alone, not by Theta, and a new backup is never waited for (after_update_checked).
  bool never_wait_for_store_ = false;
  // ft.replay-overhead-max, or for a never_wait_for_store_ worker 1% when that is 0 (its only backups are the cost
  // rule's).
  double replay_overhead_max_ = 0;
  // Whether sent items are kept until acknowledged (OutChannel::unacked) rather than dropped once sent (pending).
  bool keeps_sent_items() const { return acks_enabled() && !resends_by_rewind_; }

  Ring<ChannelItem> staging_;  // received, not yet admitted (nor acknowledged)
  Ring<ChannelItem> queue_;    // admitted (acknowledged), unprocessed
  std::size_t unbacked_ = 0;   // how many items at the tail of queue_ are not backed up
  std::uint64_t since_state_backup_ = 0;
  // RunConfig::replay_items_max where it applies (inputs_replayable_); with ft.replay-overhead-max, the interval
  // adapt_replay_interval chose.
  std::uint64_t replay_items_max_ = 0;
  std::uint64_t replay_limit_ = UINT64_MAX;  // replay_items_max_, or no limit when it is 0 (after_update's fast path)
  // ft.replay-overhead-max (adapt_replay_interval): the interval's bounds, and the smoothed costs it is chosen from.
  std::uint64_t replay_interval_min_ = 0, replay_interval_max_ = 0;
  double backup_cost_ns_ = 0, item_cost_ns_ = 0;
  std::uint64_t backup_task_ns_seen_ = 0;  // backup_task_ns() already counted
  std::uint64_t backup_task_ns() const;
  Clock::time_point last_backup_end_{};
  void adapt_replay_interval(Clock::time_point started, std::int64_t cpu_ns, std::uint64_t items);
  std::uint64_t source_backup_every_ = 0;  // sources: items between backups of the position (set by the constructor)
  bool coverage_advanced_ = false;         // rewinding sources: a receiver's backup covers more since the last look
  std::uint64_t backed_up_position_ = 0;   // sources: the position of their last backup
  std::uint64_t chain_length_ = 0;         // records in the store's chain since (and with) the last full one
  std::uint64_t last_full_bytes_ = 0;
  std::uint64_t delta_bytes_since_full_ = 0;
  std::uint64_t last_delta_bytes_ = 0;  // the previous delta's size: capture_snapshot reserves about that much
  // The chain as the store's latest reply to a state put described it (set on the backup writer's thread): a store
  // that compacts (ft/compactor.h) keeps it short, and then the worker never writes a full snapshot to do so.
  struct ChainSeen {
    std::mutex mu;
    bool fresh = false;
    std::uint64_t put = 0;  // which put (state_puts_) the reply answered
    ChainInfo info;
  };
  std::uint64_t state_puts_ = 0;  // state puts submitted
  ChainSeen chain_seen_;
  OperatorSpec op_spec_;  // written with full snapshots, so that the store can compact the chain
  std::uint64_t last_state_ticket_ = 0;
  std::uint64_t pending_state_ticket_ = 0;  // approx: a state backup not known to be confirmed yet
  double pending_divergence_ = 0;           // the divergence it covers
  std::uint64_t last_item_ticket_ = 0;      // barrier after the latest item backup
  std::size_t batch_ = 0;                   // items per message sent
  std::uint64_t replay_remaining_ = 0;
  bool measure_pending_ = false;
  bool compensate_pending_ = false;               // recovered, compensation waits for the loss measurement(s)
  std::vector<ResumeGap> gaps_;                   // per input slot, after a recovery
  std::size_t gaps_unknown_ = 0;                  // input channels whose sender has not resumed yet
  std::uint64_t missing_items_ = 0;               // sum over resolved channels
  std::vector<std::int64_t> missing_by_failure_;  // per failure j = 1..k (-1: not measured); in every state backup
  std::vector<double> residual_by_failure_;       // per failure j = 1..k: residual of the backup it restored; ditto
  bool gaps_valid_ = false;                       // missing_items_ is a measurement (not given up on)
  Clock::time_point gaps_since_{};  // recovered at; a sender silent for kResumeWait leaves the loss unmeasured
  std::deque<std::pair<std::uint64_t, std::vector<std::uint64_t>>> coverage_pending_;  // (ticket, processed/slot)
  std::uint64_t processed_ = 0;  // items processed by this worker (all incarnations, from its counters)
  // Items of earlier incarnations its counters do not hold: a worker process's counters start at 0, while its failure
  // positions (the reset policy's history) count every incarnation's items (threads: 0, the counters outlive it).
  std::uint64_t processed_before_ = 0;
  std::vector<double> loss_theta_;  // runtime theta in force at each failure j = 1..k
  std::vector<double> loss_l_;

  std::unique_ptr<zmq::socket_t> inbox_;   // data
  std::unique_ptr<zmq::socket_t> ackbox_;  // acknowledgements
  PeerEndpoints bound_;                    // where inbox_ and ackbox_ are bound
  using PeerSockets = std::unordered_map<int, std::pair<std::uint32_t, std::unique_ptr<zmq::socket_t>>>;
  PeerSockets peers_;                                   // worker -> (its epoch, data socket to it)
  PeerSockets ack_peers_;                               // worker -> (its epoch, ack socket to it)
  std::unordered_map<int, std::uint32_t> known_epoch_;  // the incarnation of each peer this worker talks to
  std::uint64_t directory_version_ = ~0ull;
  net::Encoder encoder_;
  net::Message scratch_;
  std::unique_ptr<BackupWriter> writer_;
  std::unique_ptr<RuntimeEmitter> emitter_;

  std::atomic<bool> kill_{false};
  std::atomic<bool> restored_{false};
  Wakeup wakeup_;  // in receive()'s poll
  bool crashed_ = false;
  bool finished_ = false;
  bool inputs_done_ = false;
};

}  // namespace afs
