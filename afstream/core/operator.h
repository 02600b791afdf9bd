// The operator API (DESIGN sections 2-3): what a user implements to run an algorithm on afstream.
//
// An operator consumes items and emits items through an Emitter. Its state lives in tracked containers
// (afstream/state) or is managed by the operator itself; either way it exposes
//   - divergence(): the distance between the current state and the state at the last mark_backed_up(),
//     maintained incrementally (O(1) per update). The backup manager compares it with the runtime threshold theta.
//   - snapshot_full / snapshot_delta / restore_full / apply_delta: full and partial backups.
//   - alpha(): the most one item can add to divergence(); beta(): the most items one input item can emit.
//   - on_recovered(): an optional compensation hook after the k-th recovery (e.g. Theorem 2 for Count-Min).
//   - distance(): a brute-force distance to another instance's state in the same metric as divergence(); used by
//     the conformance kit (afstream/testing) and by tests measuring what a failure lost.
//   - feedback (parameter servers, ml/ps_operators.h): an operator may feed items back to the workers upstream of
//     it (Emitter::feed_back, received by their on_feedback), and may hold off its next data item (ready(),
//     on_blocked()). The channel is lossy soft state, like a heartbeat: see Emitter::feed_back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/item.h"

namespace afs {

class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual void emit(std::uint64_t key, std::int64_t value, std::int64_t time = 0) = 0;
  // One item on EVERY downstream channel of the next stage, whatever the partitioning (e.g. a clock tick that each
  // parameter-server shard must see). An ordinary data item on each channel: sequence numbers, acks and backups as
  // for emit(). The default (an emitter without channels) emits it once.
  virtual void broadcast(std::uint64_t key, std::int64_t value, std::int64_t time = 0) { emit(key, value, time); }
  // Feedback: an item sent upstream, at the next flush, to every worker with a channel into this one (their
  // Operator::on_feedback). Lossy by design (soft state, like a heartbeat): no sequence numbers, no acks, no
  // backups, never counted in L or Gamma; a frame that does not fit the peer's queue, or is sent to a peer that is
  // down, is dropped. Operators that use it must tolerate loss and repeat what matters (ml/ps_operators.h).
  virtual void feed_back(std::uint64_t /*key*/, std::int64_t /*value*/, std::int64_t /*time*/ = 0);
  // The input channel (Topology channel id) of the item being processed. With the item's seq it is the item's
  // identity, the one receivers dedupe by (DESIGN 2, 5 step 4): unique, and the same when a retry, a replay or a
  // restart delivers the item again. An exactly-once sink keys its external effects by it (algorithms/sinks).
  // The runtime sets it before each process(); emitters that do not know it (tests') say 0.
  virtual std::uint32_t input_channel() const { return 0; }
};

// What the runtime tells an operator after it has been restored and its backed-up items replayed.
struct RecoveryInfo {
  int failure_count = 0;  // k: this is the operator's k-th recovery (1-based)
  double theta = 0;       // runtime theta in force when the failure happened (Theta / 2^k for one copy)
  double l = 0;           // runtime l in force when the failure happened
  double alpha = 0;       // the operator's alpha
  // The thresholds in force at every failure j = 1..k of this worker (the last entries equal theta and l).
  // Compensation that must survive a crash during recovery keeps, in its state, how many failures it has
  // compensated, and adds the terms of the others.
  std::vector<double> theta_by_failure;
  std::vector<double> l_by_failure;
  // Measured, per failure j = 1..k: how many items of this worker's input streams the state lacks for good because
  // of failure j — sequence numbers after the backup it restored that were neither replayed from the item log nor
  // delivered again by their senders (replayable sources deliver everything again, so behind them it is 0). A
  // failure whose incarnations took no backup before the next one counts 0: the next measurement covers its items.
  // Absent where it could not be measured (a sender stayed silent). For any run of failures j in (done, k], the
  // sum of these counts bounds the items the recovered state lacks because of them; an operator whose state is a
  // sum of per-item contributions (Count-Min) lost at most that sum times alpha, and at most the sum of
  // theta_j + l_j * alpha (proofs/theorem2-count-min.md, "Measured loss").
  std::vector<std::optional<std::uint64_t>> missing_by_failure;
  // Per failure j = 1..k: the residual of the backup restored at it (backup_partial_delta's return value: the
  // restored state is within it of the state that reflected the restored input positions; 0 after a whole backup).
  // Loss of failure j <= residual_by_failure[j] + (items missing) * alpha, for a state that sums per-item
  // contributions (proofs/theorem2-count-min.md, Lemma CM2').
  std::vector<double> residual_by_failure;
  double state_loss_bound() const { return theta + l * alpha; }  // DESIGN 3: one failure loses at most this

  // For a state of integer sums of per-item contributions of at most `alpha_per_item` each (Count-Min counters,
  // Space-Saving counts): the most failures (done, k] can have taken from any sum, min(sum of floor(theta_j) +
  // l_j * alpha, sum of missing_j * alpha + floor(residual_j)), the second only when every missing_j was measured
  // (proofs/theorem2-count-min.md, Lemma CM2'; proofs/space-saving.md). 0 when done >= k.
  // The sum saturates at kLossBoundCap (a bound that large bounds nothing an int64 sum can lose); callers keep
  // their total compensation at most kLossBoundCap too, so that adding it to sums below 2^62 cannot overflow.
  std::int64_t integer_sum_loss_bound(std::size_t done, std::int64_t alpha_per_item) const;
  static constexpr std::int64_t kLossBoundCap = std::int64_t{1} << 62;
};

class Operator {
 public:
  virtual ~Operator() = default;

  // Consume one item; emit zero or more (at most beta()) items.
  virtual void process(const Item& item, Emitter& out) = 0;
  // All inputs have ended: emit final results. The end of stream follows them on every output channel; what an
  // operator emits after finish() (from on_feedback, on_blocked, or processing a restarted sender's items) still
  // goes before it while it waits to go out (its receiver is restarting), and is dropped, and counted
  // (WorkerCounters::outputs_after_end, the run's "outputs dropped"), once it has gone out.
  virtual void finish(Emitter& /*out*/) {}

  // The most the next item can add to divergence(). Constant, unless alpha_may_shrink().
  virtual double alpha() const = 0;
  virtual double beta() const = 0;
  // True for an operator with no state at all (StatelessOperator): the runtime then skips what protects a state (ack
  // mode's checkpoints, a relay's numbering after a recovery). Not inferred from alpha() == 0, which a stateful
  // operator may report (a parameter server whose step size is 0): its state is still backed up. Default false.
  virtual bool stateless() const { return false; }
  // True if alpha() may shrink as the state evolves (an SGD learner's step size decays: eta_t * clip). It never grows
  // except when restore_full / apply_delta take the state back; the runtime reads it again after every restore and
  // every few thousand items, so that a theta below the first alpha comes within the Theta rule's reach, and a
  // value it read earlier stays a valid bound.
  virtual bool alpha_may_shrink() const { return false; }

  // Distance from the state at the last mark_backed_up() (or construction). O(1), or what a pass over the state costs
  // once measure_divergence_at_backups() was called.
  virtual double divergence() const = 0;
  // The runtime will never back this operator up nor restore it (mode none): from now on it calls neither
  // divergence() nor snapshot_delta(), mark_backed_up(), backup_delta(), backup_partial_delta(), restore_full() or
  // apply_delta(). An operator may stop the bookkeeping that exists only for them (its tracked containers'
  // stop_tracking()), so that mode none costs nothing for backups (DESIGN 3). Called at most once, before the first
  // item. Default: nothing.
  virtual void stop_tracking() {}
  // The runtime will compare divergence() with theta only at its backups and recoveries, never after an item (behind
  // replayable sources with a remote store, where its cost rule paces the backups and a failure loses nothing
  // whatever the drift: Proposition S). An operator may then measure its divergence by a pass over its state when
  // asked instead of keeping it up to date at every update (count-min-hh: BlockTrackedArray::measure_at_backups).
  // divergence(), the deltas and partial deltas keep their contracts. Called at most once, before the first item,
  // never with stop_tracking(). Default: nothing.
  virtual void measure_divergence_at_backups() {}
  // True when a process() call that emits nothing never moves divergence() by more than alpha() (a tracked
  // container whose metric obeys the triangle inequality, fed at most alpha per item). The runtime then compares
  // divergence() with theta only once the items since the last comparison could have used up the room left:
  // floor((theta - d) / alpha) items after a comparison that found d, or at once after an item that emitted (so an
  // operator may still demand a backup with its output, as count-min-hh does with each report). An operator whose
  // divergence can jump otherwise (a sink that backs up every field at once) keeps the default, false: compared
  // after every item.
  virtual bool divergence_bounded_by_alpha() const { return false; }
  // Corollary P(3) of proofs/general-bounds.md: true if divergence() is a max-abs over the state and a key's results
  // depend only on the copy its key is routed to (the copies' states together are a concatenation). When the
  // stage's input is partitioned by key, the copies' divergences then combine by max, not by sum, and each copy
  // may use all of Theta (it starts at Theta / 2 instead of Theta / (2n); L and Gamma are still split n ways).
  // Default false: the split by n, right for any metric.
  virtual bool divergence_combines_by_max() const { return false; }
  // Serialize the whole state.
  virtual void snapshot_full(ByteWriter& out) const = 0;
  // Serialize what changed since the last mark_backed_up(); applying it to that state gives the current state.
  // Applying a delta twice in a row must equal applying it once (a put resent to a restarted backup server may be
  // stored twice; afstream/store/remote_store.h): a delta sets values rather than adding increments, or, if it is
  // a log of updates (space-saving-hh), names the state it follows and is skipped by the state it leads to.
  virtual void snapshot_delta(ByteWriter& out) const = 0;
  // The current state is now the backed-up state: divergence() becomes 0 and the delta empty.
  virtual void mark_backed_up() = 0;
  // A whole delta, as the runtime takes it: snapshot_delta(out), then mark_backed_up(). The default makes the two
  // calls; an operator may do both in one pass over what changed (sgd-learner: each changed weight is read once,
  // written to the delta and made its own backed-up value, instead of one scattered pass for each call). What it
  // writes must apply as snapshot_delta's would (the conformance kit's check (b) applies it).
  virtual void backup_delta(ByteWriter& out) {
    snapshot_delta(out);
    mark_backed_up();
  }
  // A partial backup (proofs/general-bounds.md §3.6): write a delta of only part of what changed, so that the
  // state the store holds after it is within `residual` of the current state in divergence()'s metric, and mark
  // that part backed up. divergence() then restarts from the value returned (at most `residual`; 0 if the delta
  // was whole) and keeps measuring the distance to what the store holds, so every bound stays as it is. The
  // runtime uses it in approximate mode, where a few fast-moving counters would otherwise drag thousands of
  // slow ones into every delta. The default writes a whole delta (backup_delta) and returns 0.
  virtual double backup_partial_delta(ByteWriter& out, double /*residual*/) {
    backup_delta(out);
    return 0;
  }
  // False for an operator whose apply_delta costs about as much as processing the delta's items again (a log of
  // updates: space-saving-hh). A backup server then does not compact its chain (that would replay every item a
  // second time, on the same cores), and the worker keeps the chain short by writing full snapshots itself, once the
  // deltas weigh four times one (afstream/ft/compactor.h).
  virtual bool store_compacts_deltas() const { return true; }
  // Replace the state by a full snapshot / apply a delta. Throws FormatError and leaves the state unchanged on bad
  // input. After either call the restored state counts as backed up.
  virtual void restore_full(ByteReader& in) = 0;
  virtual void apply_delta(ByteReader& in) = 0;

  virtual void on_recovered(const RecoveryInfo& /*info*/) {}

  // Feedback from the workers downstream of this one (Emitter::feed_back), on the compute thread, in arrival order;
  // may emit. Feedback is soft state: it may be lost, repeated (by the sender) or arrive after a restore.
  virtual void on_feedback(std::span<const Item> /*items*/, Emitter& /*out*/) {}
  // While false the worker takes no data item from its queue: it keeps receiving, acknowledging, handling feedback
  // and acks, and flushing (a worker whose operator is not ready sends what it emitted at once). End of stream is
  // not held: once the items before it are processed, an input's end-of-stream punctuation is taken even when not
  // ready, and finish() is called once every input ended, ready or not (an operator that waits for feedback must
  // not wait for it in finish()).
  virtual bool ready() const { return true; }
  // True for an operator whose ready() can ever be false: the runtime asks ready() (a virtual call per item) only
  // for those.
  virtual bool waits_for_feedback() const { return false; }
  // Called every few milliseconds (about 5 ms) while ready() is false, e.g. to send a lost request again.
  virtual void on_blocked(Emitter& /*out*/) {}
  // True if the outputs are a function of the input sequence alone, so that replaying logged inputs after a
  // recovery emits exactly the outputs the crashed incarnation emitted, with the same sequence numbers (receivers
  // drop the ones they hold). False for an operator whose outputs also depend on feedback or on timing (what
  // on_blocked emits): a recovered copy then numbers its outputs after what each receiver holds, and its receivers
  // must tolerate seeing again, as new items, effects they already have. Default: true unless it waits for
  // feedback.
  virtual bool replays_outputs_exactly() const { return !waits_for_feedback(); }

  // Brute-force distance between this state and other's, in divergence()'s metric (other has the same type).
  virtual double distance(const Operator& other) const = 0;
};

// An operator with no state (a filter, a map, a relay): nothing to back up or restore, divergence 0, alpha 0.
// It declares beta (default 1) and implements process().
class StatelessOperator : public Operator {
 public:
  double alpha() const override { return 0; }
  double beta() const override { return 1; }
  bool stateless() const final { return true; }
  double divergence() const override { return 0; }
  void snapshot_full(ByteWriter&) const override {}
  void snapshot_delta(ByteWriter&) const override {}
  void mark_backed_up() override {}
  // A snapshot of no state is empty: anything else is not one of ours.
  void restore_full(ByteReader& in) override { in.expect_end("stateless operator snapshot"); }
  void apply_delta(ByteReader& in) override { in.expect_end("stateless operator delta"); }
  double distance(const Operator&) const override { return 0; }
};

// A replayable source: the items at any offset can be produced again, so a source's state is only its offset.
class Source {
 public:
  virtual ~Source() = default;
  // Total items this source instance produces.
  virtual std::uint64_t size() const = 0;
  // Fill out with the items at [offset, offset + out.size()) of this instance's stream; returns how many were
  // written (fewer only at the end). Deterministic: the same offset always gives the same items.
  virtual std::size_t read(std::uint64_t offset, Item* out, std::size_t n) = 0;
};

}  // namespace afs
