// Checkpoint mode (DESIGN 6, "checkpoint"; issue 6 item 3): Flink-style asynchronous barrier snapshots on the same
// engine, made position-based because every channel numbers its items (afstream/runtime/README.md "Checkpoint
// mode").
//
//   start:     a source starts checkpoint n every ft.checkpoint-interval (or ft.checkpoint-items), one at a time and
//              at least ft.checkpoint-min-pause after the previous one completed; it writes its record for n (its
//              offset and output sequence numbers) and sends each receiver a barrier notice "checkpoint n on
//              channel c lies after item X". Notices go on the data socket, in order with the items, so a notice
//              always arrives before any item after its position.
//   alignment: a worker with a pending checkpoint processes each input channel up to its X; items beyond wait in a
//              per-channel hold buffer (the channel is blocked; its acknowledgements stop at X, so the sender's
//              window bounds the buffer) until every channel reached its X or ended. Then it snapshots its state
//              (written asynchronously by the backup writer, tagged with n), sends notices downstream with its own
//              output positions, and processes the held items first.
//   complete:  each worker confirms n in the store's checkpoint ledger once its record is stored; n is complete once
//              every worker confirmed it (store/checkpoint_ledger.h). The source measures the duration; a checkpoint
//              not complete within ft.checkpoint-timeout is abandoned, and more than
//              ft.checkpoint-tolerable-failures of them fail the job.
//   recovery:  a restarted worker rejoins the ledger (a new round), restores its record of the latest complete
//              checkpoint N, rewrites it as the whole chain, and starts again from N's positions; a worker that sees
//              a peer restarted in a newer round crashes itself, and its runtime restarts it, so every worker rolls
//              back to N. Sources replay from N's offset with N's sequence numbers; everything in flight is
//              discarded by incarnation and sequence number. No item log, no per-item acknowledgement is needed for
//              correctness: state is exactly once.
#include <algorithm>

#include "afstream/core/errors.h"
#include "afstream/net/handoff.h"
#include "afstream/runtime/cluster.h"
#include "afstream/runtime/worker.h"
#include "afstream/state/snapshot.h"
#include "afstream/store/checkpoint_ledger.h"

namespace afs {

namespace {
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
void add_max(std::atomic<double>& sum, std::atomic<double>& max, double v) {
  sum.store(sum.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  if (v > max.load(std::memory_order_relaxed)) max.store(v, std::memory_order_relaxed);
}
// How often a worker waiting for a checkpoint to complete asks the store.
constexpr auto kPollEvery = std::chrono::milliseconds(1);
std::string describe_checkpoint(std::uint64_t id) {
  return std::to_string(id & 0xffffffffULL) + " of round " + std::to_string(checkpoint_round(id));
}
}  // namespace

void summarize_checkpoints(const std::vector<std::unique_ptr<WorkerCounters>>& counters, RunResult& result) {
  double ms = 0, align = 0;
  std::uint64_t alignments = 0;
  for (const auto& c : counters) {
    result.checkpoints += c->checkpoints.load();
    result.checkpoints_abandoned += c->checkpoints_abandoned.load();
    ms += c->checkpoint_ms.load();
    result.checkpoint_ms_max = std::max(result.checkpoint_ms_max, c->checkpoint_ms_max.load());
    result.checkpoint_bytes += c->checkpoint_bytes.load();
    alignments += c->alignments.load();
    align += c->alignment_ms.load();
    result.alignment_ms_max = std::max(result.alignment_ms_max, c->alignment_ms_max.load());
    result.items_held += c->items_held.load();
  }
  result.checkpoint_ms_mean = result.checkpoints ? ms / static_cast<double>(result.checkpoints) : 0;
  result.alignment_ms_mean = alignments ? align / static_cast<double>(alignments) : 0;
}

// Recovery: rejoin the ledger (a restarted incarnation) and restore the record of the latest complete checkpoint.
void Worker::restore_checkpoint() {
  const auto t0 = Clock::now();
  held_.assign(ins_.size(), {});
  notices_.assign(outs_.size(), {});
  if (first_start()) return;  // a fresh job: its first record is a full one (write_checkpoint_record)
  const CheckpointStatus st = ctx_.store->rejoin_checkpoints(id_);
  round_ = st.round;
  complete_ = st.complete;
  const std::uint64_t target = st.complete;
  std::vector<Bytes> chain;
  if (ctx_.prefetched_chain) {
    chain = ctx_.prefetched_chain->get();
    ctx_.prefetched_chain.reset();
  } else {
    chain = ctx_.store->state_chain(id_);
  }
  ctx_.prefetched_items.reset();  // no item log in this mode
  std::vector<StateRecord> records;
  records.reserve(chain.size());
  for (const auto& b : chain) records.push_back(StateRecord::decode(b));
  bool finished = false;
  if (target > 0) {
    // The last record of checkpoint `target` (or, if this worker finished its stream before it, its final record),
    // and the last full one at or before it: apply that one and the deltas after it. Records after `target` (of
    // checkpoints that never completed) are ignored.
    std::size_t at = records.size();
    for (std::size_t i = records.size(); i-- > 0;) {
      if (records[i].checkpoint <= target && checkpoint_round(records[i].checkpoint) <= checkpoint_round(target)) {
        at = i;
        break;
      }
    }
    if (at < records.size() && records[at].checkpoint != target && !records[at].finished) at = records.size();
    if (at == records.size()) {
      throw FormatError("worker " + std::to_string(id_) + ": no state record of checkpoint " +
                        describe_checkpoint(target) + ", the latest complete one, among its " +
                        std::to_string(records.size()) + " records");
    }
    std::size_t base = at + 1;
    for (std::size_t i = at + 1; i-- > 0;) {
      if (records[i].full) {
        base = i;
        break;
      }
    }
    if (base > at) throw FormatError("worker " + std::to_string(id_) + ": checkpoint chain starts with a delta");
    for (std::size_t i = base; i <= at; ++i) {
      if (!op_) continue;
      const auto opened = open_snapshot(records[i].snapshot, op_type_);
      ByteReader r(opened.payload);
      if (records[i].full) {
        op_->restore_full(r);
      } else {
        op_->apply_delta(r);
      }
    }
    const StateRecord& rec = records[at];
    source_offset_ = rec.source_offset;
    for (auto& o : outs_) {
      const auto it = rec.outputs.find(static_cast<std::uint32_t>(o.id));
      o.out_seq = o.acked = o.sent = o.released = it == rec.outputs.end() ? 0 : it->second;
    }
    for (auto& in : ins_) {
      const auto it = rec.inputs.find(static_cast<std::uint32_t>(in.id));
      in.processed = in.received = in.admitted = in.covered = it == rec.inputs.end() ? 0 : it->second;
    }
    for (auto c : rec.ended_inputs) ins_[in_slot(c)].ended = true;
    if (rec.finished) {  // it had finished its stream: finish() ran, the end of stream is numbered
      finished = true;
      inputs_done_ = true;
      final_checkpoint_ = target;
      for (auto& o : outs_) o.eos_seq = o.out_seq + 1;
    }
  }
  last_taken_ = target;
  if (source_) produced_high_ = (*ctx_.source_progress)[id_].load();
  // The restored state, whole, as the chain from now on: the records of checkpoints after `target` (which never
  // completed and never will: their round is over) go, and the next deltas are taken against this state.
  write_checkpoint_record(target, true);
  if (finished) {  // its final checkpoint again: later checkpoints do not wait for it (checkpoint_ledger.h)
    auto* store = ctx_.store;
    const int id = id_, workers = ctx_.topology->worker_count();
    const std::uint64_t mark = checkpoint_id(round_, 0);
    last_state_ticket_ =
        writer_->submit([store, id, workers, mark] { store->confirm_checkpoint(id, mark, workers, true); });
  }
  if (crash_in_) {
    crash_in_->record.restore_ms = ms_between(t0, Clock::now());
    crash_in_->record.replayed_items = 0;
    restored_at_ = Clock::now();
    awaiting_first_item_ = true;
    awaiting_live_item_ = true;
  }
}

// Writes this worker's record of checkpoint `id`: a full snapshot when the chain is new or its deltas weigh as much
// as its full snapshot (restores then read from there), else a delta; asynchronously, confirmed in the ledger once
// stored. rebase: the restored state after a recovery, written as a new chain (the store drops the old one) and not
// confirmed again.
void Worker::write_checkpoint_record(std::uint64_t id, bool rebase) {
  StateRecord rec;
  rec.checkpoint = id;
  rec.finished = inputs_done_;
  const bool full = rebase || chain_length_ == 0 || (op_ && delta_bytes_since_full_ >= last_full_bytes_);
  if (op_) capture_snapshot(rec, full, 0);  // whole deltas: a checkpoint is exact
  rec.full = full;
  const bool new_chain = rebase || chain_length_ == 0;
  chain_length_ = new_chain ? 1 : chain_length_ + 1;
  for (const auto& in : ins_) rec.inputs[static_cast<std::uint32_t>(in.id)] = in.processed;
  for (const auto& in : ins_) {
    if (in.ended) rec.ended_inputs.push_back(static_cast<std::uint32_t>(in.id));
  }
  for (const auto& o : outs_) rec.outputs[static_cast<std::uint32_t>(o.id)] = o.out_seq;
  rec.source_offset = source_offset_;
  auto* store = ctx_.store;
  auto& counters = counters_;
  const int id_of_worker = id_;
  const int workers = ctx_.topology->worker_count();
  last_state_ticket_ =
      writer_->submit([store, &counters, id_of_worker, workers, id, rebase, new_chain, rec = std::move(rec)]() {
        auto bytes = rec.encode();
        counters.backup_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
        counters.state_backups.fetch_add(1, std::memory_order_relaxed);
        if (!rebase) counters.checkpoint_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
        SeqByChannel covered = rec.inputs;
        // Only a new chain replaces the stored one: a record of a later checkpoint never drops the record of one that
        // may still be the latest complete.
        store->put_state(id_of_worker, new_chain, std::move(bytes), covered);
        if (!rebase) store->confirm_checkpoint(id_of_worker, id, workers, rec.finished);
      });
  since_state_backup_ = 0;
}

// A barrier notice from upstream: checkpoint c.checkpoint lies after item c.seq of channel c.channel.
void Worker::on_barrier(const net::ControlMsg& c, std::uint32_t sender, std::uint32_t sender_epoch) {
  if (!checkpoint_mode() || c.channel >= in_slot_.size() || in_slot_[c.channel] < 0) {
    counters_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto slot = in_slot(c.channel);
  auto& in = ins_[slot];
  if (static_cast<std::uint32_t>(in.from_worker) != sender) {
    counters_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // From an incarnation not known here yet (the process runtime's directory may lag behind its data): learn it now if
  // the directory has it (check_round may roll back); taken either way, as its items are (on_batch). From a replaced
  // incarnation: dropped. Of a checkpoint already taken, or of another round: dropped too.
  if (sender_epoch > known_epoch_[in.from_worker]) refresh_peers();
  if (sender_epoch < known_epoch_[in.from_worker]) return;
  if (c.checkpoint <= last_taken_ || checkpoint_round(c.checkpoint) != round_) return;
  auto it = std::find_if(barriers_.begin(), barriers_.end(), [&](const Barrier& b) { return b.id >= c.checkpoint; });
  if (it == barriers_.end() || it->id != c.checkpoint) {
    Barrier b;
    b.id = c.checkpoint;
    b.at.assign(ins_.size(), 0);
    b.known.assign(ins_.size(), false);
    b.first_notice = Clock::now();
    it = barriers_.insert(it, std::move(b));
  }
  it->at[slot] = c.seq;
  it->known[slot] = true;
}

// An item past the pending barrier of its channel waits in the channel's hold buffer.
bool Worker::held_back(const ChannelItem& ci, std::size_t slot) const {
  if (barriers_.empty()) return false;
  const auto& b = barriers_.front();
  return (b.known[slot] && ci.item.seq > b.at[slot]) || !held_[slot].empty();
}

// process_some in checkpoint mode: held items first (in channel order), then the queue; items past the pending
// barrier are held; the checkpoint is taken as soon as the last channel reaches it.
std::size_t Worker::process_aligned(std::size_t budget) {
  std::size_t n = 0;
  while (n < budget && unacked_total() < window()) {
    const bool from_released = !released_.empty();
    if (!from_released && queue_.empty()) {
      admit();
      if (queue_.empty()) break;
    }
    const ChannelItem ci = from_released ? released_.front() : queue_.front();
    check_kill();
    const auto slot = in_slot(ci.channel);
    // Held until feedback makes the operator ready (Operator::ready), as in process_some: taken regardless, the ps
    // job's ps-workers ran far past BSP's and SSP's staleness bounds (a staleness of 2,356 clocks under BSP).
    if (op_waits_ && !ci.end_of_stream && !held_back(ci, slot) && !op_->ready()) break;
    if (from_released) {
      released_.pop_front();
    } else {
      queue_.pop_front();
    }
    if (held_back(ci, slot)) {
      held_[slot].push_back(ci);
      counters_.items_held.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (awaiting_live_item_ && !ci.end_of_stream) on_live_item(false);
    process_one(ci);
    ++n;
    if (!barriers_.empty() && barriers_.front().known[slot] && ci.item.seq >= barriers_.front().at[slot]) {
      take_aligned_checkpoints();
    }
  }
  if (n) {
    count_processed(n);
    record_latencies();
  }
  admit();
  send_due_acks();
  return n;
}

// Acknowledge what was admitted, as flow control only, and on a channel blocked by a pending barrier no further
// than the barrier: its sender's window then bounds what waits in the hold buffer.
void Worker::acknowledge_admitted() {
  const Barrier* b = barriers_.empty() ? nullptr : &barriers_.front();
  for (std::size_t i = 0; i < ins_.size(); ++i) {
    auto& in = ins_[i];
    if (!in.touched) continue;
    in.touched = false;
    std::uint64_t upto = in.admitted;
    if (b && b->known[i]) upto = std::min(upto, b->at[i]);
    if (upto > in.last_ack) in.ack_due = std::max(in.ack_due, upto);
  }
}

void Worker::advance_checkpoints() {
  verify_peers();
  if (source_) {
    start_checkpoint_if_due();
  } else {
    take_aligned_checkpoints();
  }
  // Waiting for the checkpoint in which this worker finished to complete (then it may exit). A source that sees it
  // complete here counts it at once: it may finish right after, before start_checkpoint_if_due would have counted it
  // (about one run in five of nexmark-hot-items on worker processes reported "checkpoints: 0 complete").
  if (final_checkpoint_ != 0 && complete_ < final_checkpoint_) {
    poll_checkpoints();
    if (source_ && in_flight_ != 0) settle_checkpoint(Clock::now());
  }
}

// Every input channel reached the pending barrier (or ended): snapshot, forward, release the held items.
void Worker::take_aligned_checkpoints() {
  while (!barriers_.empty()) {
    const auto& b = barriers_.front();
    bool aligned = true;
    bool all_ended = true;
    for (std::size_t i = 0; i < ins_.size() && aligned; ++i) {
      all_ended = all_ended && ins_[i].ended;
      aligned = ins_[i].ended || (b.known[i] && ins_[i].processed >= b.at[i]);
    }
    // With every input ended the worker finishes its stream first (run(): finish(), end of stream), so that the
    // checkpoint holds the finished state and its end of stream (a restore from it does not finish again).
    if (!aligned || (all_ended && !inputs_done_)) return;
    const double ms = ms_between(b.first_notice, Clock::now());
    counters_.alignments.fetch_add(1, std::memory_order_relaxed);
    add_max(counters_.alignment_ms, counters_.alignment_ms_max, ms);
    const std::uint64_t id = b.id;
    barriers_.pop_front();
    snapshot_checkpoint(id);
    // Held items go first, channel by channel in order; the next barrier may hold some of them again.
    for (auto& h : held_) {
      for (auto& ci : h) released_.push_back(ci);
      h.clear();
    }
    for (auto& in : ins_) in.touched = true;
    acknowledge_admitted();
  }
}

// The snapshot of checkpoint `id`: the record (asynchronously) and a notice per output channel after the last item
// emitted (after its end of stream, if it ended).
void Worker::snapshot_checkpoint(std::uint64_t id) {
  write_checkpoint_record(id, false);
  last_taken_ = id;
  if (inputs_done_ && final_checkpoint_ == 0) final_checkpoint_ = id;
  for (std::size_t i = 0; i < outs_.size(); ++i) {
    const auto& o = outs_[i];
    notices_[i].push_back(Notice{id, o.eos_seq ? o.eos_seq : o.out_seq, false});
  }
}

// A source starts checkpoints (one at a time): every ft.checkpoint-interval (or ft.checkpoint-items), at least
// ft.checkpoint-min-pause after the last one completed, and one at the end of its stream. It also sees them
// complete (their duration) or time out.
void Worker::start_checkpoint_if_due() {
  const auto& cfg = ctx_.config;
  auto now = Clock::now();
  if (in_flight_ != 0) {
    poll_checkpoints();
    now = Clock::now();
    if (!settle_checkpoint(now)) return;
  }
  if (inputs_done_) {
    if (final_checkpoint_ != 0) return;
  } else {
    const bool due = cfg.checkpoint_items > 0 ? source_offset_ - offset_at_start_ >= cfg.checkpoint_items
                                              : now - started_at_ >= cfg.checkpoint_interval;
    if (!due || now - completed_at_ < cfg.checkpoint_min_pause) return;
  }
  const std::uint64_t id = checkpoint_id(round_, next_checkpoint_++);
  in_flight_ = id;
  started_at_ = now;
  offset_at_start_ = source_offset_;
  snapshot_checkpoint(id);
}

// The source's checkpoint in flight: counted once it is complete (its duration), abandoned once past
// ft.checkpoint-timeout (failing the job past ft.checkpoint-tolerable-failures). True: none is in flight any more.
bool Worker::settle_checkpoint(Clock::time_point now) {
  const auto& cfg = ctx_.config;
  if (complete_ >= in_flight_) {
    const double ms = ms_between(started_at_, now);
    counters_.checkpoints.fetch_add(1, std::memory_order_relaxed);
    add_max(counters_.checkpoint_ms, counters_.checkpoint_ms_max, ms);
  } else if (now - started_at_ > cfg.checkpoint_timeout) {
    counters_.checkpoints_abandoned.fetch_add(1, std::memory_order_relaxed);
    if (++checkpoint_failures_ > cfg.checkpoint_tolerable_failures) {
      throw RuntimeError("checkpoint " + describe_checkpoint(in_flight_) + " not complete within " +
                         "ft.checkpoint-timeout (" + std::to_string(cfg.checkpoint_timeout.count()) +
                         " ms): " + std::to_string(checkpoint_failures_) +
                         " abandoned checkpoints, more than ft.checkpoint-tolerable-failures = " +
                         std::to_string(cfg.checkpoint_tolerable_failures));
    }
  } else {
    return false;
  }
  in_flight_ = 0;
  completed_at_ = now;
  return true;
}

// Asks the store which checkpoint is complete (at most every kPollEvery). A newer round means a failure elsewhere:
// this incarnation rolls back too.
void Worker::poll_checkpoints() {
  const auto now = Clock::now();
  if (now - polled_at_ < kPollEvery) return;
  polled_at_ = now;
  const CheckpointStatus st = ctx_.store->checkpoint_status();
  if (st.round > round_) throw Crash{};
  complete_ = std::max(complete_, st.complete);
  for (auto& q : notices_) {  // notices of complete checkpoints are never needed again
    while (!q.empty() && q.front().sent && q.front().id <= complete_) q.pop_front();
  }
}

// The barrier notices not sent yet on o, ahead of any further item. False: one could not go out (try again later).
bool Worker::send_notices(OutChannel& o) {
  auto& q = notices_[static_cast<std::size_t>(&o - outs_.data())];
  if (q.empty() || q.back().sent) return true;
  if (!peer_ready(o.to_worker)) return false;
  for (auto& n : q) {
    if (n.sent) continue;
    net::ControlMsg c{net::ControlKind::kBarrier,
                      static_cast<std::uint32_t>(id_),
                      epoch_,
                      n.seq,
                      static_cast<std::uint32_t>(o.id),
                      n.id};
    auto frame = encoder_.encode_control(static_cast<std::uint32_t>(id_), epoch_, c);
    zmq::message_t m = net::outgoing(frame);
    if (!socket_to(o.to_worker, false).send(m, zmq::send_flags::dontwait)) return false;
    n.sent = true;
  }
  return true;
}

// Items before a barrier notice go out at once, not when a batch fills: the receiver cannot align without them.
bool Worker::barrier_due(const OutChannel& o) const {
  const auto& q = notices_[static_cast<std::size_t>(&o - outs_.data())];
  return !q.empty() && q.back().seq > o.sent;
}

// Peers with an incarnation new to this worker (refresh_peers; at its start, all of them). A peer's round is known
// once it is up (it rejoins the ledger while it restores, before it announces itself; the process
// runtime's directory shows a new incarnation before that): until then it stays unverified, and nothing is sent to
// it (peer_ready) nor comes from it.
void Worker::check_round(const std::unordered_set<int>& learned) {
  unverified_peers_.insert(learned.begin(), learned.end());
  verify_peers();
}

// If a peer is up and the ledger's round is newer than this worker's (a failure: the peer, or another worker, opened
// it), this incarnation crashes on purpose: its runtime restarts it, and it rolls back with the others. Otherwise
// the peer is in this worker's round, or an older one (then it crashes itself once it learns of this incarnation, and
// never takes anything from it before: it checks too); it gets again the notices it may have missed.
void Worker::verify_peers() {
  if (unverified_peers_.empty()) return;
  std::vector<int> up;
  for (int w : unverified_peers_) {
    const auto peer = ctx_.directory->state(w);
    if (peer.up && peer.epoch == known_epoch_[w]) up.push_back(w);
  }
  if (up.empty()) return;
  const CheckpointStatus st = ctx_.store->checkpoint_status();
  if (st.round > round_) throw Crash{};
  for (int w : up) {
    unverified_peers_.erase(w);
    for (std::size_t i = 0; i < outs_.size(); ++i) {
      if (outs_[i].to_worker != w) continue;
      for (auto& n : notices_[i]) n.sent = false;
    }
  }
}

}  // namespace afs
