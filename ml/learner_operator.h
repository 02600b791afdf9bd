// Online learning on afstream (issue 5, part 2): the `examples` source, the `sgd-learner` operator and the
// `model-merge` sink, written against the operator API over the engine-free core of ml/ (learner.h, dataset.h).
//
//   examples     a replayable source of example INDICES (key = value = time = the index); parallel instances read
//                disjoint, contiguous ranges of [begin, begin + items). Items are 32 bytes, too small for an example:
//                the operators fetch example n from their own copy of the dataset.
//   sgd-learner  predict, then learn (progressive validation) on each example it receives. Its weights live in an
//                afs::TrackedVector with the L2 metric (proofs/theorem1-sgd.md §6: divergence() is the L2 distance
//                of the weights from the last backup); the step counter t, the AdaGrad sums and the progressive
//                validation counters travel in the same backups. alpha = eta_t * clip for SGD (eta0 * clip for
//                AdaGrad): step t is clipped to L2 norm eta0 / sqrt(t) * clip (the gradient bound H of Theorem 1
//                times its step size), so no example moves the weights further, and alpha shrinks as the copy
//                learns. beta = 0 (it emits only in finish: its nonzero weights and counters).
//   model-merge  the sink: collects the models and counters of the parallel learner copies (data-parallel training
//                with model averaging) and averages them; the job evaluates the average on a held-out range.
//
// Datasets are named by parameters (data = higgs | kdd | logistic | linear | multiclass | file, see
// dataset_from()); a file is loaded once per process and shared by every worker of that process.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/dirty_slots.h"
#include "afstream/state/tracked_map.h"
#include "afstream/state/tracked_vector.h"
#include "ml/dataset.h"
#include "ml/learner.h"
#include "ml/readers.h"

namespace afs::ml {

// The dataset named by p (cached per process by its parameters, so every worker of a process shares one copy):
//   data = higgs | kdd (the presets of generators.h), logistic | linear | multiclass (SyntheticDataset with
//          features, noise, classes), or file (path `file`, `format` = csv | libsvm | vw | idx, `labels-file` for
//          idx; labels from `task`); examples (generators: total size, training + held-out), seed, hash-bits
//          (kdd and libsvm/vw hashing), on-error = fail | skip.
// Throws ConfigError naming a bad parameter, InputError / FormatError for an unreadable file.
std::shared_ptr<const Dataset> dataset_from(const Params& p);
// The same dataset (the same cached copy) with the counts of reading its file: lines, examples, lines skipped as
// malformed under on-error = skip and the first one's message (all zero for generated data).
struct LoadedDataset {
  std::shared_ptr<const Dataset> data;
  ReadStats stats;
};
LoadedDataset load_dataset(const Params& p);
// The learner configuration named by p (task, optimizer, eta0, l2, adagrad-init) for a dataset's shape.
LearnerConfig learner_config_from(const Params& p, const DatasetInfo& info);
// The true model of a generated dataset in the learner's layout, scaled to the learner's optimum for logistic data
// (true weights / noise); nullopt for files, sparse (hashed) data and drift.
std::optional<Eigen::VectorXd> true_model(const Params& p);
// What an error met while learning from example `index` of the dataset p names: "example 12 (of the file's
// examples, counted from 0) of data.csv", or "example 12" of generated data. A value the readers accept can still make
// a score overflow (1e308 times a weight of 2); without this the error named neither the example nor the file.
std::string example_context(const Params& p);
// What the learners say of an example whose step is not finite although its scores were (linear: a residual of
// 1e200 times a feature of 1e200).
inline constexpr const char* kNonFiniteStep =
    "example gives a non-finite step (its label and features, or they and the step size learn.eta0, multiply past "
    "the double range)";
[[noreturn]] void rethrow_for_example(const std::string& op, const std::string& context, std::uint64_t index,
                                      const InputError& e);
// The L2 norm of the values each(f) passes to f, without overflow: past the double range (values near 1e200) the sum
// of squares is infinite, and a clip by cap / norm would drop the whole step instead of shortening it (a file's line
// of 1e200 was not learned from at all). Each value is visited once, or three times when the squares overflow.
template <typename Each>
double l2_norm_of(Each&& each) {
  // (A step with an infinite entry has an infinite norm: no clip shortens it, and cap / inf = 0 times inf is NaN.
  // The learners refuse it with kNonFiniteStep, read off the norm they compute anyway rather than by a check of
  // every entry.)
  double sq = 0;
  each([&](double v) { sq += v * v; });
  if (std::isfinite(sq)) return std::sqrt(sq);
  double m = 0;
  each([&](double v) { m = std::max(m, std::abs(v)); });
  if (!std::isfinite(m)) return m;
  double r = 0;
  each([&](double v) { r += (v / m) * (v / m); });
  return m * std::sqrt(r);
}

// Replayable source of example indices [begin, begin + items), split evenly among the parallel instances.
class ExampleSource final : public Source {
 public:
  ExampleSource(const Params& p, const InstanceInfo& at);
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;

 private:
  std::uint64_t begin_ = 0, end_ = 0;
};

// Key layout of what a learner emits at finish: weights as (copy << 32 | weight index, bit_cast<int64>(weight));
// counters as (kMetaBit | copy << 32 | field, bit_cast<int64>(double value)).
inline constexpr std::uint64_t kMetaBit = std::uint64_t{1} << 63;
enum MetaField : std::uint32_t {
  kCount = 0,                           // examples learned (progressive validation count)
  kCorrect = 1,                         // of which predicted correctly before the update
  kLossSum = 2,                         // sum of the progressive losses
  kSteps = 3,                           // the optimizer's step counter t
  kRecords = 4,                         // number of progress records that follow
  kRecordBase = 16,                     // record r: fields kRecordBase + 3r + {0: count, 1: loss sum, 2: correct}
  kTraces = 5,                          // number of convergence-trace points that follow
  kTraceBase = std::uint32_t{1} << 20,  // point r: kTraceBase + 6r + {count, seconds, l1, loss, correct, norm}
};

// One progressive-validation point: the cumulative counters when the count reached a power of two.
struct ProgressRecord {
  double count = 0, loss_sum = 0, correct = 0;
  friend bool operator==(const ProgressRecord&, const ProgressRecord&) = default;
};

// One convergence-trace point of a learner copy (issue 5, item 4): taken when the copy's example count reaches a
// multiple of trace-every. l1 is ||w - w_prev||_1, the L1 norm of the model change since the previous trace point
// (the first one: since the all-zero start), the convergence measure of [J] (PAPER.md "Workloads"); seconds is the
// wall time since the job started (0 with trace-clock = off).
struct TracePoint {
  double count = 0, seconds = 0, l1 = 0, loss_sum = 0, correct = 0;
  double norm = 0;  // ||w||_1 at the point: l1 / norm is the relative change
  friend bool operator==(const TracePoint&, const TracePoint&) = default;
};

// The learner operator. Parameters: the dataset's (dataset_from), the learner's (learner_config_from), clip (H > 0,
// default 10), trace-every (examples of this copy between trace points, 0 = no trace; default 0), trace-clock (wall:
// seconds since trace-start-ns, a system_clock time in ns since the epoch that the job sets for all copies, default
// the operator's construction; off: 0, for deterministic states) and trace-start-ns.
// Snapshots: tag, version, t, counters, records, trace points, the trace's base norm (or that the next point sums it),
// then the weights' (and AdaGrad sums') TrackedVector payloads and the moved entries' values at the last trace point (a
// delta: those that first moved since the last backup; a weight-less one none, write_trace_bases); deltas carry the
// scalars whole and the vectors' deltas (set semantics: idempotent). The trace is state: after a restore the copy's
// trace is that of the restored iterate's history, so its items keep increasing.
class SgdLearnerOperator final : public Operator {
 public:
  SgdLearnerOperator(const Params& p, const InstanceInfo& at);

  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  // The most the next example moves the weights (L2): every step is clipped to the norm step_cap(t) of its step t
  // (proofs/theorem1-sgd.md §1). For SGD that is eta_t * clip, the gradient bound H times a step size that decays
  // as eta0 / sqrt(t), so alpha shrinks as the copy learns and a theta below eta0 * clip comes within reach (the
  // runtime then backs up by divergence instead of protecting every example).
  double alpha() const override { return step_cap(opt_.t + 1); }
  bool alpha_may_shrink() const override { return config_.optimizer == OptimizerKind::kSgd; }
  double beta() const override { return 0; }
  double divergence() const override { return weights_.divergence(); }
  bool divergence_bounded_by_alpha() const override { return true; }  // L2, steps clipped to alpha
  void stop_tracking() override;  // the weights and AdaGrad sums; the trace goes on (it is a measurement)
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void backup_delta(ByteWriter& out) override;  // one pass over the changed weights (TrackedVector::backup_delta)
  // While the weights are within `residual` of the store's (L2, divergence()), a backup that writes no weight: the
  // scalars only, the store's weights and trace entries staying where they are (SGD; else, or beyond the residual,
  // a whole delta). The learn job backs up every 4,096 examples to keep recoveries short, often below the trigger:
  // those within the residual cost no gather of scattered weights (experiments/results/learner-partial-delta).
  double backup_partial_delta(ByteWriter& out, double residual) override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;  // L2 distance of the weights

  const LearnerConfig& config() const { return config_; }
  TrackedVector::ConstView weights() const { return weights_.values(); }
  std::uint64_t steps() const { return opt_.t; }
  std::uint64_t count() const { return count_; }
  std::uint64_t correct_count() const { return correct_; }
  double loss_sum() const { return loss_sum_; }
  const std::vector<ProgressRecord>& records() const { return records_; }
  const std::vector<TracePoint>& trace() const { return trace_; }
  std::uint64_t trace_every() const { return trace_every_; }
  // Steps whose norm exceeded their cap (step_cap) and were scaled down (not part of the state; diagnostics).
  std::uint64_t clipped() const { return clipped_; }

 private:
  struct Scalars;  // the step counter, validation counters, progress records and trace of a snapshot
  static Scalars read_scalars(ByteReader& in);
  // Takes a snapshot's parts, all read and checked (restore_full and apply_delta are all or nothing).
  struct TraceBases;  // the moved entries' values at the last trace point, as read from a snapshot
  TraceBases read_trace_bases(ByteReader& in, bool delta);
  // again: the delta is the one the state was last restored from, applied a second time; its trace is the state's.
  void check_trace_kept(const TraceBases& trace, bool again) const;
  bool holds_delta(const Scalars& s, const TraceBases& trace) const;  // the state is what the delta leads to
  void adopt_trace(TraceBases& trace);
  void write_trace_bases(ByteWriter& out, std::size_t kept, bool delta) const;
  void adopt(Scalars&& s, TrackedVector::Delta&& weights, TrackedVector::Delta&& sum_sq, TraceBases&& trace,
             bool again = false);
  void write_scalars(ByteWriter& out) const;
  // The largest L2 norm of step t (t >= 1): eta0 / sqrt(t) * clip for SGD (make_step's step size), eta0 * clip for
  // AdaGrad (whose per-weight rates do not decay with t).
  double step_cap(std::uint64_t t) const;
  void clip_step();
  void take_trace_point();

  std::shared_ptr<const Dataset> data_;
  std::string context_;  // example_context(p)
  LearnerConfig config_;
  double clip_;
  std::uint32_t copy_;
  OptimizerState opt_;
  TrackedVector weights_;
  TrackedVector sum_sq_;  // AdaGrad sums (size 0 for SGD); mirrors opt_.sum_sq so that deltas carry it
  std::uint64_t count_ = 0, correct_ = 0;
  double loss_sum_ = 0;
  std::vector<ProgressRecord> records_;
  std::uint64_t trace_every_ = 0;
  bool trace_clock_ = true;
  std::int64_t trace_start_ns_ = 0;
  std::vector<TracePoint> trace_;
  // The weights at the last trace point (state: the next point's L1 change), kept as the entries that moved since
  // then with their values at that point (no slots without a trace). A point costs O(moved) instead of O(weights),
  // and a snapshot carries only those entries: a whole copy of the weights at the last point (2 MB for 2^18 weights)
  // was half of every KDD-like backup.
  DirtySlots<double> trace_moved_{0};
  std::size_t trace_backed_ = 0;  // how many of trace_moved_'s entries the last backup holds
  // ||w||_1 of the weights whose values the list holds (the last point's: the next point's norm is it plus the moved
  // entries' change). State, as is trace_norm_pending_: after a restore from a weight-less delta that started the
  // list again, the next point sums the weights' norm itself (once, not at each such delta of the chain).
  double trace_norm_ = 0;
  bool trace_norm_pending_ = false;
  // A trace point since the last backup with weights: a weight-less one then says the list starts again from the
  // weights as restored (backup_partial_delta). Not state, as trace_backed_.
  bool trace_restarted_ = false;
  // Backups taken (or, once restored from a chain, the last delta's number; 0 after a full snapshot's restore): a
  // delta carries the number of the backup it is, so that one applied a second time in a row (a put a restarted
  // backup server stored twice: Operator::snapshot_delta) keeps the trace as it is instead of taking the weights it
  // wrote for its derived entries' values. Not state (no full snapshot holds it), as trace_backed_.
  std::uint64_t backups_ = 0;
  // While the weights are tracked, a byte per entry of trace_moved_, in its order: 1 when its value at the last trace
  // point is its backed-up value (the delta that carries the entry derives it; write_trace_bases). Found when the
  // entry first moves, from the cache line its update is about to write: the backed-up value cannot change before
  // the next backup, the first to carry the entry. (Read at the backup instead, it cost a scattered pass over the
  // entries.) Entries restored from a backup have 0: no later delta carries them.
  std::vector<std::uint8_t> trace_derived_;
  // Scratch (not state).
  Example x_;
  SparseVector step_;
  std::vector<std::pair<std::uint32_t, double>> merged_;
  std::uint64_t clipped_ = 0;
};

// The sink. Parameters: parallelism (learner copies) and the dataset's and learner's (for the weight count). It holds
// the results, so no change may be lost: divergence +infinity while anything is unbacked, and alpha +infinity (one
// item can make it so). With theta below alpha the runtime protects it as upstream backup does (Worker::
// logs_every_item: every item logged before it is acknowledged, the state backed up every ft.exact-state-every
// items), instead of a synchronous state backup per item: the learners' 2 x 2^18 final weights cost 511,000 backups
// and 2.3 GB that way. beta 0.
class ModelMerge final : public Operator {
 public:
  explicit ModelMerge(const Params& p);
  void process(const Item& item, Emitter& out) override;
  double alpha() const override { return std::numeric_limits<double>::infinity(); }
  double beta() const override { return 0; }
  double divergence() const override;
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;

  const LearnerConfig& config() const { return config_; }
  int parallelism() const { return parallelism_; }
  // Copies that reported their counters.
  int copies_reported() const;
  // The average of the learned copies' weights (model averaging).
  Eigen::VectorXd averaged_model() const;
  // Totals over the copies: examples, correct predictions, loss sum.
  double total(MetaField f) const;
  // Progressive validation over the learned copies at the record points every one of them reached, then the final
  // totals: rows of (items, average loss, since-last loss, accuracy).
  struct ProgressRow {
    double items = 0, average_loss = 0, since_last_loss = 0, accuracy = 0;
  };
  std::vector<ProgressRow> progress() const;
  // The convergence trace: copy >= 0 gives that copy's points in order; copy = -1 the points every learned copy
  // reached, combined: count, loss sum and correct summed over the copies, seconds the latest copy's, l1 the mean of
  // the copies' L1 changes (an upper bound on the L1 change of the averaged model, by the triangle inequality) and
  // norm the mean of their ||w||_1.
  std::vector<TracePoint> trace(int copy) const;

 private:
  double field(int copy, std::uint32_t f) const;
  // The copies that reported learning from at least one example. One that saw none (more copies than training
  // examples) holds the initial model and no records or trace points: averaging it in shrank the model, and taking
  // its zero points emptied the combined progress records and trace.
  std::vector<int> learned_copies() const;

  int parallelism_;
  LearnerConfig config_;
  std::size_t weight_count_;
  TrackedVector weights_;                  // copy * weight_count + index
  TrackedMap<double> fields_{Metric::L1};  // copy << 32 | field -> value
};

void register_ml(Registry& registry);

}  // namespace afs::ml
