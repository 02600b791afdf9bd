#include "afstream/runtime/worker.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "afstream/core/errors.h"
#include "afstream/core/thread_name.h"
#include "afstream/net/endpoint.h"
#include "afstream/net/handoff.h"
#include "afstream/state/snapshot.h"

namespace afs {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
// CPU time of the calling thread (the backup thread's cost of a write, without the time it waited for a core).
std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
// Ack mode: the id of the edge that carries item `seq` of `channel` (unique: a channel never numbers two items
// alike, a restarted sender continues after what its receiver holds), mixed (splitmix64) so that XORs of ids of
// different edges are never 0 by structure (Storm draws them at random).
std::uint64_t edge_id(int channel, std::uint64_t seq) {
  std::uint64_t z = (static_cast<std::uint64_t>(channel) << 44) ^ seq ^ 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (z ^ (z >> 31)) | 1;  // never 0
}
// After a recovery, how long to wait for every sender to resume before compensating with the worst-case bound
// instead of the measured loss (a sender with nothing left to send never shows where it resumes).
constexpr auto kResumeWait = std::chrono::seconds(2);
// A restarted worker's question to a peer (where to continue numbering, what to resend) is sent again this long after
// it went unanswered: the peer drops one that comes before it knows the new incarnation, which is usual when both
// restart together. Nothing is processed until the answer, so at 20 ms a learner's recovery took 20 ms longer
// whenever its first question was dropped (HIGGS-like first_item_ms: 21-23 ms in half the recoveries, 2-10 ms now).
constexpr auto kQueryRetry = std::chrono::milliseconds(2);
// A source keeps at most this many replay positions; beyond, every other one is dropped (replays start earlier).
constexpr std::size_t kMaxSourceMarks = 8192;
// ft.replay-overhead-max: the fewest items between backups it chooses, and how fast its cost estimates follow new
// measurements (exponential smoothing; the machine's noise moves single backups by a factor of two).
constexpr std::uint64_t kReplayIntervalMin = 256;
constexpr double kCostSmoothing = 0.25;
// The share ft.replay-overhead-max takes when it is 0 for a worker behind replayable sources with a remote store,
// which backs up by the cost rule alone (experiments/results/process-runtime).
constexpr double kRemoteReplayOverheadMax = 0.01;
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
PeerDirectory::PeerDirectory(std::string bind, int workers)
    : bind_(std::move(bind)), slots_(new Slot[static_cast<std::size_t>(workers)]) {}

bool PeerDirectory::binds_tcp() const { return net::is_tcp(bind_); }

std::string PeerDirectory::bind_endpoint(const std::string& bind, int worker, std::uint32_t epoch, bool acks) {
  if (net::is_tcp(bind)) return bind;  // tcp://IP:* (any free port), one per socket
  return bind + "w" + std::to_string(worker) + "-e" + std::to_string(epoch) + (acks ? "-acks" : "-data");
}

std::string PeerDirectory::endpoint(int worker, std::uint32_t epoch, bool acks) const {
  std::lock_guard lock(mu_);
  const auto& s = slots_[worker];
  if (s.endpoints_epoch != epoch) return "";
  return acks ? s.at.acks : s.at.data;
}

PeerEndpoints PeerDirectory::endpoints(int worker) const {
  std::lock_guard lock(mu_);
  return slots_[worker].at;
}

PeerEndpoints PeerDirectory::endpoints(int worker, std::uint32_t epoch) const {
  std::lock_guard lock(mu_);
  const auto& s = slots_[worker];
  return s.endpoints_epoch == epoch ? s.at : PeerEndpoints{};
}

void PeerDirectory::set_up(int worker, std::uint32_t epoch, PeerEndpoints at) {
  {
    std::lock_guard lock(mu_);
    slots_[worker].endpoints_epoch = epoch;
    slots_[worker].at = std::move(at);
  }
  slots_[worker].state.store(std::uint64_t{epoch} << 1 | 1, std::memory_order_release);
  version_.fetch_add(1, std::memory_order_acq_rel);
}

void PeerDirectory::set_down(int worker) {
  slots_[worker].state.fetch_and(~std::uint64_t{1}, std::memory_order_acq_rel);
  version_.fetch_add(1, std::memory_order_acq_rel);
}

// ---------------------------------------------------------------------------------------------------------------
ThresholdSchedule threshold_schedule_of(const Topology& topology, const RunConfig& config, int worker,
                                        const Operator* op) {
  const auto& ref = topology.workers()[worker];
  const auto& stage = topology.stages()[ref.stage];
  ThresholdScope scope{stage.parallelism, 1.0};
  if (op && !stage.is_source) {
    // Pipeline scope: a lost item here can cause beta^(stages below) lost items at the end (DESIGN 3).
    scope.downstream_beta_product = std::pow(std::max(1.0, op->beta()), topology.stages_to_end(ref.stage) - 1);
    // Corollary P(3): copies fed disjoint key sets whose divergences combine by max share no Theta.
    bool keyed = false, all_keyed = true;
    for (const auto& ch : topology.channels()) {
      if (ch.to_worker != worker) continue;
      keyed = true;
      all_keyed = all_keyed && ch.partition == Partition::Key;
    }
    scope.theta_shared_by_copies = !(op->divergence_combines_by_max() && keyed && all_keyed);
  }
  return ThresholdSchedule(config.bounds, scope, config.reset, config.reset_window);
}

std::vector<RuntimeThresholds> thresholds_at_failures(const Topology& topology, const RunConfig& config, int worker,
                                                      const Operator* op, const std::vector<std::uint64_t>& failures) {
  auto schedule = threshold_schedule_of(topology, config, worker, op);
  std::vector<RuntimeThresholds> out;
  for (auto at : failures) {  // as Worker::Worker replays its failure history
    schedule.on_progress(at);
    out.push_back(schedule.current());
    schedule.on_failure(at);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
class Worker::RuntimeEmitter final : public Emitter {
 public:
  explicit RuntimeEmitter(Worker& w) : w_(w) {}
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override { w_.emit(key, value, time); }
  void broadcast(std::uint64_t key, std::int64_t value, std::int64_t time) override { w_.broadcast(key, value, time); }
  void feed_back(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    w_.feedback_out_.push_back(Item{key, value, time, 0});
  }
  std::uint32_t input_channel() const override { return channel; }
  std::uint32_t channel = 0;  // of the item in process (process_one)

 private:
  Worker& w_;
};

Worker::Worker(ClusterContext& ctx, int id, std::uint32_t epoch, std::vector<std::uint64_t> failures,
               std::optional<CrashInfo> crash)
    : ctx_(ctx),
      id_(id),
      epoch_(epoch),
      failure_positions_(std::move(failures)),
      failure_count_(static_cast<int>(failure_positions_.size())),
      ref_(ctx.topology->workers()[id]),
      stage_(ctx.topology->stages()[ref_.stage]),
      counters_(*ctx.counters[id]),
      schedule_(ctx.config.bounds, ThresholdScope{stage_.parallelism, 1.0}, ctx.config.reset, ctx.config.reset_window),
      crash_in_(std::move(crash)),
      emitter_(std::make_unique<RuntimeEmitter>(*this)) {
  const InstanceInfo at{ref_.index, stage_.parallelism};
  if (stage_.is_source) {
    source_ = ctx.registry->make_source(stage_.kind, stage_.params, at);
    source_size_ = source_->size();
  } else {
    op_ = ctx.registry->make_operator(stage_.kind, stage_.params, at);
    if (ctx.config.mode == FtMode::None) op_->stop_tracking();  // nothing will ever be backed up
    op_type_ = type_id_of(stage_.kind);
    alpha_may_shrink_ = op_->alpha_may_shrink();
    refresh_alpha();
    op_waits_ = op_->waits_for_feedback();
    // beta() 0: process() never emits (a learner, a sink: they emit at finish, which waits for the numbering).
    silent_process_ = op_->beta() == 0 && !op_waits_;
    stateless_op_ = op_->stateless();  // no state at all (StatelessOperator; not alpha 0, see Operator::stateless)
    op_spec_ = OperatorSpec{stage_.kind, stage_.params, at.index, at.parallelism};
  }
  if (op_) schedule_ = threshold_schedule_of(*ctx.topology, ctx.config, id, op_.get());
  // Replay the failure history through the reset policy: the thresholds are halved once per failure (DESIGN 3).
  for (auto at : failure_positions_) {
    schedule_.on_progress(at);
    // What failure j could lose: the thresholds in force then, or nothing if that incarnation logged every item.
    // An operator whose alpha shrinks may have left that protection for the Theta rule before failing: count theta.
    const bool logged_all = logs_every_item() && !alpha_may_shrink_;
    loss_theta_.push_back(logged_all ? 0 : schedule_.current().theta);
    loss_l_.push_back(logged_all ? 0 : static_cast<double>(schedule_.current().l));
    if (crash_in_ && !crash_in_->observed) {  // what on_crash() would have recorded
      crash_in_->record.theta = schedule_.current().theta;
      crash_in_->record.l = schedule_.current().l;
      crash_in_->record.gamma = schedule_.current().gamma;
    }
    schedule_.on_failure(at);
  }
  if (crash_in_ && !crash_in_->observed && op_) crash_in_->record.alpha = op_->alpha();
  if (crash_in_) crash_in_->record.recovery_ms = -1;  // until it is restored and replayed (mark_recovered)
  const std::uint64_t counted = counters_.items_in.load();
  if (!failure_positions_.empty() && failure_positions_.back() > counted) {
    processed_before_ = failure_positions_.back() - counted;
  }
  processed_ = processed_before_ + counted;
  schedule_.on_progress(processed_);
  out_slot_.assign(ctx.topology->channels().size(), -1);
  in_slot_.assign(ctx.topology->channels().size(), -1);
  for (int c : ctx.topology->outputs_of(id)) {
    const auto& ch = ctx.topology->channels()[c];
    out_slot_[static_cast<std::size_t>(c)] = static_cast<int>(outs_.size());
    OutChannel o;
    o.id = c;
    o.to_worker = ch.to_worker;
    outs_.push_back(std::move(o));
  }
  for (int c : ctx.topology->inputs_of(id)) {
    const auto& ch = ctx.topology->channels()[c];
    in_slot_[static_cast<std::size_t>(c)] = static_cast<int>(ins_.size());
    InChannel in;
    in.id = c;
    in.from_worker = ch.from_worker;
    in.from_source = ctx.topology->stages()[ctx.topology->workers()[ch.from_worker].stage].is_source;
    ins_.push_back(std::move(in));
  }
  // Routing: the common case (one downstream stage) is a direct index; others go through the general path.
  std::vector<int> down_stages;
  for (const auto& o : outs_) {
    int s = ctx.topology->workers()[o.to_worker].stage;
    if (std::find(down_stages.begin(), down_stages.end(), s) == down_stages.end()) down_stages.push_back(s);
  }
  single_key_route_ = down_stages.size() == 1;
  if (single_key_route_) {
    for (std::size_t i = 0; i < outs_.size(); ++i) key_route_.push_back(i);
  }
  if (ctx_.config.mode != FtMode::None) writer_ = std::make_unique<BackupWriter>("afs-b" + std::to_string(id_));
  // A worker process: where the crashed incarnation was, from its progress page; then this one's page (not in mode
  // none, which restores nothing; a source has no inputs).
  if (!ctx_.progress_dir.empty() && ctx_.config.mode != FtMode::None && !source_) {
    if (crash_in_ && !crash_in_->positions_known) {
      if (auto seen = ProgressPage::read(ctx_.progress_dir, id_, epoch_)) {
        crash_in_->processed = std::move(seen->processed);
        crash_in_->positions_known = true;
        crash_in_->record.lost_items = seen->lost_items;
        crash_in_->record.lost_outputs = seen->lost_outputs;
      }
    }
    std::vector<std::uint32_t> channels;
    for (const auto& in : ins_) channels.push_back(static_cast<std::uint32_t>(in.id));
    progress_page_ = std::make_unique<ProgressPage>(ctx_.progress_dir, id_, epoch_, channels,
                                                    crash_in_ ? crash_in_->processed : SeqByChannel{});
  }
  resends_by_rewind_ = source_ && ctx_.config.mode == FtMode::Approx;
  inputs_replayable_ = ctx_.config.mode == FtMode::Approx && !ins_.empty() &&
                       std::all_of(ins_.begin(), ins_.end(), [](const InChannel& in) { return in.from_source; });
  never_wait_for_store_ = inputs_replayable_ && ctx_.store != nullptr && ctx_.store->remote();
  replay_items_max_ = inputs_replayable_ ? ctx_.config.replay_items_max : 0;
  // A state no item moves (alpha 0: a stateless relay) never reaches Theta, so nothing but this interval backs up
  // its input positions; without it a restart took everything since its start again (a relay in the copy job on
  // threads: 5 failures, 5 million duplicates, 17-43 s instead of 1). Its backups are empty: every
  // ft.exact-state-every items.
  if (inputs_replayable_ && replay_items_max_ == 0 && (stateless_op_ || op_alpha_ == 0)) {
    replay_items_max_ = ctx_.config.exact_state_every;
  }
  // Behind replayable sources with a remote store, the cost rule always chooses when to back up (at 1% unless set):
  // Theta's triggers would each cost a round trip to the server and protect nothing (after_update_checked).
  replay_overhead_max_ = ctx_.config.replay_overhead_max > 0 ? ctx_.config.replay_overhead_max
                         : never_wait_for_store_             ? kRemoteReplayOverheadMax
                                                             : 0;
  // The cost rule alone paces the state backups there (after_update_checked): divergence() is read at backups and
  // recoveries only, so the operator may measure it then instead of at every update.
  if (op_ && never_wait_for_store_) op_->measure_divergence_at_backups();
  if (inputs_replayable_ && replay_overhead_max_ > 0) {
    // Adaptive (adapt_replay_interval): it starts at the smallest interval and grows once backups are measured.
    // The in-process cluster keeps a worker's counters across incarnations: only this one's writes count.
    backup_task_ns_seen_ = backup_task_ns();
    replay_interval_max_ = replay_items_max_ > 0 ? replay_items_max_ : ctx_.config.exact_state_every;
    replay_interval_min_ = std::min<std::uint64_t>(kReplayIntervalMin, replay_interval_max_);
    replay_items_max_ = replay_interval_min_;
  }
  replay_limit_ = replay_items_max_ > 0 ? replay_items_max_ : UINT64_MAX;
  // A source backs up its position (what a restart produces again from) at least as often as its receivers back
  // up their state, so that a failure of both does not replay more than they would alone.
  // With ft.replay-overhead-max the receivers' interval is not known here: every 4096 items (a position costs little).
  constexpr std::uint64_t kSourceBackupEvery = 65536;
  const std::uint64_t receivers_every = ctx_.config.replay_items_max > 0      ? ctx_.config.replay_items_max
                                        : ctx_.config.replay_overhead_max > 0 ? 4096
                                                                              : kSourceBackupEvery;
  source_backup_every_ = std::min(kSourceBackupEvery, receivers_every);
  // A batch never waits for more items than half the window lets the sender hold.
  batch_ = std::max<std::size_t>(1, std::min<std::uint64_t>(ctx_.config.batch_items, window() / 2));
}

Worker::~Worker() = default;

// ---------------------------------------------------------------------------------------------------------------
void Worker::run() {
  // The failure it recovers from, as known so far: reported even if this incarnation fails before it recovers.
  if (crash_in_) set_recovered(crash_in_->record);
  name_this_thread((source_ ? "afs-src" : "afs-w") + std::to_string(id_));
  try {
    setup_sockets();
    restore();
    // What the restore measured, reported if this incarnation fails before it completes its recovery.
    if (crash_in_) set_recovered(crash_in_->record);
    restored_.store(true, std::memory_order_release);
    if (awaiting_first_item_ && (source_ || replay_remaining_ == 0)) mark_recovered();
    ctx_.directory->set_up(id_, epoch_, bound_);
    for (;;) {
      check_kill();
      refresh_peers();
      if (numbering_pending_ > 0) query_numbering();
      if (gaps_unknown_ > 0 && Clock::now() - gaps_since_ > kResumeWait) {
        gaps_unknown_ = 0;
        gaps_valid_ = false;  // compensate with the bound (a silent sender may still resume after a gap)
        if (!missing_by_failure_.empty()) missing_by_failure_.back() = -1;
        maybe_compensate();
      }
      // Not ready (Operator::ready): wait for input instead of spinning on a queue it will not take from.
      const bool blocked = op_waits_ && !op_->ready();
      if (blocked) call_on_blocked();
      const bool busy = (!queue_.empty() || !staging_.empty() || (source_ && source_offset_ < source_size_)) &&
                        unacked_total() < window() && !blocked;
      receive(busy ? std::chrono::milliseconds(0) : std::chrono::milliseconds(1));
      release_acks();
      if (source_) {
        if (coverage_advanced_) back_up_position_if_due();  // set in approximate mode only (on_ack)
        if (ack_mode()) {
          replay_expired_trees();
          back_up_ack_position_if_due();
        }
        const bool may_produce =
            !ack_mode() || (numbering_pending_ == 0 && trees_.size() < ctx_.config.ack_max_pending);
        if (source_offset_ < source_size_ && unacked_total() < window() && may_produce) produce();
        // Ack mode: the stream ends only once every tree is complete (a replay may still be needed).
        if (source_offset_ >= source_size_ && !inputs_done_ && trees_.empty()) {
          inputs_done_ = true;
          if (awaiting_live_item_) on_live_item(true);
          finish_outputs();
        }
      } else {
        if ((ctx_.config.mode == FtMode::None || ctx_.config.mode == FtMode::Approx) && crash_in_) {
          end_inputs_of_finished_senders();
        }
        // A restarted worker numbers its outputs after what each receiver holds (continue_output_numbering), so it
        // processes nothing until every receiver has answered, unless processing cannot emit: a learner behind a
        // restarting sink then starts on its input as soon as it arrives (on worker processes, one run: its first
        // example 4-6 ms after its restore instead of 7-19; experiments/results/README.md, "Sixteenth session").
        if ((numbering_pending_ == 0 || silent_process_) && unacked_total() < window()) {
          process_some(4 * ctx_.config.batch_items);
        }
        if (ask_mode()) {
          send_asks();
          checkpoint_if_idle();
        }
        end_microbatch_if_due();
        if (ack_mode()) ack_checkpoint_if_due();
        if (!inputs_done_ && numbering_pending_ == 0 && queue_.empty() && staging_.empty() &&
            std::all_of(ins_.begin(), ins_.end(), [](const InChannel& c) { return c.ended; })) {
          inputs_done_ = true;
          if (awaiting_first_item_) mark_recovered();
          if (awaiting_live_item_) on_live_item(true);
          measure_loss();
          backup_at_end_of_stream();
          if (ack_mode()) begin_finish_tree();
          std::vector<std::uint64_t> before_finish;
          for (const auto& o : outs_) before_finish.push_back(o.out_seq);
          op_->finish(*emitter_);
          for (std::size_t i = 0; i < outs_.size(); ++i) {
            outs_[i].finish_outputs = {{before_finish[i], outs_[i].out_seq}};
          }
          // Microbatch: the final results go out at once (a recovery from the last boundary emits them again,
          // with the same sequence numbers).
          for (auto& o : outs_) o.released = o.out_seq;
          if (ack_mode()) {
            end_finish_tree();  // the end of stream follows once they are all acknowledged
          } else {
            finish_outputs();
          }
        }
        if (ack_mode()) {
          replay_expired_trees();
          if (finish_pending_ && trees_.empty()) {
            finish_pending_ = false;
            finish_outputs();
          }
        }
      }
      if (checkpoint_mode()) advance_checkpoints();
      flush(queue_.empty() || inputs_done_ || blocked);
      send_feedback();
      // Done once everything sent is acknowledged, every ack sent, and every upstream worker is done for good: an
      // upstream that crashes after its end of stream replays it, and must find this worker to acknowledge it. A
      // source also waits until every receiver has covered its whole stream by a confirmed backup (all_covered):
      // until then a receiver that fails restores a backup older than what it acknowledged, and only the source
      // can send it the rest again (R-source, Proposition S).
      if (inputs_done_ && all_acked() && all_covered() && !finish_pending_ &&
          std::all_of(ins_.begin(), ins_.end(), [&](const InChannel& c) {
            return c.deferred_acks.empty() && ctx_.directory->finished(c.from_worker);
          })) {
        break;
      }
    }
    if (writer_) writer_->wait(last_state_ticket_);
    finished_ = true;
    ctx_.directory->set_finished(id_);
    // A finished worker delivers what it has sent (its last acknowledgements); a crashed one drops it (linger 0).
    // Not to a peer finished for good (every upstream by now): it needs nothing more, and may have exited, in which
    // case what was sent to it (an ack for a replayed duplicate) would wait out the linger and hold up this
    // process's exit, and the job's end, by 2 s (about one run in eight of the KDD-like job on processes with 8
    // failures did).
    for (auto* peers : {&peers_, &ack_peers_}) {
      for (auto& [w, slot] : *peers) {
        if (slot.second) slot.second->set(zmq::sockopt::linger, ctx_.directory->finished(w) ? 0 : 2000);
      }
    }
  } catch (const Crash&) {
    on_crash();
  }
  ctx_.directory->set_down(id_);
  if (writer_) writer_->abandon();
  peers_.clear();
  ack_peers_.clear();
  inbox_.reset();
  ackbox_.reset();
}

void Worker::setup_sockets() {
  // tcp:// endpoints do not name the incarnation: only peers that mean this one get in (gatekeeper.h). With CURVE,
  // by the keypair made for this incarnation (peers learn its public key from the directory), else by the PLAIN
  // user name the gatekeeper admits.
  const bool tcp = ctx_.directory->binds_tcp();
  net::CurveKeypair incarnation_keys;
  if (tcp) {
    if (ctx_.gate == nullptr) {
      throw RuntimeError("worker " + std::to_string(id_) + ": binding tcp:// needs a gatekeeper");
    }
    if (ctx_.curve) {
      incarnation_keys = net::generate_curve_keypair();
      bound_.key = incarnation_keys.public_key;
    } else {
      ctx_.gate->admit(id_, epoch_);
    }
  }
  // Data and acknowledgements arrive on separate sockets, so acks are read even when the data queue is full.
  for (bool acks : {false, true}) {
    auto& sock = acks ? ackbox_ : inbox_;
    sock = std::make_unique<zmq::socket_t>(*ctx_.zmq, zmq::socket_type::pull);
    sock->set(zmq::sockopt::linger, 0);
    sock->set(zmq::sockopt::rcvhwm, 4096);
    if (tcp && ctx_.curve) {
      net::make_curve_server(*sock, incarnation_keys);
    } else if (tcp) {
      Gatekeeper::guard(*sock);
    }
    const auto endpoint = ctx_.directory->bind_endpoint(id_, epoch_, acks);
    try {
      sock->bind(endpoint);
      (acks ? bound_.acks : bound_.data) = sock->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      throw RuntimeError("worker " + std::to_string(id_) + ": cannot bind " + endpoint + ": " + e.what());
    }
  }
}

zmq::socket_t& Worker::socket_to(int worker, bool acks) {
  auto& slot = (acks ? ack_peers_ : peers_)[worker];
  const auto e = known_epoch_[worker];  // learned by refresh_peers() only
  if (!slot.second || slot.first != e) {
    slot.second = std::make_unique<zmq::socket_t>(*ctx_.zmq, zmq::socket_type::push);
    slot.second->set(zmq::sockopt::linger, 0);
    slot.second->set(zmq::sockopt::sndhwm, 4096);
    // Empty when the directory has moved on to a newer incarnation meanwhile: the socket stays unconnected (sends
    // to it fail) until refresh_peers() learns the new one and replaces it. So it does, with CURVE, when the peer
    // announced no key (it does not speak CURVE: nothing would get through).
    const auto at = ctx_.directory->endpoints(worker, e);
    auto endpoint = acks ? at.acks : at.data;
    if (net::is_tcp(endpoint)) {
      if (!ctx_.curve) {
        Gatekeeper::present(*slot.second, worker, e);
      } else if (at.key.empty()) {
        endpoint.clear();
      } else {
        net::make_curve_client(*slot.second, {*ctx_.curve, at.key});
      }
    }
    if (!endpoint.empty()) slot.second->connect(endpoint);
    slot.first = e;
  }
  return *slot.second;
}

// A peer restarted: reconnect, and resend to it everything it has not acknowledged (DESIGN 5 step 4).
void Worker::refresh_peers() {
  const auto v = ctx_.directory->version();
  if (v == directory_version_) return;
  directory_version_ = v;
  // The only place a peer's incarnation is learned: a new one gets fresh sockets and everything it has not
  // acknowledged again, from the first unacknowledged item.
  std::unordered_set<int> learned;  // peers with an incarnation new here
  auto learn = [&](int w) {
    const auto e = ctx_.directory->epoch(w);
    auto& known = known_epoch_[w];
    if (known == e) return false;
    learned.insert(w);
    known = e;
    peers_.erase(w);
    ack_peers_.erase(w);
    return true;
  };
  std::unordered_set<int> restarted;  // downstream peers with a new incarnation
  // Downstream peers whose incarnation this one knew before: it may have sent them items that died with them. (A
  // peer seen for the first time has had nothing from this incarnation: items go only to a known incarnation.)
  std::unordered_set<int> restarted_after_sends;
  for (auto& o : outs_) {
    const bool known_before = known_epoch_[o.to_worker] != 0;
    if (learn(o.to_worker)) {
      // A new incarnation holds what it restored, at least what its backups covered; more, once it says so.
      o.receiver_holds = o.covered;
      restarted.insert(o.to_worker);
      if (known_before) restarted_after_sends.insert(o.to_worker);
    }
  }
  for (auto& in : ins_) {
    if (learn(in.from_worker)) in.ack_now = true;
  }
  // Ack mode: every worker acknowledges to the roots of the trees it works on, wherever they are: the sources, and
  // any worker whose finish() outputs root a tree (begin_finish_tree). Only the sources were learned: a sink two
  // stages below a ps-worker never knew it up, dropped its acknowledgements, and the job never ended.
  if (ack_mode()) {
    for (int w = 0; w < static_cast<int>(ctx_.topology->workers().size()); ++w) {
      if (w != id_) learn(w);
    }
  }
  if (checkpoint_mode() && !learned.empty()) check_round(learned);  // a failure: roll back with the others
  // A replayable source goes back to the position every receiver has covered by a backup, so a restarted receiver
  // gets again everything its restored state lacks (the others drop what they hold). Not for a receiver's first
  // incarnation seen here: what this source produced meanwhile is still unsent, and rewinding only produced it again
  // (at the start of every run: 23,552 of 200,000 heavy-hitter items twice under callgrind). A restarted source knows
  // no incarnation yet and starts from its restored position anyway.
  if (source_ && !restarted_after_sends.empty() && ctx_.config.mode == FtMode::Approx) {
    rewind_source();
    return;
  }
  for (auto& o : outs_) {
    if (!restarted.count(o.to_worker)) continue;
    if (acks_enabled()) {
      o.sent = o.acked;  // resend from the first unacknowledged item
    } else if (o.eos_seq && o.acked < o.eos_seq) {
      o.sent = std::min(o.sent, o.eos_seq - 1);  // mode none: only the end of stream is resent
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Recovery (DESIGN 5): fetch the latest state chain, restore, queue the backed-up items it does not reflect.
void Worker::restore() {
  // A first start (not a recovery, not a later incarnation): nothing of this run is in the store yet, but a store
  // reused from an earlier run (a backup server started by hand that served it, or one started anew on its
  // --store.path) holds that run's backups: they are dropped. Restored, they made a source take the earlier run's
  // position (a seed-2 run ended at once, reporting seed 1's heavy hitters), or a first recovery that run's state.
  if (ctx_.config.mode != FtMode::None && first_start()) {
    ctx_.store->drop(id_);
    // The checkpoint ledger's round and last complete checkpoint are the job's, not a worker's: a drop leaves them.
    // No checkpoint of this run can be complete before this worker has confirmed one, so a complete one is an earlier
    // run's (it failed later with "no state record of checkpoint N of round R").
    if (checkpoint_mode()) {
      if (const auto st = ctx_.store->checkpoint_status(); st.complete > 0) {
        throw ConfigError("worker " + std::to_string(id_) + ": the backup store holds an earlier run's checkpoints " +
                          "(checkpoint " + std::to_string(st.complete) + " of round " + std::to_string(st.round) +
                          " complete): checkpoint mode needs a new store (a backup server started on a new " +
                          "--store.path, or with the memory store)");
      }
    }
  }
  if (checkpoint_mode()) return restore_checkpoint();
  if (ctx_.config.mode == FtMode::None) {
    if (crash_in_) {
      crash_in_->record.recovery_ms = 0;
      restored_at_ = Clock::now();  // nothing to restore or replay: replay_ms is the wait for the first item (was
                                    // the time since the clock's epoch)
      awaiting_first_item_ = true;
      awaiting_live_item_ = true;
      continue_output_numbering();
    }
    return;
  }
  const auto t0 = Clock::now();
  bool caught_up_at_restore = false;
  // A prefetched chain (a recovering worker process, worker_process.cc) is used once: by the first restore.
  auto take = [](std::optional<std::shared_future<std::vector<Bytes>>>& f) {
    std::optional<std::vector<Bytes>> v;
    if (f) {
      v = f->get();
      f.reset();
    }
    return v;
  };
  auto prefetched_items = take(ctx_.prefetched_items);
  auto prefetched_chain = take(ctx_.prefetched_chain);
  std::vector<std::shared_ptr<const Bytes>> chain;
  if (prefetched_chain) {
    for (auto& b : *prefetched_chain) chain.push_back(std::make_shared<const Bytes>(std::move(b)));
  } else {
    chain = ctx_.store->state_chain_shared(id_);  // the in-process store's own buffers, not copies
  }
  StateRecord last;
  bool have_state = false;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    std::span<const std::uint8_t> snapshot;  // inside *chain[i]
    StateRecord rec = StateRecord::decode(*chain[i], &snapshot);
    if (i == 0 && !rec.full) throw FormatError("worker " + std::to_string(id_) + ": backup chain starts with a delta");
    // The restored state counts as backed up (Operator: restore_full and apply_delta), so the next backup is a delta
    // on this chain, or a full snapshot by the usual rule (backup_state_now): not a full snapshot because this
    // incarnation had written none yet (a KDD-like learner's recovery wrote 2.3 MB that way, about 4 ms before its
    // first example).
    chain_length_ = rec.full ? 1 : chain_length_ + 1;
    count_chain_bytes(rec.full, snapshot.size());
    if (op_) {
      const auto opened = open_snapshot(snapshot, op_type_);
      ByteReader r(opened.payload);
      if (rec.full) {
        op_->restore_full(r);
      } else {
        op_->apply_delta(r);
      }
    }
    last = std::move(rec);
    have_state = true;
  }
  if (op_ && alpha_may_shrink_) refresh_alpha();  // the restored state's
  if (have_state) {
    source_offset_ = last.source_offset;
    committed_mark_.offset = last.source_offset;
    backed_up_position_ = last.source_offset;
    if (resends_by_rewind_) {  // what each receiver's backups covered then: no incarnation of it restores less
      for (auto& o : outs_) {
        const auto it = last.covered_outputs.find(static_cast<std::uint32_t>(o.id));
        if (it != last.covered_outputs.end()) o.covered = o.receiver_holds = it->second;
      }
    }
    for (const auto& o : outs_) committed_mark_.out_seqs.push_back(last.outputs[static_cast<std::uint32_t>(o.id)]);
    for (auto& o : outs_) {
      auto it = last.outputs.find(static_cast<std::uint32_t>(o.id));
      o.out_seq = it == last.outputs.end() ? 0 : it->second;
      o.acked = o.sent = o.out_seq;
    }
    for (auto& o : outs_) o.released = o.out_seq;  // a checkpoint holds released outputs only
    for (const auto& ci : last.unacked_outputs) {
      auto& o = outs_[out_slot(ci.channel)];
      if (o.unacked.empty()) o.acked = o.sent = ci.item.seq - 1;
      o.unacked.push_back(ci.item);
      ++unacked_;
    }
    for (auto& in : ins_) {
      auto it = last.inputs.find(static_cast<std::uint32_t>(in.id));
      in.processed = in.received = it == last.inputs.end() ? 0 : it->second;
    }
    for (auto c : last.ended_inputs) ins_[in_slot(c)].ended = true;
  }
  publish_progress();  // from here on the page says where this incarnation is (before its first batch: restored)
  // Whether, of what the crashed incarnation processed on input `in` after the restored backup, only the logged
  // items come again (approximate mode, a sender that does not rewind: acknowledged items are not sent again).
  const auto only_logged_repeat = [this](const auto& in) {
    return ctx_.config.mode == FtMode::Approx && !in.from_source;
  };
  if (crash_in_ && crash_in_->positions_known && !source_) {
    std::uint64_t repeated = 0, resent = 0;
    for (const auto& in : ins_) {
      const auto it = crash_in_->processed.find(static_cast<std::uint32_t>(in.id));
      if (it != crash_in_->processed.end() && it->second > in.processed) {
        repeated += it->second - in.processed;
        if (!only_logged_repeat(in)) resent += it->second - in.processed;
      }
    }
    // Processed again: the whole gap, except in approximate mode from a sender that is not a replayable source: there
    // only the logged items of the gap are (counted with the replay below); the rest was acknowledged and never
    // logged, nothing brings it back (it is lost: missing_items), and it was counted as repeated.
    crash_in_->record.repeated_items = static_cast<std::int64_t>(resent);
    catching_up_ = repeated > 0;
    caught_up_at_restore = !catching_up_;  // back where it was once restored (timed below, with restore_ms)
  }
  // Measured losses of earlier failures, as the restored backup knew them. Failures after the incarnation that
  // wrote it took no backup before failing again: what they lost lies after the restored positions, so this
  // recovery's measurement covers it and they count 0. This failure's own entry waits for its measurement.
  if (op_ && ctx_.config.mode == FtMode::Approx) {
    missing_by_failure_.assign(static_cast<std::size_t>(failure_count_), 0);
    for (std::size_t j = 0; j < missing_by_failure_.size() && j < last.missing_by_failure.size(); ++j) {
      missing_by_failure_[j] = last.missing_by_failure[j];
    }
    if (!missing_by_failure_.empty()) missing_by_failure_.back() = -1;
    // Likewise what the restored backup left unwritten: this failure's entry is the restored chain's residual.
    residual_by_failure_.assign(static_cast<std::size_t>(failure_count_), 0);
    for (std::size_t j = 0; j < residual_by_failure_.size() && j < last.residual_by_failure.size(); ++j) {
      residual_by_failure_[j] = last.residual_by_failure[j];
    }
    if (!residual_by_failure_.empty()) residual_by_failure_.back() = have_state ? last.residual : 0;
  }
  if (source_) {
    produced_high_ = (*ctx_.source_progress)[id_].load();
    // Restored past what was last heard of it (a worker process: its production as of its last status): the crashed
    // incarnation produced up to here unreported, and no incarnation would count it (a distinct job's run on a loaded
    // host said 560,128 items of its 600,000). Counted now; on threads the progress is exact and this never applies.
    if (source_offset_ > produced_high_) {
      counters_.items_in.fetch_add(source_offset_ - produced_high_, std::memory_order_relaxed);
      produced_high_ = source_offset_;
      (*ctx_.source_progress)[id_].store(source_offset_);
    }
  }
  if (!source_) {
    std::vector<ResumeGap> gaps(ins_.size());
    std::vector<bool> eos_replayed(ins_.size(), false);
    for (std::size_t i = 0; i < ins_.size(); ++i) {
      gaps[i].restored = ins_[i].received;
      ins_[i].covered = ins_[i].processed;  // the restored state is a confirmed backup
    }
    std::uint64_t replayed = 0;
    for (const auto& rec : prefetched_items ? std::move(*prefetched_items) : ctx_.store->item_records(id_)) {
      for (auto& ci : decode_items(rec)) {
        const auto slot = in_slot(ci.channel);
        auto& in = ins_[slot];
        if (ci.item.seq <= in.received) continue;
        // Approximate mode, from a replayable source: only the logged items that follow the restored state without
        // a hole are replayed. The items of a hole (processed and acknowledged after the restored backup, never
        // logged: a punctuation-triggered write logs only the unprocessed tail) come again from the source, which
        // resends everything after a position this backup covers; replaying what lies beyond the hole would make
        // the dedupe drop them (R-recover, Proposition S).
        if (in.from_source && ctx_.config.mode == FtMode::Approx && ci.item.seq != in.received + 1) continue;
        in.received = ci.item.seq;
        ++gaps[slot].replayed;
        if (ci.end_of_stream) eos_replayed[slot] = true;
        queue_.push_back(ci);
        ++replayed;
        if (crash_in_ && crash_in_->positions_known && only_logged_repeat(in)) {
          const auto c = crash_in_->processed.find(ci.channel);
          if (c != crash_in_->processed.end() && ci.item.seq <= c->second) ++crash_in_->record.repeated_items;
        }
      }
    }
    // Where the crashed incarnation's positions are known, the replay ends once it is back there (check_caught_up).
    replay_remaining_ = caught_up_at_restore ? 0 : replayed;
    // Measure what the recovered state will never see: per channel, once its sender resumes (resolve_gap).
    if (crash_in_ && op_ && ctx_.config.mode == FtMode::Approx) {
      gaps_unknown_ = ins_.size();
      gaps_valid_ = true;
      missing_items_ = 0;
      gaps_since_ = Clock::now();
      for (std::size_t i = 0; i < ins_.size(); ++i) gaps[i].received = ins_[i].received;
      gaps_ = std::move(gaps);
      for (std::size_t i = 0; i < ins_.size(); ++i) {
        if (ins_[i].ended || eos_replayed[i]) resolve_gap(ins_[i], ins_[i].received + 1);  // nothing more comes
      }
    }
    measure_pending_ = crash_in_ && op_ && !crash_in_->state_at_crash.empty();
    for (auto& in : ins_) in.admitted = in.received;  // everything up to here is in the state or the log
    if (ask_mode() && crash_in_) {
      for (auto& in : ins_) in.ask_pending = !in.ended;
    }
    if (crash_in_) crash_in_->record.replayed_items = replayed;
    continue_output_numbering();
  }
  // Ack mode: nothing is resent or replayed from a log, so a restarted worker (a source too) numbers its outputs
  // after what each receiver holds, or they would be dropped as duplicates.
  if (ack_mode() && crash_in_) {
    for (auto& o : outs_) {
      o.numbering_pending = true;
      ++numbering_pending_;
    }
  }
  if (crash_in_) {
    const auto now = Clock::now();
    crash_in_->record.restore_ms = std::chrono::duration<double, std::milli>(now - t0).count();
    // Same clock reading: back where it was no earlier than restored (it was timed mid-restore, and came out up to
    // 0.01 ms before restore_ms on a loaded machine).
    if (caught_up_at_restore)
      crash_in_->record.caught_up_ms = std::chrono::duration<double, std::milli>(now - crash_in_->killed_at).count();
    restored_at_ = now;
    awaiting_first_item_ = true;
    awaiting_live_item_ = true;
  }
}

// Outputs after a recovery (DESIGN 5 step 4). When the previous incarnation logged every item it admitted (exact
// mode, or l = 0) and the operator's outputs depend on its inputs alone (Operator::replays_outputs_exactly), replay
// regenerates its outputs exactly, with the same sequence numbers, and receivers drop the ones they hold; so does a
// stateless operator behind replayable sources, which send everything again. Otherwise
// (approximate mode, l > 0; mode none, which restores nothing) nothing it processed since the restored backup is
// replayed, so every output from now on is new: it is numbered after what each receiver already holds. Each receiver is
// asked (query_numbering; it answers with the first number it does not hold, on_control), and nothing is processed
// until every output channel has its answer.
void Worker::continue_output_numbering() {
  if (failure_count_ == 0 || !op_) return;  // a first start: nothing was sent before
  const bool exact_replay = op_->replays_outputs_exactly();
  if (ctx_.config.mode == FtMode::Exact || ctx_.config.mode == FtMode::Ask) {
    // Every item logged (exact), or resent by the upstream workers from the checkpoint's positions (ask): replay
    // regenerates the outputs with the same numbers. Not those of an operator whose outputs depend on feedback: in
    // ask mode the ps-workers' requests for parameters after a failure of both reused numbers the servers held, were
    // dropped as duplicates, and the job stalled.
    if (exact_replay) return;
  } else if (ctx_.config.mode == FtMode::None) {
    // Nothing restored, replayed or resent: every output of the new incarnation is new. Numbered from 1 again, the
    // receivers dropped them as duplicates of the crashed incarnation's, its end of stream too, and waited for it
    // for good when it had less left to send than it had sent (ModeNoneRestart).
  } else if (ctx_.config.mode != FtMode::Approx || loss_l_.empty()) {
    return;
  } else if (loss_l_.back() == 0 && loss_theta_.back() == 0 && exact_replay) {
    return;  // the crashed incarnation logged every item: likewise
  } else if (inputs_replayable_ && exact_replay && stateless_op_) {
    // Behind replayable sources, which send again everything after the restored backup's positions (Proposition
    // S), a state that no item moves (alpha 0: a stateless operator) is restored exactly as it was at those
    // positions and nothing compensates it: the same items give the same outputs. Numbered anew, every output since
    // the backup reached its receivers a second time as a new item (a copy job's relay on threads: 260,000
    // duplicate effects in the exactly-once table after one failure).
    return;
  }
  // Otherwise (Operator::replays_outputs_exactly false: outputs that depend on feedback or timing) a replay would
  // number different outputs as the old ones, and receivers would drop new items as duplicates.
  for (auto& o : outs_) {
    o.numbering_pending = true;
    ++numbering_pending_;
  }
}

void Worker::query_numbering() {
  const auto now = Clock::now();
  for (auto& o : outs_) {
    if (!o.numbering_pending || now - o.queried_at < kQueryRetry) continue;
    if (!peer_ready(o.to_worker)) continue;
    o.queried_at = now;
    net::ControlMsg q{net::ControlKind::kPeerRestarted, static_cast<std::uint32_t>(id_), epoch_, 0,
                      static_cast<std::uint32_t>(o.id)};
    auto frame = encoder_.encode_control(static_cast<std::uint32_t>(id_), epoch_, q);
    zmq::message_t m = net::outgoing(frame);
    (void)socket_to(o.to_worker, true).send(m, zmq::send_flags::dontwait);
  }
}

void Worker::on_control(const net::ControlMsg& c, std::uint32_t sender, std::uint32_t sender_epoch) {
  if (c.kind == net::ControlKind::kBarrier) {
    on_barrier(c, sender, sender_epoch);
  } else if (c.kind == net::ControlKind::kPeerRestarted) {
    // A restarted sender asks where to continue numbering channel c: after everything received here (staged
    // included). Answer only once its new incarnation is known, so nothing its old one sent is taken after this.
    if (c.channel >= in_slot_.size() || in_slot_[c.channel] < 0) return;
    auto& in = ins_[in_slot(c.channel)];
    if (static_cast<std::uint32_t>(in.from_worker) != sender || !peer_ready(in.from_worker)) return;
    if (known_epoch_[in.from_worker] != sender_epoch) return;
    // Tests measuring the loss (measure_loss) compare states by input positions. Numbered from here, the sender's
    // items are new ones: if the crashed incarnation had processed past this point, the positions no longer name
    // the same items and this failure cannot be measured (what it lost is then the sender's, within its Gamma).
    if (measure_pending_) {
      const auto it = crash_in_->processed.find(c.channel);
      if (it != crash_in_->processed.end() && in.received < it->second) {
        measure_pending_ = false;
        maybe_compensate();
      }
    }
    net::ControlMsg r{net::ControlKind::kResendFrom, static_cast<std::uint32_t>(id_), epoch_, in.received + 1,
                      c.channel};
    auto frame = encoder_.encode_control(static_cast<std::uint32_t>(id_), epoch_, r);
    zmq::message_t m = net::outgoing(frame);
    (void)socket_to(in.from_worker, true).send(m, zmq::send_flags::dontwait);
  } else if (c.kind == net::ControlKind::kAsk) {
    // A recovered receiver's checkpoint reflects channel c up to c.seq - 1: those items are covered; resend the rest.
    if (c.channel >= out_slot_.size() || out_slot_[c.channel] < 0) return;
    auto& o = outs_[out_slot(c.channel)];
    if (static_cast<std::uint32_t>(o.to_worker) != sender || !peer_ready(o.to_worker)) return;
    if (known_epoch_[o.to_worker] != sender_epoch) return;  // asked again once its incarnation is known here
    const std::uint64_t held = std::min(c.seq > 0 ? c.seq - 1 : 0, std::max(o.out_seq, o.eos_seq));
    if (held > o.acked) {
      o.acked = held;
      drop_acknowledged(o, held);
    }
    o.covered = std::max(o.covered, held);
    o.sent = o.acked;
  } else if (c.kind == net::ControlKind::kResendFrom) {
    if (c.channel >= out_slot_.size() || out_slot_[c.channel] < 0) return;
    auto& o = outs_[out_slot(c.channel)];
    if (!o.numbering_pending) return;
    o.numbering_pending = false;
    --numbering_pending_;
    const std::uint64_t held = c.seq > 0 ? c.seq - 1 : 0;
    if (held > o.out_seq) {
      o.out_seq = held;
      o.acked = std::max(o.acked, held);
      o.sent = std::max(o.sent, held);
      drop_acknowledged(o, held);
      // An end of stream numbered before the answer (finish() ran during the replay) stays after the outputs, as in
      // number_output: left at its old number, the raised `acked` would count it as acknowledged though never sent.
      if (o.eos_seq != 0 && o.eos_seq <= o.out_seq) o.eos_seq = o.out_seq + 1;
    }
  }
}

// Tests only (RunConfig::measure_losses): the distance between the state at the crash and the recovered state once
// it has processed again exactly what the crashed one had on every input channel (replay may go further: the
// runtime itself never uses the crash point, which a real crash does not reveal). When channels catch up unevenly
// there is no such moment and the failure stays unmeasured (lost_divergence -1).
void Worker::measure_loss() {
  if (!measure_pending_) return;
  measure_pending_ = false;
  auto crashed = ctx_.registry->make_operator(stage_.kind, stage_.params, {ref_.index, stage_.parallelism});
  const auto opened = open_snapshot(crash_in_->state_at_crash, op_type_);
  ByteReader r(opened.payload);
  crashed->restore_full(r);
  crash_in_->record.lost_divergence = op_->distance(*crashed);
  set_recovered(crash_in_->record);
  maybe_compensate();
}

// Recovered: the state is restored and every replayed item processed. Complete the failure record (recovery time;
// in tests, the divergence between the crashed state and the recovered one), then let the operator compensate
// (e.g. Theorem 2) and back up the compensated state.
void Worker::mark_recovered() {
  awaiting_first_item_ = false;
  if (!crash_in_) return;
  auto& rec = crash_in_->record;
  rec.recovery_ms = ms_since(crash_in_->killed_at);
  rec.replay_ms = ms_since(restored_at_);
  set_recovered(rec);
  compensate_pending_ = true;
  maybe_compensate();
}

// Compensation waits until every sender has shown where it resumes (the measured loss) and, in tests measuring the
// loss, until this state has caught up with the crashed one (states are compared before compensation).
void Worker::maybe_compensate() {
  if (!compensate_pending_ || measure_pending_ || gaps_unknown_ > 0) return;
  compensate_pending_ = false;
  compensate();
}

// Channel in's sender resumed at seq resumed_at (the first item it sends this incarnation; senders resend from
// their oldest unacknowledged item, replayable sources from what this worker's backups covered). Items after the
// restored state, neither replayed nor sent again, are missing for good: the dedupe drops what is sent again at
// or below the replayed position.
void Worker::resolve_gap(InChannel& in, std::uint64_t resumed_at) {
  auto& g = gaps_[in_slot(static_cast<std::uint64_t>(in.id))];
  if (g.known) return;
  g.known = true;
  const std::uint64_t upto = std::max(resumed_at > 0 ? resumed_at - 1 : 0, g.received);
  g.missing = upto - g.restored - g.replayed;
  missing_items_ += g.missing;
  if (--gaps_unknown_ == 0) {
    if (!missing_by_failure_.empty()) missing_by_failure_.back() = static_cast<std::int64_t>(missing_items_);
    maybe_compensate();
  }
}

// What a state backup records for this incarnation's failure while its senders resume: the resolved channels'
// measurements plus the holes of the others (a backup never reflects items past them until they resolve).
std::int64_t Worker::current_missing() const {
  if (!gaps_valid_) return -1;
  std::uint64_t n = 0;
  for (const auto& g : gaps_) n += g.counted();
  return static_cast<std::int64_t>(n);
}

void Worker::compensate() {
  auto& rec = crash_in_->record;
  if (op_ && ctx_.config.mode == FtMode::Approx) {
    RecoveryInfo info;
    info.failure_count = failure_count_;
    info.theta = rec.theta;
    info.l = static_cast<double>(rec.l);
    info.alpha = op_->alpha();
    info.theta_by_failure = loss_theta_;
    info.l_by_failure = loss_l_;
    if (gaps_valid_) rec.missing_items = static_cast<std::int64_t>(missing_items_);
    for (auto m : missing_by_failure_) {
      info.missing_by_failure.push_back(m >= 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(m))
                                               : std::nullopt);
    }
    info.residual_by_failure = residual_by_failure_;
    if (!residual_by_failure_.empty()) rec.residual = residual_by_failure_.back();
    op_->on_recovered(info);
    unchecked_items_ = 0;
    // Always a backup: the compensation (even of nothing), and how many failures it covers, are part of the state,
    // so that a later recovery neither repeats nor loses it. Taken as at an R-state check: after any pending one,
    // written asynchronously (the first items flow while a big state is written), waited for at once only if the
    // compensation moved the state more than theta (proofs/general-bounds.md, R-state and R-recover).
    if (pending_state_ticket_) writer_->wait(pending_state_ticket_);
    pending_state_ticket_ = 0;
    const double d = op_->divergence();
    if (d > schedule_.current().theta) {
      backup_state(true);
    } else {
      backup_state(false);
      pending_state_ticket_ = last_state_ticket_;
      pending_divergence_ = d;
    }
  }
  compensated_ = true;
  maybe_complete_recovery();
}

// The first item after the recovery that came from upstream (not from the log; a source: the first batch it
// produced) is about to be processed: restored, replayed and reconnected (FailureRecord::first_item_ms). ended: the
// input ended without one.
void Worker::on_live_item(bool ended) {
  awaiting_live_item_ = false;
  if (!crash_in_) return;
  if (!ended) crash_in_->record.first_item_ms = ms_since(crash_in_->killed_at);
  set_recovered(crash_in_->record);
  maybe_complete_recovery();
}

// Whether every input (but channel `except`) has processed again what the crashed incarnation had, or has ended.
bool Worker::back_where_crashed(std::optional<std::uint32_t> except) const {
  for (const auto& in : ins_) {
    const auto channel = static_cast<std::uint32_t>(in.id);
    const auto c = crash_in_->processed.find(channel);
    if (channel != except && c != crash_in_->processed.end() && !in.ended && in.processed < c->second) return false;
  }
  return true;
}

// After processing an item in a recovered incarnation that had items to process again: caught up once every input
// is back where the crashed incarnation had left it (FailureRecord::caught_up_ms).
// The replay is then over: the logged items still queued are the backlog the crashed incarnation had received and
// never processed, work it had not done either (an exact-mode tokenizer's log held the whole input's lines, and its
// recoveries completed only at the end of the stream or never: recovered 0 in 318 of 325 failures).
void Worker::check_caught_up() {
  if (!back_where_crashed()) return;
  catching_up_ = false;
  crash_in_->record.caught_up_ms = ms_since(crash_in_->killed_at);
  set_recovered(crash_in_->record);
  replay_remaining_ = 0;
  if (awaiting_first_item_) mark_recovered();
}

void Worker::maybe_complete_recovery() {
  if (!compensated_ || awaiting_live_item_) return;
  set_recovered(crash_in_->record);
  recovery_complete_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------------------------
// Decodes a frame into scratch_; a frame the codec rejects (truncated, oversized, other version) is counted and
// dropped (DESIGN 8).
bool Worker::decode(const zmq::message_t& msg) {
  net::received(msg);
  try {
    net::decode_into({static_cast<const std::uint8_t*>(msg.data()), msg.size()}, {}, scratch_);
    return true;
  } catch (const FormatError&) {
    counters_.bad_messages.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
}

bool Worker::receive(std::chrono::milliseconds wait) {
  bool any = false;
  if (wait.count() > 0) {
    send_due_acks();  // about to wait: every sender learns all there is first (a source, its steps: send_due_acks)
    zmq::pollitem_t items[] = {{static_cast<void*>(*inbox_), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(*ackbox_), 0, ZMQ_POLLIN, 0},
                               {nullptr, wakeup_.fd(), ZMQ_POLLIN, 0}};
    zmq::poll(items, 3, wait);
    check_kill();
    if (!(items[0].revents & ZMQ_POLLIN) && !(items[1].revents & ZMQ_POLLIN)) {
      // Nothing came: every due ack goes out (one that could not go out before may now, and a source held by its
      // window may wait for it): nothing else may ever come to prompt it.
      counters_.empty_waits.fetch_add(1, std::memory_order_relaxed);
      send_due_acks(true);
      return false;
    }
  }
  zmq::message_t msg;
  for (int n = 0; n < 1024; ++n) {
    if (!ackbox_->recv(msg, zmq::recv_flags::dontwait)) break;
    any = true;
    if (!decode(msg)) continue;
    if (auto* a = std::get_if<net::AckMsg>(&scratch_.body)) {
      on_ack(*a, scratch_.epoch);
    } else if (auto* c = std::get_if<net::ControlMsg>(&scratch_.body)) {
      on_control(*c, scratch_.sender, scratch_.epoch);
    } else if (auto* f = std::get_if<net::FeedbackMsg>(&scratch_.body)) {
      if (op_) {
        op_->on_feedback(f->items, *emitter_);
        unchecked_items_ = 0;  // the state may have moved: compare with theta at the next item
      }
    }
  }
  for (int n = 0; n < 64; ++n) {
    // Data stays in the socket (unacknowledged, so still held by its sender) while the stage is full.
    if (staging_.size() >= ctx_.config.queue_items) break;
    if (!inbox_->recv(msg, zmq::recv_flags::dontwait)) break;
    any = true;
    if (!decode(msg)) continue;
    if (auto* b = std::get_if<net::BatchMsg>(&scratch_.body)) {
      on_batch(*b, scratch_.sender, scratch_.epoch);
    } else if (auto* a = std::get_if<net::AckMsg>(&scratch_.body)) {
      on_ack(*a, scratch_.epoch);
    } else if (auto* c = std::get_if<net::ControlMsg>(&scratch_.body)) {
      on_control(*c, scratch_.sender, scratch_.epoch);  // barrier notices travel in order with the items
    }
  }
  admit();
  send_due_acks();
  return any;
}

// Receipt (DESIGN 3, L). A batch is first staged: staged items are not acknowledged, so their sender still holds
// them, exactly as if they were still on the wire. Items are admitted from the stage into the processing queue and
// acknowledged on admission; in approximate mode at most l admitted items are ever unprocessed and unbacked, so
// acknowledging never needs an item backup. With l = 0 (and in exact mode) every admitted item is backed up before
// its acknowledgement; punctuation (end of stream) is always backed up.
void Worker::on_batch(const net::BatchMsg& b, std::uint32_t /*sender*/, std::uint32_t sender_epoch) {
  if (b.channel >= in_slot_.size() || in_slot_[b.channel] < 0) {
    counters_.bad_messages.fetch_add(1, std::memory_order_relaxed);  // not a channel into this worker
    return;
  }
  auto& in = ins_[in_slot(b.channel)];
  // Checkpoint mode: from an incarnation not known here yet, a restart this worker must learn of first (it may
  // have to roll back: check_round) before it takes anything from it.
  if (checkpoint_mode() && sender_epoch > known_epoch_[in.from_worker]) refresh_peers();
  // Sent by an incarnation that has since been replaced: its successor resends or renumbers what counts.
  if (sender_epoch < known_epoch_[in.from_worker]) {
    counters_.duplicates_dropped.fetch_add(b.items.size(), std::memory_order_relaxed);
    return;
  }
  const std::uint64_t eos_seq = b.end_of_stream ? b.first_seq + b.items.size() : 0;
  if (b.items.empty() && !b.end_of_stream) return;
  // Mode none: the sender's end of stream is here, so its whole stream is. Anything numbered after it comes from a
  // restarted sender (continue_output_numbering), which has none of the state the stream came from: what it makes at
  // the end of its inputs is not a second result (an untrained learner copy's counters would replace the
  // model's). Dropped, as the sender drops what it emits after its end of stream went out; its end of stream is
  // acknowledged, or it would wait for that forever.
  if (ctx_.config.mode == FtMode::None && in.eos_received != 0) {
    for (const auto& item : b.items) {
      (item.seq <= in.received ? counters_.duplicates_dropped : counters_.outputs_after_end)
          .fetch_add(1, std::memory_order_relaxed);
    }
    if (b.end_of_stream && !send_ack(in, eos_seq)) in.ack_due = std::max(in.ack_due, eos_seq);
    return;
  }
  if (gaps_unknown_ > 0) resolve_gap(in, b.first_seq);
  bool took = false;
  for (const auto& item : b.items) {
    if (item.seq <= in.received) {
      counters_.duplicates_dropped.fetch_add(1, std::memory_order_relaxed);
      // An approximate-mode source sends again what this worker holds when it restarted from an older position:
      // tell it where this worker is (it keeps no copies: acknowledgements are only its flow control), or a source
      // limited in flight (net.in-flight-max) would wait for them for good.
      if (in.from_source && ctx_.config.mode == FtMode::Approx) {
        in.ack_due = std::max({in.ack_due, in.last_ack, in.admitted});
        in.ack_now = true;
      }
      continue;
    }
    if (item.seq > in.received + 1) counters_.gaps.fetch_add(item.seq - in.received - 1, std::memory_order_relaxed);
    in.received = item.seq;
    staging_.push_back({static_cast<std::uint32_t>(b.channel), false, item});
    if (ack_mode()) staging_roots_.push_back(b.roots.empty() ? 0 : b.roots[&item - b.items.data()]);
    took = true;
  }
  if (took && b.emitted_ns > 0 && !b.items.empty()) {
    latency_marks_.push_back({in_slot(b.channel), b.items.back().seq, b.emitted_ns});
  }
  if (b.end_of_stream && eos_seq > in.received) {
    in.received = eos_seq;
    in.eos_received = eos_seq;
    Item p;
    p.seq = eos_seq;
    staging_.push_back({static_cast<std::uint32_t>(b.channel), true, p});
    if (ack_mode()) staging_roots_.push_back(0);
    took = true;
  }
  // A resent end of stream (mode none); an ack that cannot go out yet stays due (send_due_acks).
  const bool eos_ack_waits =  // ack mode: the end of stream is acknowledged once a backup records it
      ack_mode() && (!in.ended || std::any_of(deferred_eos_acks_.begin(), deferred_eos_acks_.end(),
                                              [&](const EosAck& e) { return e.slot == in_slot(b.channel); }));
  if (!took && !acks_enabled() && b.end_of_stream && !eos_ack_waits && !send_ack(in, eos_seq)) {
    in.ack_due = std::max(in.ack_due, eos_seq);
  }
  if (!took && acks_enabled()) {
    // Only duplicates (a restarted sender resending): acknowledge them so it can let them go. Ask mode
    // acknowledges only what a checkpoint covers.
    if (ask_mode()) {
      in.ack_due = std::max(in.ack_due, in.covered);
    } else if (in.deferred_acks.empty()) {
      in.ack_due = std::max(in.ack_due, in.admitted);
    }
  }
  in.ask_pending = false;  // the sender is sending again: it has what this worker asked for, or more
}

void Worker::admit() {
  if (staging_.empty()) return;
  const bool ft = acks_enabled();
  const auto l = schedule_.current().l;
  const bool log_all = writes_item_log();
  std::size_t n = staging_.size();
  // R-receive: at most l acknowledged items unprocessed and unlogged. Not needed when every input comes from a
  // replayable source: a restart gets again everything after the backup it restores (Proposition S), so nothing
  // acknowledged is lost, and the queue may run as far ahead as in mode none.
  if (ft && !log_all && !ask_mode() && !checkpoint_mode() && !inputs_replayable_)
    n = std::min<std::size_t>(n, l > unbacked_ ? l - unbacked_ : 0);
  // The processing queue holds at most net.queue-items: beyond that, items wait in the stage and then in the socket
  // (their sender's window), instead of growing the queue (mode none admitted everything it could read: its queues
  // grew to millions of items, reallocating and faulting pages as they went).
  const std::size_t room = ctx_.config.queue_items > queue_.size() ? ctx_.config.queue_items - queue_.size() : 0;
  n = std::min(n, room);
  if (n == 0) return;
  bool punctuation = false;
  for (std::size_t i = 0; i < n; ++i) {
    auto& ci = staging_.front();
    auto& in = ins_[in_slot(ci.channel)];
    in.admitted = ci.item.seq;
    in.touched = true;
    if (ci.end_of_stream) {
      punctuation = true;
      // Mode none acknowledges only the end of a stream. An ack that cannot go out yet (the sender is not known
      // here yet: with worker processes a batch can arrive before the controller's announcement) stays due
      // (send_due_acks): the sender waits for it, and nothing would resend the end of stream to ask again.
      // Ack mode acknowledges it once a backup holds it (process_one), so that a sender never finishes for good
      // before its receiver's state knows the stream ended.
      if (!ft && !ack_mode() && !send_ack(in, ci.item.seq)) in.ack_due = std::max(in.ack_due, ci.item.seq);
    }
    queue_.push_back(ci);
    staging_.pop_front();
    if (ack_mode()) {
      queue_roots_.push_back(staging_roots_.front());
      staging_roots_.pop_front();
    }
  }
  // Ask mode: no acknowledgement on receipt and no item log; senders hold the items until a checkpoint covers them.
  if (!ft || ask_mode()) return;
  if (checkpoint_mode()) return acknowledge_admitted();  // no item log: acknowledgements are flow control only
  unbacked_ += n;
  if (log_all || punctuation) {
    backup_items();
    last_item_ticket_ = writer_->submit([] {});  // barrier: confirmed once the backups before it are written
  }
  // Acknowledge only once every earlier item backup is confirmed: until then the items it holds are unprotected.
  const std::uint64_t ticket = last_item_ticket_ > writer_->confirmed() ? last_item_ticket_ : 0;
  for (auto& in : ins_) {
    if (!in.touched) continue;
    in.touched = false;
    if (ticket == 0 && in.deferred_acks.empty()) {
      in.ack_due = std::max(in.ack_due, in.admitted);
    } else {
      in.deferred_acks.emplace_back(in.admitted, ticket);
    }
  }
  counters_.unbacked.store(unbacked_, std::memory_order_relaxed);
}

void Worker::release_acks() {
  if (!writer_) return;
  update_coverage();
  if (ack_mode()) release_tree_acks();
  std::uint64_t done = 0;
  bool fetched = false;
  for (auto& in : ins_) {
    if (in.deferred_acks.empty()) continue;
    if (!fetched) {
      done = writer_->confirmed();
      fetched = true;
    }
    std::uint64_t ack = 0;
    while (!in.deferred_acks.empty() && in.deferred_acks.front().second <= done) {
      ack = in.deferred_acks.front().first;
      in.deferred_acks.pop_front();
    }
    if (ack && !send_ack(in, ack)) in.ack_due = std::max(in.ack_due, ack);
  }
}

void Worker::send_due_acks(bool all) {
  // Approximate mode: a source keeps no copy of what it sent (resends_by_rewind_), so acknowledgements are only
  // its flow control, and coverage what it commits. They go out in steps of an eighth of the flow window, and all
  // after a wait that brought nothing (receive): a source woken by every small ack, as its window fills, preempts
  // the workers it feeds and leaves them starved in turn. Not each time this worker is about to wait: fed more
  // slowly than it works, it runs dry after nearly every batch, and HyperLogLog's two workers sent their source an
  // ack every 1,100 items (13,000 each per 1.5e7 items), each one received and decoded by the source, the slowest
  // thread of that pipeline (distinct job on threads: approx at 94% of none's throughput for the same CPU time).
  // (With net.in-flight-max a step of at most half of it: the source may send a channel only that far beyond its
  // acknowledgements, and a receiver that waited for the rest would stall it until its wait brought nothing. For
  // the same reason a source is acknowledged at once (InChannel::ack_now) after it restarted, after a rewind whose
  // items this worker drops, and first in this incarnation: after failures of all workers, sources learned what
  // their restored receivers held a step late and resent more, which cost each KDD-like failure 4-7 ms.)
  std::uint64_t source_step = ctx_.config.mode == FtMode::Approx ? ctx_.config.flow_window / 8 : 0;
  if (ctx_.config.in_flight_max > 0) source_step = std::min(source_step, ctx_.config.in_flight_max / 2);
  for (auto& in : ins_) {
    if (!all && !in.ack_now && in.from_source && in.ack_due < in.last_ack + source_step) continue;
    // An ack that cannot go out yet (the sender's new incarnation is not known here yet: with worker processes a
    // batch can arrive before the controller's announcement) stays due; dropping it would leave the sender waiting.
    // Ask mode acknowledges exactly what its confirmed checkpoints cover (checkpoint notices).
    const std::uint64_t seq = ask_mode() ? in.covered : std::max(in.ack_due, in.last_ack);
    if ((in.ack_due || in.covered > in.covered_sent) && send_ack(in, seq)) {
      in.ack_due = 0;
      in.ack_now = false;
    }
  }
}

// State backups confirmed by the store cover the input items they reflect; senders learn it with the next ack.
void Worker::update_coverage() {
  if (coverage_pending_.empty()) return;
  const auto done = writer_->confirmed();
  while (!coverage_pending_.empty() && coverage_pending_.front().first <= done) {
    const auto& processed = coverage_pending_.front().second;
    for (std::size_t i = 0; i < ins_.size(); ++i) ins_[i].covered = std::max(ins_[i].covered, processed[i]);
    coverage_pending_.pop_front();
  }
}

bool Worker::send_ack(InChannel& in, std::uint64_t seq) {
  // A peer just learned (first call false) can take the ack at once; a peer that is down will resend when it is
  // back, and get its ack then.
  if (!peer_ready(in.from_worker) && !peer_ready(in.from_worker)) return false;
  // When every admitted item is logged before its ack, an acknowledged item is covered by the log.
  const std::uint64_t covered = writes_item_log() ? std::max(in.covered, seq) : in.covered;
  auto frame =
      encoder_.encode_ack(static_cast<std::uint32_t>(id_), epoch_, static_cast<std::uint32_t>(in.id), seq, covered);
  zmq::message_t m = net::outgoing(frame);
  (void)socket_to(in.from_worker, true).send(m, zmq::send_flags::dontwait);
  counters_.acks_sent.fetch_add(1, std::memory_order_relaxed);
  in.last_ack = std::max(in.last_ack, seq);
  in.covered_sent = std::max(in.covered_sent, covered);
  return true;
}

// The unacknowledged items hold consecutive sequence numbers: those up to `seq` leave in one step.
void Worker::drop_acknowledged(OutChannel& o, std::uint64_t seq) {
  if (o.unacked.empty() || o.unacked.front().seq > seq) return;
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(seq - o.unacked.front().seq + 1, o.unacked.size()));
  o.unacked.pop_front(n);
  unacked_ -= n;
}

void Worker::on_ack(const net::AckMsg& a, std::uint32_t sender_epoch) {
  if (!a.trees.empty()) {
    on_tree_acks(a.trees);
    return;
  }
  if (a.channel >= out_slot_.size() || out_slot_[a.channel] < 0) return;
  auto& o = outs_[out_slot(a.channel)];
  if (const auto covered = std::min(a.covered, std::max(o.out_seq, o.eos_seq)); covered > o.covered) {
    o.covered = covered;
    if (resends_by_rewind_) coverage_advanced_ = true;
  }
  // Only an incarnation known here speaks for what the receiver holds (an older one's may still be on its way).
  if (resends_by_rewind_ && sender_epoch == known_epoch_[o.to_worker]) {
    o.receiver_holds = std::max(o.receiver_holds, a.seq);
  }
  if (a.seq <= o.acked) return;
  o.acked = std::min(a.seq, std::max(o.out_seq, o.eos_seq));
  drop_acknowledged(o, o.acked);  // nothing to drop for a rewinding source: it holds no copies
  if (o.sent < o.acked) o.sent = o.acked;
}

// ---------------------------------------------------------------------------------------------------------------
std::size_t Worker::process_some(std::size_t budget) {
  if (checkpoint_mode()) return process_aligned(budget);
  std::size_t n = 0;
  while (n < budget && unacked_total() < window()) {
    if (queue_.empty()) {
      admit();
      if (queue_.empty()) break;
    }
    check_kill();
    const ChannelItem ci = queue_.front();
    if (op_waits_ && !ci.end_of_stream && !op_->ready()) break;  // held until feedback makes it ready (Operator::ready)
    // The item counts as unprocessed until its post-update backup check completes (proofs/general-bounds.md).
    if (measure_pending_) {
      auto it = crash_in_->processed.find(ci.channel);
      if (it == crash_in_->processed.end() || ci.item.seq > it->second) {
        // The state now reflects what the crashed one did on this channel; compare only if every other channel has
        // caught up too (items still to come on a lagging channel are not lost). Otherwise give up on measuring.
        if (back_where_crashed(ci.channel)) {
          measure_loss();
        } else {
          measure_pending_ = false;
          maybe_compensate();
        }
      }
    }
    if (awaiting_live_item_ && replay_remaining_ == 0 && !ci.end_of_stream) on_live_item(false);
    if (ack_mode()) {
      current_root_ = queue_roots_.front();
      queue_roots_.pop_front();
    }
    process_one(ci);
    current_root_ = 0;
    if (catching_up_) check_caught_up();
    queue_.pop_front();
    if (replay_remaining_ > 0 && --replay_remaining_ == 0 && awaiting_first_item_) mark_recovered();
    if (unbacked_ > queue_.size()) unbacked_ = queue_.size();
    ++n;
  }
  if (n) {
    count_processed(n);
    record_latencies();
    // Hopping / sliding windows raise the thresholds again once the failures have left the window (DESIGN 3).
    if (ctx_.config.reset != ResetPolicy::Fixed) {
      schedule_.on_progress(processed_);
      unchecked_items_ = 0;
    }
  }
  admit();
  send_due_acks();
  return n;
}

// The counters of processed items: items_in, and the input position (WorkerCounters::input_position).
void Worker::count_processed(std::size_t n) {
  processed_ = processed_before_ + counters_.items_in.fetch_add(n, std::memory_order_relaxed) + n;
  std::uint64_t position = 0;
  for (const auto& in : ins_) position += in.processed;
  publish_progress();
  if (position > counters_.input_position.load(std::memory_order_relaxed)) {
    counters_.input_position.store(position, std::memory_order_relaxed);
  }
}

void Worker::process_one(const ChannelItem& ci) {
  auto& in = ins_[in_slot(ci.channel)];
  if (ci.end_of_stream) {
    in.ended = true;
    in.processed = ci.item.seq;
    if (ack_mode()) {  // acknowledged once the backup that records it is confirmed (release_tree_acks)
      checkpoint();
      deferred_eos_acks_.push_back({last_state_ticket_, in_slot(ci.channel), ci.item.seq});
    }
    return;
  }
  emitter_->channel = ci.channel;
  if (ack_mode()) tree_xor_ = edge_id(ci.channel, ci.item.seq);  // acknowledging the item's own edge
  op_->process(ci.item, *emitter_);
  in.processed = ci.item.seq;
  if (ack_mode() && current_root_ != 0) {
    tree_acks_.push_back(current_root_);
    tree_acks_.push_back(tree_xor_);
  }
  after_update();
}

// Operator::alpha() as the state stands now (it may have shrunk: Operator::alpha_may_shrink).
void Worker::refresh_alpha() {
  op_alpha_ = op_->alpha();
  alpha_bounds_drift_ = op_alpha_ > 0 && op_->divergence_bounded_by_alpha();
}

// Every admitted item is logged before it is acknowledged in exact mode, with l = 0, and in approximate mode once
// theta has fallen below alpha (after enough halvings a single item may exceed it, so the Theta rule would back
// up the state after nearly every item): the worker then protects itself as upstream backup does, item log plus a
// state backup every ft.exact-state-every items, and loses nothing at a failure, which is within any bound and
// cheaper than a state backup per item.
bool Worker::logs_every_item() const {
  if (ctx_.config.mode == FtMode::Exact || microbatch_mode()) return true;
  if (ctx_.config.mode != FtMode::Approx || source_) return false;
  return schedule_.current().l == 0 || (op_ && schedule_.current().theta < op_alpha_);
}

// Whether that protection writes the item log. Not behind replayable sources in approximate mode: they send again
// everything after the state backup a recovery restores (Proposition S), so the periodic state backups alone lose
// nothing, and the log would only cost a write per batch and hold back its acknowledgement.
bool Worker::writes_item_log() const { return logs_every_item() && !inputs_replayable_; }

void Worker::after_update_checked() {
  switch (ctx_.config.mode) {
    case FtMode::None:
    case FtMode::Checkpoint:  // state is snapshotted at aligned barriers (worker_checkpoint.cc)
      return;
    case FtMode::Approx: {
      // Behind replayable sources a recovery processes again every item since the backup it restores (Proposition
      // S), however little the state moved since: ft.replay-items-max bounds that work (and the recovery time)
      // with a state backup at least every so many items.
      ++since_state_backup_;
      const bool replay_due = replay_items_max_ > 0 && since_state_backup_ >= replay_items_max_;
      // One item adds at most alpha to the divergence (Operator::divergence_bounded_by_alpha), so after a check
      // that left room r below what the next step compares with, the next floor(r / alpha) items cannot reach it:
      // they skip the check. An item that emits, a recovery and a change of thresholds reset the count.
      if (unchecked_items_ > 0 && !replay_due) {
        --unchecked_items_;
        return;
      }
      if (logs_every_item()) {  // theta below alpha: protected as in exact mode (see logs_every_item)
        const bool backed_up = replay_due || since_state_backup_ >= ctx_.config.exact_state_every;
        if (backed_up) backup_state(false);
        // No item before the next periodic or replay backup can be due: they take after_update's fast path. An
        // alpha that may shrink (a learner's, below theta as it learns) is looked at every kAlphaCheckEvery items.
        constexpr std::uint64_t kAlphaCheckEvery = 4096;
        const std::uint64_t every = std::min<std::uint64_t>(ctx_.config.exact_state_every, replay_limit_);
        if (every > since_state_backup_ + 1) unchecked_items_ = every - since_state_backup_ - 1;
        if (alpha_may_shrink_) {
          unchecked_items_ = std::min(unchecked_items_, kAlphaCheckEvery);
          refresh_alpha();
        }
        if (logs_every_item() || backed_up) return;
        // Alpha has just fallen to theta or below: the Theta rule from this item on, starting with its check. The
        // state may have drifted past theta while every item was protected; returning left it so until the next
        // item, and a failure there jumped back by more than theta under the Theta rule (Proposition R; 2 runs in
        // 15 of LearnCli.AFailedLearnerJumpsBack... on a loaded host).
        unchecked_items_ = 0;
      }
      // Behind replayable sources with a remote store the cost rule alone paces the state backups (replay_due): a
      // failure there loses nothing whatever the drift (Proposition S), so a backup at each Theta trigger would only
      // shorten what a recovery repeats, at a round trip to the backup server each (on worker processes about 300 us
      // of the machine's CPU: heavy hitters ran at 74% of mode none; experiments/results/process-runtime). The
      // items before the next one skip the check.
      if (never_wait_for_store_ && !replay_due) {
        if (replay_limit_ > since_state_backup_ + 1) unchecked_items_ = replay_limit_ - since_state_backup_ - 1;
        return;
      }
      // DESIGN 3, Theta, with asynchronous backups: a state backup is taken once the divergence passes
      // (1 - headroom) * theta, so it can be written while the state drifts by the headroom; the compute thread
      // waits for the store only if that is used up first. The state never drifts more than theta (plus the item
      // in process, counted in l) from the last confirmed backup (proofs/general-bounds.md, rule R-state).
      const double theta = schedule_.current().theta;
      // (Not read behind replayable sources with a remote store: the backup is due there whatever the divergence,
      // and one measured at backups costs a pass over the state.)
      const double d = never_wait_for_store_ ? 0 : op_->divergence();
      const double trigger = theta * (1 - ctx_.config.state_headroom);
      if (d <= trigger && alpha_bounds_drift_) {
        const double room = pending_state_ticket_ && !never_wait_for_store_
                                ? std::min(trigger, theta - pending_divergence_) - d
                                : trigger - d;
        // (Saturated: with Theta up to any finite number, room / alpha may pass 2^64, whose cast is undefined.)
        if (room >= op_alpha_) unchecked_items_ = static_cast<std::uint64_t>(std::min(room / op_alpha_, 0x1p63));
      }
      if (d > trigger || replay_due) {
        // (The forced backups of the replay interval wait for the one in flight: they bound the work a recovery
        // repeats. Behind replayable sources with a remote store they are the only ones, and a new one is not
        // waited for.)
        if (pending_state_ticket_) writer_->wait(pending_state_ticket_);
        pending_state_ticket_ = 0;
        // A partial backup may leave part of the divergence unwritten, well below the trigger (general-bounds §3.6),
        // but only with room for a few items (alpha each) above it: otherwise the slots left near the residual
        // would bring the next backup within an item or two, and whole deltas are cheaper.
        constexpr double kItemsAboveResidual = 4;
        const double residual =
            std::min(ctx_.config.delta_residual * trigger, trigger - kItemsAboveResidual * op_alpha_);
        if (d > theta && !never_wait_for_store_) {  // nothing left to drift by while it is written: write it now
          backup_state(true, residual);
        } else {
          backup_state(false, residual);
          pending_state_ticket_ = last_state_ticket_;
          pending_divergence_ = d;
        }
        if (alpha_may_shrink_) refresh_alpha();
      } else if (pending_state_ticket_ && !never_wait_for_store_ && d + pending_divergence_ > theta) {
        writer_->wait(pending_state_ticket_);
        pending_state_ticket_ = 0;
      }
      return;
    }
    case FtMode::Exact:
      if (++since_state_backup_ >= ctx_.config.exact_state_every) backup_state(false);
      return;
    case FtMode::Ask:
      if (++since_state_backup_ >= ctx_.config.ask_every) checkpoint();
      return;
    case FtMode::Ack:
      if (!stateless_op_ && ++since_state_backup_ >= ctx_.config.ack_state_every) checkpoint();
      return;
    case FtMode::MicroBatch: {
      ++since_state_backup_;
      const auto limit = ctx_.config.microbatch_items;
      if ((limit > 0 && since_state_backup_ >= limit) ||
          ((since_state_backup_ & 63) == 0 && Clock::now() - batch_started_ >= ctx_.config.microbatch_interval)) {
        end_microbatch();
      }
      return;
    }
  }
}

// Microbatch mode: the batch boundary. The state is checkpointed (synchronously: the batch is committed once the
// store has it; every item of it is already in the item log), then the batch's outputs are released to the
// network. A failure restores the last boundary and recomputes the batch from the log, with the same output
// sequence numbers, so receivers never see an output twice.
void Worker::end_microbatch() {
  bool held = false;
  for (const auto& o : outs_) held = held || o.released < o.out_seq;
  if (since_state_backup_ > 0 || held) {
    backup_state(true);
    for (auto& o : outs_) o.released = o.out_seq;
  }
  batch_started_ = Clock::now();
}

// Microbatch mode: a batch also closes when the worker has run out of input and its interval has passed, and at once
// when it holds outputs and cannot go on until they are out: they fill the window (they count against it), or its
// operator waits for feedback they lead to (Operator::ready). A ps-worker waiting for parameters has input queued:
// its batch, holding the gradients the servers answer with parameters, never closed, and the job stalled.
void Worker::end_microbatch_if_due() {
  if (!microbatch_mode() || source_) return;
  const bool idle = queue_.empty() && staging_.empty();
  bool held = false;
  for (const auto& o : outs_) held = held || o.released < o.out_seq;
  if ((idle && Clock::now() - batch_started_ >= ctx_.config.microbatch_interval) ||
      (held && (unacked_total() >= window() || (op_waits_ && !op_->ready())))) {
    end_microbatch();
  }
}

// Ask mode (backtrack recovery): the state, whole (a delta, never a partial one), with the input positions it
// reflects and the outputs no receiver's checkpoint covers yet, written asynchronously. Once the store confirms
// it, its positions are reported upstream (update_coverage, send_due_acks) and the senders let those items go.
void Worker::checkpoint() {
  backup_state(false);
  last_checkpoint_at_ = Clock::now();
  // Ack mode: the acknowledgements of the items this backup reflects go out once the store has it, so an effect
  // is never acknowledged before it is safe (Storm's stateful bolts do the same).
  if (ack_mode() && !tree_acks_.empty()) {
    deferred_tree_acks_.emplace_back(last_state_ticket_, std::move(tree_acks_));
    tree_acks_.clear();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Ack mode (Storm style, DESIGN 6): a source item roots a tree; every edge (an item on a channel) has a 64-bit id;
// the source, the acker of its trees, XORs in the ids of the edges its item went out on, and each worker that
// processes an item sends it the XOR of that item's edge id and the ids of the edges it emitted (anchored to it).
// A tree whose XOR is 0 is complete; one not complete after ft.ack-timeout is replayed from the source under a new
// root: at least once. A worker acknowledges an item only once a state backup that reflects it is confirmed.
std::uint64_t Worker::new_root() {
  constexpr std::uint64_t kCounterBits = 40;
  return (static_cast<std::uint64_t>(id_) << 48) | (static_cast<std::uint64_t>(epoch_ & 0xff) << kCounterBits) |
         (++next_root_ & ((std::uint64_t{1} << kCounterBits) - 1));
}

void Worker::register_tree(std::uint64_t root, std::uint64_t offset, Clock::time_point deadline) {
  if (tree_xor_ == 0) return;  // it went nowhere: complete at once
  trees_[root] = Tree{tree_xor_, offset};
  tree_deadlines_.emplace_back(deadline, root);
}

void Worker::on_tree_acks(const std::vector<std::uint64_t>& pairs) {
  for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
    auto it = trees_.find(pairs[i]);
    if (it == trees_.end()) continue;  // complete, replayed under a new root, or another incarnation's
    it->second.xor_ ^= pairs[i + 1];
    if (it->second.xor_ == 0) {
      trees_.erase(it);
      ++trees_completed_;
    }
  }
}

void Worker::replay_expired_trees() {
  if (tree_deadlines_.empty()) return;
  const auto now = Clock::now();
  for (int n = 0; n < 1024 && !tree_deadlines_.empty() && tree_deadlines_.front().first <= now; ++n) {
    const auto root = tree_deadlines_.front().second;
    tree_deadlines_.pop_front();
    auto it = trees_.find(root);
    if (it == trees_.end()) continue;  // completed in time
    const auto offset = it->second.offset;
    trees_.erase(it);
    current_root_ = new_root();
    tree_xor_ = 0;
    if (source_) {
      Item item;
      if (source_->read(offset, &item, 1) != 1) continue;
      emit(item.key, item.value, item.time);
      counters_.trees_replayed.fetch_add(1, std::memory_order_relaxed);
    } else {  // the outputs of finish(): emitted again, whole
      for (const auto& item : finish_items_) emit(item.key, item.value, item.time);
    }
    register_tree(current_root_, offset, now + ctx_.config.ack_timeout);
    current_root_ = 0;
  }
}

// Ack mode, end of stream: what finish() emits roots a tree of its own, tracked by this worker as a source tracks
// its items' trees (replayed whole on a timeout), and the end of stream goes out only once it is complete: a
// receiver that fails meanwhile gets the final results again.
void Worker::begin_finish_tree() {
  current_root_ = new_root();
  tree_xor_ = 0;
  capture_finish_ = true;
  finish_items_.clear();
}

void Worker::end_finish_tree() {
  capture_finish_ = false;
  register_tree(current_root_, 0, Clock::now() + ctx_.config.ack_timeout);
  current_root_ = 0;
  finish_pending_ = true;
}

std::uint64_t Worker::ack_committed_offset() const {
  std::uint64_t lowest = source_offset_;
  for (const auto& [root, tree] : trees_) lowest = std::min(lowest, tree.offset);
  return lowest;
}

// Ack mode, sources: a restart produces again from the position their last backup recorded (ack_committed_offset),
// so that position is backed up as trees complete, not only every source_backup_every_ items produced: a source that
// had produced its whole stream (or was held by ft.ack-max-pending) never backed it up again, and a restart produced
// everything again from an old position, trees long complete included (word count: every word counted twice after
// one failure of the source at 90%). Every min(source_backup_every_, ack-max-pending / 2) completed trees, or 20 ms
// after the first completed one, so a restart replays about what was in flight.
void Worker::back_up_ack_position_if_due() {
  if (trees_completed_ == 0) return;
  const std::uint64_t step =
      std::min<std::uint64_t>(source_backup_every_, std::max<std::uint64_t>(1, ctx_.config.ack_max_pending / 2));
  const auto now = Clock::now();
  if (trees_completed_ < step && now - position_backed_up_at_ < std::chrono::milliseconds(20)) return;
  trees_completed_ = 0;
  if (ack_committed_offset() == backed_up_position_) return;  // the oldest incomplete tree has not moved
  backup_state(false);
}

// Ack mode: acknowledgements wait for a backup, so one is taken when the worker runs out of input and when the
// oldest waiting acknowledgement gets old (a quarter of the timeout), not only every ft.ack-state-every items.
void Worker::ack_checkpoint_if_due() {
  if (source_ || (since_state_backup_ == 0 && tree_acks_.empty())) return;
  if (stateless_op_) {  // no state: its items' effects are its outputs, anchored to their trees (Storm's plain bolts)
    deferred_tree_acks_.emplace_back(0, std::move(tree_acks_));  // ticket 0: confirmed already
    tree_acks_.clear();
    return;
  }
  const auto age = Clock::now() - last_checkpoint_at_;
  const bool idle = queue_.empty() && staging_.empty();
  if ((idle && age >= ctx_.config.ask_idle) || age >= ctx_.config.ack_timeout / 4) checkpoint();
}

// Ack mode: send the acknowledgements whose backup the store has confirmed, to the source of each tree. One that
// cannot go yet (its source not up, its socket not ready) is held for the next call.
void Worker::release_tree_acks() {
  if (deferred_tree_acks_.empty() && deferred_eos_acks_.empty() && held_tree_acks_.empty()) return;
  const auto done = writer_->confirmed();
  while (!deferred_eos_acks_.empty() && deferred_eos_acks_.front().ticket <= done) {
    const auto& e = deferred_eos_acks_.front();
    auto& in = ins_[e.slot];
    if (!send_ack(in, e.seq)) in.ack_due = std::max(in.ack_due, e.seq);
    deferred_eos_acks_.pop_front();
  }
  std::unordered_map<int, std::vector<std::uint64_t>> by_source = std::move(held_tree_acks_);
  held_tree_acks_.clear();
  while (!deferred_tree_acks_.empty() && deferred_tree_acks_.front().first <= done) {
    const auto& pairs = deferred_tree_acks_.front().second;
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
      auto& v = by_source[static_cast<int>(pairs[i] >> 48)];
      v.push_back(pairs[i]);
      v.push_back(pairs[i + 1]);
    }
    deferred_tree_acks_.pop_front();
  }
  for (auto& [source, pairs] : by_source) {
    // Not sent (the source not up in this process's directory yet, or its socket full or not connected): held for
    // the next release. Dropped, they were lost for good, and on worker processes a run's first trees then waited
    // out the ack timeout and were replayed (a join run in about four: 451-16,929 trees, 30 s, other results).
    // Acknowledgements of a restarted source's old trees are ignored by it (another incarnation's roots).
    bool sent = false;
    if (peer_ready(source) || peer_ready(source)) {
      auto frame = encoder_.encode_ack(static_cast<std::uint32_t>(id_), epoch_, 0, 0, 0, pairs);
      zmq::message_t m = net::outgoing(frame);
      sent = socket_to(source, true).send(m, zmq::send_flags::dontwait).has_value();
    }
    if (!sent) held_tree_acks_[source] = std::move(pairs);
  }
}

// Latency (metrics.h): every batch whose last item has now been processed, from the emission of its oldest item.
void Worker::record_latencies() {
  if (latency_marks_.empty()) return;
  const auto now = now_ns();
  while (!latency_marks_.empty() && ins_[latency_marks_.front().slot].processed >= latency_marks_.front().seq) {
    const double us = static_cast<double>(now - latency_marks_.front().emitted_ns) / 1000;
    counters_.latency[latency_bucket(us)].fetch_add(1, std::memory_order_relaxed);
    latency_marks_.pop_front();
  }
}

// Mode none and approx: a restarted worker whose sender has finished for good (its end of stream was acknowledged by
// the previous incarnation) would wait for it forever: nothing more comes on that channel, so it has ended. In approx
// only a sender that is not a source can (a source waits for its receivers' backups to cover its end, R-source): the
// receiver acknowledged the end of stream as it arrived and failed before a backup reflected it, and what it had
// received since its restored backup is lost, as the items of any failure (at most l unbacked). Heavy hitters with
// 100 failure points on 1,000 items: the sink waited for a finished sketch in about 1 run in 20 on threads
// (Cli.FailurePointsPassedTogetherEachKillAStartedIncarnation timed out once).
void Worker::end_inputs_of_finished_senders() {
  for (auto& in : ins_) {
    if (!in.ended && queue_.empty() && staging_.empty() && ctx_.directory->finished(in.from_worker)) {
      in.ended = true;
      in.processed = std::max(in.processed, in.received);
    }
  }
}

// Ask mode: a worker that has run out of input checkpoints what it processed since its last checkpoint (at most
// every ft.ask-idle), so that a sender waiting for coverage at its window is never stuck.
void Worker::checkpoint_if_idle() {
  if (!ask_mode() || source_ || since_state_backup_ == 0 || !queue_.empty() || !staging_.empty()) return;
  if (Clock::now() - last_checkpoint_at_ < ctx_.config.ask_idle) return;
  checkpoint();
}

// Ask mode, after a restart: ask each sender for its channel again from the first item the restored checkpoint
// does not reflect (DESIGN 6, ask). Repeated until the sender sends again (a control message can be dropped while
// its incarnation is not known on either side yet).
void Worker::send_asks() {
  const auto now = Clock::now();
  for (auto& in : ins_) {
    if (!in.ask_pending || now - in.asked_at < kQueryRetry) continue;
    if (!peer_ready(in.from_worker)) continue;
    in.asked_at = now;
    net::ControlMsg q{net::ControlKind::kAsk, static_cast<std::uint32_t>(id_), epoch_, in.received + 1,
                      static_cast<std::uint32_t>(in.id)};
    auto frame = encoder_.encode_control(static_cast<std::uint32_t>(id_), epoch_, q);
    zmq::message_t m = net::outgoing(frame);
    (void)socket_to(in.from_worker, true).send(m, zmq::send_flags::dontwait);
  }
}

void Worker::produce() {
  const std::size_t n = std::min<std::uint64_t>(ctx_.config.batch_items, source_size_ - source_offset_);
  static thread_local std::vector<Item> buf;
  buf.resize(n);
  const auto got = source_->read(source_offset_, buf.data(), n);
  if (ack_mode()) {  // each item roots a tree
    const auto deadline = Clock::now() + ctx_.config.ack_timeout;
    for (std::size_t i = 0; i < got; ++i) {
      current_root_ = new_root();
      tree_xor_ = 0;
      emit(buf[i].key, buf[i].value, buf[i].time);
      register_tree(current_root_, source_offset_ + i, deadline);
    }
    current_root_ = 0;
  } else {
    for (std::size_t i = 0; i < got; ++i) emit(buf[i].key, buf[i].value, buf[i].time);
  }
  if (awaiting_live_item_ && got > 0) on_live_item(false);
  const auto before = source_offset_;
  source_offset_ += got;
  // Ack mode: a restarted source produces again from the position before which every tree was complete; what it
  // produces again below its predecessor's high-water mark is replayed (at least once), as a timed-out tree is.
  if (ack_mode() && before < produced_high_) {
    counters_.trees_replayed.fetch_add(std::min(source_offset_, produced_high_) - before, std::memory_order_relaxed);
  }
  if (source_offset_ > produced_high_) {  // items produced again after a rewind or a restart count once
    counters_.items_in.fetch_add(source_offset_ - std::max(before, produced_high_), std::memory_order_relaxed);
    produced_high_ = source_offset_;
  }
  if (got < n) source_offset_ = source_size_;
  auto& progress = (*ctx_.source_progress)[id_];
  if (source_offset_ > progress.load(std::memory_order_relaxed)) progress.store(source_offset_);
  // A source's state is its offset: backing it up is cheap and never needs to wait (the items are replayable).
  if (ctx_.config.mode == FtMode::None || checkpoint_mode()) return;
  SourceMark mark{source_offset_, {}};
  for (const auto& o : outs_) mark.out_seqs.push_back(o.out_seq);
  source_marks_.push_back(std::move(mark));
  if (source_marks_.size() > kMaxSourceMarks) {  // receivers backing up rarely: keep every other position
    std::deque<SourceMark> kept;
    for (std::size_t i = 0; i < source_marks_.size(); i += 2) kept.push_back(std::move(source_marks_[i]));
    source_marks_ = std::move(kept);
  }
  since_state_backup_ += got;
  back_up_position_if_due();
}

// A source backs up its position every source_backup_every_ items it produces. A rewinding one (approximate mode)
// also does as soon as the position every receiver's backup covers has moved (an acknowledgement said one covers
// more, whether or not the source is producing: a source a window ahead of its receivers waits): a restart then
// produces again from close to where the receivers' restored states are, not from up to source_backup_every_ items
// plus a window before (a KDD-like learner dropped up to 12,000 duplicates after a failure of all workers).
void Worker::back_up_position_if_due() {
  if (since_state_backup_ < source_backup_every_) {
    if (!coverage_advanced_) return;
    coverage_advanced_ = false;
    advance_committed_mark();
    if (committed_mark_.offset == backed_up_position_) return;  // one channel's receiver alone moved: not the mark
  }
  backup_state(false);
}

Worker::OutChannel& Worker::out_for(std::uint64_t key) {
  return outs_[key_route_[key_partition(key, key_route_.size())]];
}

void Worker::emit(std::uint64_t key, std::int64_t value, std::int64_t time) {
  unchecked_items_ = 0;  // an item that emits is compared with theta at once (Operator::divergence_bounded_by_alpha)
  if (capture_finish_) finish_items_.push_back(Item{key, value, time, 0});
  if (outs_.empty()) return;
  auto push = [&](OutChannel& o) {
    if (dropped_after_end(o)) [[unlikely]]
      return;
    Item it{key, value, time, number_output(o)};
    if (it.seq == o.sent + 1) o.unsent_since_ns = now_ns();  // the oldest unsent item (latency)
    if (keeps_sent_items()) {
      o.unacked.push_back(it);
      ++unacked_;
    } else {
      o.pending.push_back(it);
      if (ack_mode()) {  // the item joins the tree of the one in process (anchored to it)
        o.pending_roots.push_back(current_root_);
        tree_xor_ ^= edge_id(o.id, it.seq);
      }
    }
  };
  if (single_key_route_) {
    const auto part = ctx_.topology->channels()[outs_[0].id].partition;
    if (part == Partition::Key) {
      push(out_for(key));
    } else {
      for (auto& o : outs_) push(o);  // forward (one channel) or broadcast
    }
  } else {
    // Several downstream stages: key-partition within each stage.
    std::unordered_map<int, std::vector<std::size_t>> by_stage;
    for (std::size_t i = 0; i < outs_.size(); ++i) {
      by_stage[ctx_.topology->workers()[outs_[i].to_worker].stage].push_back(i);
    }
    for (auto& [s, idx] : by_stage) {
      const auto part = ctx_.topology->channels()[outs_[idx[0]].id].partition;
      if (part == Partition::Key) {
        push(outs_[idx[key_partition(key, idx.size())]]);
      } else {
        for (auto i : idx) push(outs_[i]);
      }
    }
  }
  ++emitted_unpublished_;
}

// Emitter::broadcast: one item on every output channel.
void Worker::broadcast(std::uint64_t key, std::int64_t value, std::int64_t time) {
  unchecked_items_ = 0;  // as emit(): an item that emits is compared with theta at once
  for (auto& o : outs_) {
    if (dropped_after_end(o)) [[unlikely]]
      continue;
    Item it{key, value, time, number_output(o)};
    if (it.seq == o.sent + 1) o.unsent_since_ns = now_ns();
    if (keeps_sent_items()) {
      o.unacked.push_back(it);
      ++unacked_;
    } else {
      o.pending.push_back(it);
      if (ack_mode()) {
        o.pending_roots.push_back(current_root_);
        tree_xor_ ^= edge_id(o.id, it.seq);
      }
    }
    ++emitted_unpublished_;
  }
}

// Emitter::feed_back: what the operator fed back goes to every worker upstream of this one, on the sockets acks use,
// without sequence numbers, acks or backups (soft state: a frame to a peer that is down or full is dropped).
void Worker::send_feedback() {
  if (feedback_out_.empty()) return;
  constexpr std::size_t kFeedbackFrameItems = 8192;
  std::vector<int> sent_to;
  for (const auto& in : ins_) {
    if (std::find(sent_to.begin(), sent_to.end(), in.from_worker) != sent_to.end()) continue;
    sent_to.push_back(in.from_worker);
    // As send_ack: a peer just learned (first call false) can take it at once.
    if (!peer_ready(in.from_worker) && !peer_ready(in.from_worker)) continue;
    for (std::size_t from = 0; from < feedback_out_.size(); from += kFeedbackFrameItems) {
      const std::size_t n = std::min(kFeedbackFrameItems, feedback_out_.size() - from);
      auto frame = encoder_.encode_feedback(static_cast<std::uint32_t>(id_), epoch_, {feedback_out_.data() + from, n});
      zmq::message_t m = net::outgoing(frame);
      (void)socket_to(in.from_worker, true).send(m, zmq::send_flags::dontwait);
    }
  }
  feedback_out_.clear();
}

// Operator::on_blocked, at most every kBlockedCallEvery while the operator is not ready.
void Worker::call_on_blocked() {
  constexpr auto kBlockedCallEvery = std::chrono::milliseconds(5);
  const auto now = Clock::now();
  if (now - blocked_called_at_ < kBlockedCallEvery) return;
  blocked_called_at_ = now;
  op_->on_blocked(*emitter_);
}

// ---------------------------------------------------------------------------------------------------------------
bool Worker::peer_ready(int worker) {
  const auto peer = ctx_.directory->state(worker);
  if (!peer.up) return false;
  // A peer that came up since the last look: learn its incarnation now (which resets what to resend to it) and
  // let the caller come back, so nothing is sent on the strength of the old state.
  if (peer.epoch != known_epoch_[worker]) {
    refresh_peers();
    return false;
  }
  if (checkpoint_mode() && unverified_peers_.count(worker)) {  // restarted: in this worker's round? (check_round)
    verify_peers();
    return !unverified_peers_.count(worker);
  }
  return true;
}

bool Worker::send_batch(OutChannel& o, std::uint64_t first_seq, std::span<const Item> items, bool eos,
                        std::span<const std::uint64_t> roots) {
  if (!peer_ready(o.to_worker)) return false;
  auto frame = encoder_.encode_batch(static_cast<std::uint32_t>(id_), epoch_, static_cast<std::uint32_t>(o.id),
                                     first_seq, items, eos, roots, o.unsent_since_ns);
  zmq::message_t m = net::outgoing(frame);
  return socket_to(o.to_worker, false).send(m, zmq::send_flags::dontwait).has_value();
}

void Worker::flush(bool force) {
  const std::size_t batch = batch_;
  if (unacked_total() >= window()) force = true;
  for (auto& o : outs_) {
    if (checkpoint_mode() && !send_notices(o)) continue;  // no item goes ahead of a barrier notice
    if (!keeps_sent_items()) {
      const std::uint64_t rewinds = rewinds_;
      std::size_t from = o.pending_head;
      // A rewinding source resends from the position every receiver covers; what this channel's receiver already
      // holds is not sent again (it would drop it: heavy hitters after a failure of all workers sent the sketch of
      // the hot keys ~170,000 items it held, from the position of the other sketch's backups).
      while (from < o.pending.size() && o.pending[from].seq <= o.receiver_holds) ++from;
      if (from > o.pending_head) o.acked = std::max(o.acked, o.pending[from - 1].seq);
      while (o.pending.size() - from >= batch || (force && from < o.pending.size())) {
        const std::size_t n = std::min(batch, o.pending.size() - from);
        // net.in-flight-max: a rewinding source sends a channel at most that far ahead of its acknowledgements. What
        // is in flight is what a failure makes it produce and send again, and the receiver's queue (latency). The
        // other channels go on meanwhile, up to the window of unsent items (unacked_total). (A receiver's ack may
        // be ahead of a rewound source's next item: nothing is in flight then.)
        if (resends_by_rewind_ && ctx_.config.in_flight_max > 0) {
          const std::uint64_t before = o.pending[from].seq - 1;
          if (before > o.acked && before - o.acked >= ctx_.config.in_flight_max) break;
        }
        if (const auto peer = ctx_.directory->state(o.to_worker); !peer.up) {
          // Mode none: items for a worker that has crashed are lost (a rewinding source produces them again once it
          // learns of the restart); before its first start they wait.
          if (peer.crashed()) from = o.pending.size();
          break;
        }
        const std::span<const std::uint64_t> roots =
            o.pending_roots.empty() ? std::span<const std::uint64_t>() : std::span(o.pending_roots.data() + from, n);
        if (!send_batch(o, o.pending[from].seq, {o.pending.data() + from, n}, false, roots)) {
          // Its peer_ready may have learned a restart and rewound this source: the pending items (and `from` into
          // them) are gone, every channel starts again from the committed position. (A stale `from` past the cleared
          // items made the erase below corrupt the heap, FtBoundsProperty.TotalLoss under AddressSanitizer.)
          if (rewinds_ != rewinds) from = o.pending_head;
          break;
        }
        from += n;
      }
      if (from > o.pending_head) o.sent = o.pending[from - 1].seq;
      o.pending_head = from;
      if (o.pending_head == o.pending.size()) {
        o.pending.clear();
        o.pending_roots.clear();
        o.pending_head = 0;
      } else if (o.pending_head >= o.pending.size() / 2) {  // each item is shifted at most once, on average
        const auto head = static_cast<std::ptrdiff_t>(o.pending_head);
        o.pending.erase(o.pending.begin(), o.pending.begin() + head);
        if (!o.pending_roots.empty()) o.pending_roots.erase(o.pending_roots.begin(), o.pending_roots.begin() + head);
        o.pending_head = 0;
      }
    } else {
      // Send the unacknowledged items not sent yet, in batches (microbatch: only the released ones).
      const std::uint64_t upto = microbatch_mode() && !source_ ? o.released : o.out_seq;
      while (o.sent < upto) {
        const std::uint64_t first = o.sent + 1;
        const std::size_t offset = static_cast<std::size_t>(first - o.unacked.front().seq);
        const std::size_t avail = static_cast<std::size_t>(upto - o.sent);
        if (avail < batch && !force && !(checkpoint_mode() && barrier_due(o))) break;
        // Straight from the ring (a batch that would wrap around its end goes as two).
        const auto items = o.unacked.contiguous(offset, std::min(batch, avail));
        if (!send_batch(o, first, items, false)) break;
        o.sent += items.size();
      }
    }
    // End of stream once everything before it was sent.
    if (o.eos_seq && o.sent == o.eos_seq - 1 && (keeps_sent_items() ? o.sent >= o.out_seq : o.unsent() == 0)) {
      if (send_batch(o, o.eos_seq, {}, true)) o.sent = o.eos_seq;
    }
  }
  counters_.unacked.store(unacked_total(), std::memory_order_relaxed);
  if (emitted_unpublished_ > 0) {
    counters_.items_out.fetch_add(emitted_unpublished_, std::memory_order_relaxed);
    emitted_unpublished_ = 0;
  }
}

// Whether an output on o is dropped: its end of stream has gone out (the operator emitted after finish(): from
// on_feedback, or processing a restarted sender's items): dropped and counted. The end of stream promised the receiver
// nothing more, and it may have finished: before, it acknowledged such an output on receipt and finished without
// processing it.
bool Worker::dropped_after_end(const OutChannel& o) {
  if (o.eos_seq == 0 || o.sent < o.eos_seq) return false;
  counters_.outputs_after_end.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The next output's number on o. An end of stream numbered but not sent yet (finish() ran, and the operator emits
// more: items it processes after finish(), such as a restarted sender's) moves after it. Left where it was, the
// output took its number, the receiver dropped the end of stream as a duplicate of it and acknowledged it, this
// worker finished for good, and the receiver waited for the end of stream forever (the ps job's sink after a failure
// of every worker at the end of an SSP run, about 1 run in 50).
std::uint64_t Worker::number_output(OutChannel& o) {
  const std::uint64_t seq = ++o.out_seq;
  if (o.eos_seq != 0 && seq >= o.eos_seq) o.eos_seq = seq + 1;  // not sent yet: emit drops outputs after a sent one
  return seq;
}

void Worker::finish_outputs() {
  for (auto& o : outs_) {
    o.eos_seq = o.out_seq + 1;
  }
}

// A source is done only once every channel's receiver has reported its whole stream, end of stream included, as
// covered by a confirmed backup or its confirmed item log (R-source): a receiver that fails later restores
// everything. Mode none has no coverage (nothing is backed up): acknowledged is enough.
bool Worker::all_covered() const {
  if (checkpoint_mode()) return final_checkpoint_complete();  // every worker's record of its end is confirmed
  if (!source_ || !acks_enabled()) return true;
  for (const auto& o : outs_) {
    if (o.covered < o.eos_seq) return false;
  }
  return true;
}

// End of stream on every input (approximate mode): one state backup, whole (no residual), reflecting every item
// and the end of stream, so that the covered numbers the receiver reports reach its senders' end of stream and a
// source upstream may finish (all_covered). Taken before finish() (a recovery from it runs finish() again, as the
// restored inputs are ended). Not needed when every input is already covered up to its end (restored from such a
// backup), when no input comes from a source (no sender waits for coverage), or when every admitted item is logged
// (the log covers them: send_ack).
void Worker::backup_at_end_of_stream() {
  if (ack_mode()) {  // the last acknowledgements wait for a backup like the others
    if (since_state_backup_ > 0 || !tree_acks_.empty()) checkpoint();
    return;
  }
  if (microbatch_mode()) {  // the last batch ends with the stream
    end_microbatch();
    return;
  }
  if (ask_mode()) {  // every sender waits for a checkpoint that covers its end of stream
    if (std::any_of(ins_.begin(), ins_.end(), [](const InChannel& in) { return in.covered < in.processed; })) {
      checkpoint();
    }
    return;
  }
  if (ctx_.config.mode != FtMode::Approx || writes_item_log()) return;
  if (std::none_of(ins_.begin(), ins_.end(),
                   [](const InChannel& in) { return in.from_source && in.covered < in.processed; })) {
    return;
  }
  if (pending_state_ticket_) writer_->wait(pending_state_ticket_);  // at most one pending (R-state)
  backup_state(false);
  pending_state_ticket_ = last_state_ticket_;
  pending_divergence_ = 0;
}

bool Worker::all_acked() const {
  for (const auto& o : outs_) {
    if (o.acked < o.eos_seq) return false;
  }
  return true;
}

// Items sent and not acknowledged; in mode none (no acks) the items not sent yet, which pile up when a receiver's
// socket is full: the same window then bounds them, so a fast producer waits instead of growing its queue without
// limit (and spending its time shifting it).
std::uint64_t Worker::unacked_total() const {
  if (keeps_sent_items()) return unacked_;
  std::uint64_t n = 0;
  for (const auto& o : outs_) n += o.unsent();
  return n;
}

// DESIGN 3, Gamma: a sender blocks at gamma unacknowledged items. Sources (replayable) and exact mode only need
// flow control; gamma = 0 means the unacknowledged items travel in the state backups instead.
std::uint64_t Worker::window() const {
  if (ctx_.config.mode != FtMode::Approx || source_) return ctx_.config.flow_window;
  const auto g = schedule_.current().gamma;
  return g == 0 ? ctx_.config.flow_window : g;
}

// ---------------------------------------------------------------------------------------------------------------
void Worker::backup_items() {
  std::vector<ChannelItem> items(queue_.end() - static_cast<std::ptrdiff_t>(unbacked_), queue_.end());
  std::vector<ItemRecordInfo> infos;
  std::size_t last = 0;  // the entry of the previous item's channel (items come in runs of one channel: batches)
  for (const auto& ci : items) {
    if (last < infos.size() && infos[last].channel == ci.channel) {
      infos[last].last_seq = ci.item.seq;
      continue;
    }
    auto it = std::find_if(infos.begin(), infos.end(), [&](const auto& i) { return i.channel == ci.channel; });
    if (it == infos.end()) {
      infos.push_back({ci.channel, ci.item.seq, ci.item.seq});
      last = infos.size() - 1;
    } else {
      it->last_seq = ci.item.seq;
      last = static_cast<std::size_t>(it - infos.begin());
    }
  }
  unbacked_ = 0;
  auto* store = ctx_.store;
  auto& counters = counters_;
  const int id = id_;
  writer_->submit([store, &counters, id, items = std::move(items), infos = std::move(infos)]() mutable {
    auto rec = encode_items(items);
    counters.backup_bytes.fetch_add(rec.size(), std::memory_order_relaxed);
    counters.item_backups.fetch_add(1, std::memory_order_relaxed);
    store->put_items(id, std::move(rec), std::move(infos));
  });
}

// The operator's state into rec.snapshot, sealed in place (the payload is not copied): whole (with the operator's
// spec, so a store can rebuild it), a partial delta (residual > 0) or a whole delta; the state counts as backed up.
// Keeps the sizes that decide when the next full snapshot is due.
void Worker::capture_snapshot(StateRecord& rec, bool full, double residual) {
  ByteWriter w;
  // Reserved from the previous snapshot of the same kind: a large state (a learner's 2^18 weights, 2-3 MB) written
  // into a buffer that doubles as it grows is copied and page-faulted about twice over, on the compute thread.
  const std::uint64_t hint = full ? last_full_bytes_ : last_delta_bytes_ + last_delta_bytes_ / 4;
  w.buffer().reserve(std::max<std::uint64_t>(kSnapshotHeaderSize, hint));
  w.buffer().resize(kSnapshotHeaderSize);
  if (full) {
    op_->snapshot_full(w);
    op_->mark_backed_up();
    rec.op_spec = op_spec_;
  } else if (residual > 0) {
    rec.residual = op_->backup_partial_delta(w, residual);
  } else {
    op_->backup_delta(w);
  }
  rec.snapshot = w.take();
  seal_snapshot_in_place(rec.snapshot, op_type_, full ? SnapshotKind::Full : SnapshotKind::Delta);
  count_chain_bytes(full, rec.snapshot.size());
}

// The sizes the next backup's choice (full or delta) and its buffer are decided from, for a sealed snapshot of
// `bytes` written to, or restored from, the chain.
void Worker::count_chain_bytes(bool full, std::size_t bytes) {
  if (full) {
    last_full_bytes_ = bytes;
    delta_bytes_since_full_ = 0;
  } else {
    delta_bytes_since_full_ += bytes;
    last_delta_bytes_ = bytes;
  }
}

void Worker::backup_state(bool wait, double residual) {
  const bool adaptive = replay_interval_max_ > 0;
  const auto started = adaptive ? Clock::now() : Clock::time_point{};
  const std::int64_t started_cpu = adaptive ? thread_cpu_ns() : 0;
  const std::uint64_t items = since_state_backup_;
  backup_state_now(wait, residual);
  if (adaptive) adapt_replay_interval(started, thread_cpu_ns() - started_cpu, items);
}

// What the backup thread has spent writing state backups so far: CPU time, or for a remote store the round trips'
// wall time (metrics.h, state_backup_wall_ns: most of a remote write's CPU is spent by both processes' ZeroMQ I/O
// threads and the server, out of this thread's measure).
std::uint64_t Worker::backup_task_ns() const {
  return (ctx_.store != nullptr && ctx_.store->remote() ? counters_.state_backup_wall_ns : counters_.state_backup_ns)
      .load(std::memory_order_relaxed);
}

// ft.replay-overhead-max: after each state backup, the interval to the next forced one is chosen so that backing up
// costs at most that share of the compute thread's time: interval = cost of a backup / (share * cost of an item),
// both smoothed. A backup's cost: the compute thread's CPU time in backup_state (capture, and the write when it is
// done there) plus the backup thread's writing it (counted when it is done: usually the previous backup's), which
// is CPU time for an in-process store (wall time made the cost jump whenever the scheduler interrupted a backup: a
// loaded machine then backed up several times less often than asked) and the round trip's wall time for a remote
// one (backup_task_ns). A write on the compute thread counts its CPU time only (for a remote store, not the round
// trip). An item's cost is the compute thread's wall time between backups over the items processed (waiting for
// input included: idle time is cheap to spend on backups). Results do not depend on it: behind replayable sources
// a recovery loses nothing whatever the interval (Proposition S); only the work it repeats does.
void Worker::adapt_replay_interval(Clock::time_point started, std::int64_t cpu_ns, std::uint64_t items) {
  const auto ended = Clock::now();
  const std::uint64_t task_ns = backup_task_ns();
  const double cost = static_cast<double>(cpu_ns) + static_cast<double>(task_ns - backup_task_ns_seen_);
  backup_task_ns_seen_ = task_ns;
  if (last_backup_end_ != Clock::time_point{} && items > 0) {
    const double per_item =
        std::chrono::duration<double, std::nano>(started - last_backup_end_).count() / static_cast<double>(items);
    item_cost_ns_ = item_cost_ns_ > 0 ? item_cost_ns_ + kCostSmoothing * (per_item - item_cost_ns_) : per_item;
  }
  backup_cost_ns_ = backup_cost_ns_ > 0 ? backup_cost_ns_ + kCostSmoothing * (cost - backup_cost_ns_) : cost;
  last_backup_end_ = ended;
  if (item_cost_ns_ > 0) {
    const double n = backup_cost_ns_ / (replay_overhead_max_ * item_cost_ns_);
    replay_items_max_ = n >= static_cast<double>(replay_interval_max_)
                            ? replay_interval_max_
                            : std::max(replay_interval_min_, static_cast<std::uint64_t>(n));
    replay_limit_ = replay_items_max_;
  }
}

void Worker::backup_state_now(bool wait, double residual) {
  StateRecord rec;
  // Compaction: a full snapshot starts the chain, then deltas, until the deltas since it weigh four times as much
  // (so a restore reads at most about five times the state) or there are ft.full-backup-every of them. The store's
  // replies say how long its chain really is: a store that compacts in the background keeps it below that.
  {
    std::lock_guard lock(chain_seen_.mu);
    // Only a reply to the latest put describes the chain as it is (earlier ones may predate a full snapshot).
    if (chain_seen_.fresh && chain_seen_.put == state_puts_ && chain_length_ > 0) {
      chain_length_ = chain_seen_.info.length;
      last_full_bytes_ = chain_seen_.info.full_bytes;
      delta_bytes_since_full_ = chain_seen_.info.delta_bytes;
    }
    chain_seen_.fresh = false;
  }
  bool full = !op_ || chain_length_ == 0 || delta_bytes_since_full_ >= 4 * last_full_bytes_ ||
              chain_length_ >= static_cast<std::uint64_t>(ctx_.config.full_backup_every);
  if (op_) {
    capture_snapshot(rec, full, residual);
    chain_length_ = full ? 1 : chain_length_ + 1;
  }
  rec.full = full;
  for (const auto& in : ins_) rec.inputs[static_cast<std::uint32_t>(in.id)] = in.processed;
  for (const auto& in : ins_) {
    if (in.ended && in.processed >= in.received) rec.ended_inputs.push_back(static_cast<std::uint32_t>(in.id));
  }
  for (const auto& o : outs_) rec.outputs[static_cast<std::uint32_t>(o.id)] = o.out_seq;
  rec.source_offset = source_offset_;
  rec.missing_by_failure = missing_by_failure_;
  if (!rec.missing_by_failure.empty() && gaps_unknown_ > 0) rec.missing_by_failure.back() = current_missing();
  rec.residual_by_failure = residual_by_failure_;
  const double left = rec.residual;
  if (source_ && ack_mode()) {
    // Ack mode: the position before which every tree is complete (a restart produces again from there: at least
    // once).
    rec.source_offset = ack_committed_offset();
    backed_up_position_ = rec.source_offset;
    position_backed_up_at_ = Clock::now();
  } else if (source_) {
    // A source backs up the position up to which every channel has acknowledged its items: what it replays from
    // there is identical, and receivers drop what they already hold (nothing unacknowledged is lost).
    advance_committed_mark();
    rec.source_offset = committed_mark_.offset;
    backed_up_position_ = committed_mark_.offset;
    if (resends_by_rewind_) {
      for (const auto& o : outs_) rec.covered_outputs[static_cast<std::uint32_t>(o.id)] = o.covered;
    }
    for (std::size_t i = 0; i < outs_.size(); ++i) {
      rec.outputs[static_cast<std::uint32_t>(outs_[i].id)] =
          committed_mark_.out_seqs.empty() ? 0 : committed_mark_.out_seqs[i];
    }
  }
  // Ask mode too: a recovered worker regenerates only the outputs of the inputs after its checkpoint, so the ones
  // before it that no receiver has covered yet travel in the checkpoint.
  const bool keep_outputs = !source_ && (ctx_.config.mode == FtMode::Exact || ask_mode() || microbatch_mode() ||
                                         schedule_.current().gamma == 0);
  if (keep_outputs) {
    for (const auto& o : outs_) {
      for (const auto& it : o.unacked) rec.unacked_outputs.push_back({static_cast<std::uint32_t>(o.id), false, it});
    }
  }
  since_state_backup_ = 0;
  coverage_advanced_ = false;
  const std::size_t snapshot_bytes = rec.snapshot.size();
  auto* store = ctx_.store;
  auto& counters = counters_;
  const int id = id_;
  const std::uint64_t put = ++state_puts_;
  auto task = [store, &counters, &seen = chain_seen_, id, put, rec = std::move(rec),
               compute_thread = std::this_thread::get_id()]() {
    // Written inline, the write is already in backup_state's CPU time; the thread's CPU clock is a system call
    // (about 0.5 us here, a tenth of one of Count-Min's inline backups), so it is read only on the backup thread.
    const bool on_backup_thread = std::this_thread::get_id() != compute_thread;
    const std::int64_t started = on_backup_thread ? thread_cpu_ns() : 0;
    const std::int64_t started_wall = on_backup_thread && store->remote() ? now_ns() : 0;
    auto bytes = rec.encode();
    counters.backup_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
    counters.state_backups.fetch_add(1, std::memory_order_relaxed);
    // The record's input positions are what this state covers (the store drops the item records they cover).
    const ChainInfo info = store->put_state(id, rec.full, std::move(bytes), rec.inputs);
    if (on_backup_thread) {
      counters.state_backup_ns.fetch_add(static_cast<std::uint64_t>(thread_cpu_ns() - started),
                                         std::memory_order_relaxed);
      if (started_wall != 0) {
        counters.state_backup_wall_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - started_wall),
                                                std::memory_order_relaxed);
      }
    }
    std::lock_guard lock(seen.mu);
    seen.info = info;
    seen.put = put;
    seen.fresh = true;
  };
  // A small backup into an in-process store is written here when the backup thread has nothing in hand: waking it
  // for each of Count-Min's ~21,800 deltas of 2.5 KB (3e7 items) cost more than the writes (context switches,
  // migrations; README, "The work each mode adds"). Larger ones go to the backup thread, which writes them on the
  // other core: Space-Saving's 27 KB deltas written here cost its busy compute thread 5.7% more CPU time.
  constexpr std::size_t kInlineBackupBytes = 8 * 1024;
  const bool small_and_local = store && !store->remote() && snapshot_bytes <= kInlineBackupBytes;
  last_state_ticket_ = wait              ? writer_->submit_and_wait(std::move(task))
                       : small_and_local ? writer_->submit_inline_if_idle(std::move(task))
                                         : writer_->submit(std::move(task));
  counters_.divergence.store(left, std::memory_order_relaxed);
  if (wait) {
    for (auto& in : ins_) in.covered = std::max(in.covered, in.processed);
  } else if (!ins_.empty()) {
    std::vector<std::uint64_t> processed;
    processed.reserve(ins_.size());
    for (const auto& in : ins_) processed.push_back(in.processed);
    coverage_pending_.emplace_back(last_state_ticket_, std::move(processed));
  }
}

// A source position is committed once every channel's receiver has covered the items before it by a confirmed
// backup: replaying from there loses nothing, whatever fails (DESIGN 5; proofs/general-bounds.md, R-source).
void Worker::advance_committed_mark() {
  while (!source_marks_.empty()) {
    const auto& m = source_marks_.front();
    bool covered = true;
    for (std::size_t i = 0; i < outs_.size(); ++i) covered = covered && outs_[i].covered >= m.out_seqs[i];
    if (!covered) break;
    committed_mark_ = m;
    source_marks_.pop_front();
  }
}

// Produce again from the committed position, with the same sequence numbers: receivers that hold an item drop it,
// a restarted one gets everything after its restored state.
void Worker::rewind_source() {
  ++rewinds_;
  advance_committed_mark();
  source_offset_ = committed_mark_.offset;
  for (std::size_t i = 0; i < outs_.size(); ++i) {
    auto& o = outs_[i];
    o.out_seq = committed_mark_.out_seqs.empty() ? 0 : committed_mark_.out_seqs[i];
    o.acked = o.sent = o.out_seq;
    o.eos_seq = 0;
    o.unacked.clear();
    o.pending.clear();
    o.pending_roots.clear();
    o.pending_head = 0;
  }
  unacked_ = 0;  // a source's outputs all start again from here
  source_marks_.clear();
  inputs_done_ = false;
}

// ---------------------------------------------------------------------------------------------------------------
// A worker process's progress page (progress_page.h): its input positions and what a failure now would lose.
void Worker::publish_progress() {
  if (!progress_page_) return;
  for (std::size_t i = 0; i < ins_.size(); ++i) progress_page_->publish(i, ins_[i].processed);
  progress_page_->publish_losses(lost_items_now(), lost_outputs_now());
}

// Lost if the worker failed now: the items at the tail of the queue that no backup holds (an upper bound: some of
// their acks may still be queued behind a deferred one, in which case their senders still hold them). Behind
// replayable sources nothing acknowledged is lost: they send it again (Proposition S).
std::uint64_t Worker::lost_items_now() const {
  if (!op_) return 0;
  return ctx_.config.mode == FtMode::None || ack_mode() ? queue_.size() : inputs_replayable_ ? 0 : unbacked_;
}

// Lost if the worker failed now: the unacknowledged outputs, seqs (acked, out_seq], but for those of finish() (never
// lost: every recovery runs it again, and the window does not limit them; proofs/general-bounds.md, "What the tests
// measure").
std::uint64_t Worker::lost_outputs_now() const {
  std::uint64_t lost_out = 0;
  if (ctx_.config.mode == FtMode::Approx && !source_ && schedule_.current().gamma > 0) {
    for (const auto& o : outs_) {
      std::uint64_t n = o.unacked.size();
      if (o.finish_outputs) {
        const auto [first, last] = *o.finish_outputs;
        const std::uint64_t from = std::max(first, o.acked);
        if (last > from) n -= std::min<std::uint64_t>(n, last - from);
      }
      lost_out += n;
    }
  }
  return lost_out;
}

void Worker::on_crash() {
  crashed_ = true;
  auto& rec = crash_out_.record;
  crash_out_.killed_at = Clock::now();
  rec.worker = id_;
  rec.failure_count = failure_count_ + 1;
  rec.theta = schedule_.current().theta;
  rec.l = schedule_.current().l;
  rec.gamma = schedule_.current().gamma;
  if (op_) {
    // The alpha its rules went by (logs_every_item), looked at again only every few thousand items when it shrinks:
    // a learner's fresh alpha had fallen below theta while it still logged every example, and that failure read as
    // one under the Theta rule whose jump passed theta (LearnCli.AFailedLearnerJumpsBack..., 1 run in 12).
    rec.alpha = op_alpha_;
    rec.divergence_at_crash = ctx_.config.mode == FtMode::None ? -1 : op_->divergence();  // none: not tracked
    if (ctx_.config.measure_losses) {
      ByteWriter w;
      op_->snapshot_full(w);
      crash_out_.state_at_crash = seal_snapshot(op_type_, SnapshotKind::Full, w.buffer());
    }
    rec.lost_items = lost_items_now();
  }
  rec.lost_outputs = lost_outputs_now();
  for (const auto& in : ins_) crash_out_.processed[static_cast<std::uint32_t>(in.id)] = in.processed;
}

}  // namespace afs
