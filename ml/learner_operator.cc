// The online-learning operators: the examples source, the sgd-learner (weights in a TrackedVector) and the
// model-merge sink, plus the parameter-named datasets they share.
#include "ml/learner_operator.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "afstream/core/errors.h"
#include "ml/generators.h"
#include "ml/readers.h"

namespace afs::ml {

namespace {

constexpr std::uint32_t kLearnerTag = 0x4C524753;  // "SGRL"
// 2: the convergence trace; 4: the trace's moved entries, not its weights; 5: a delta carries only the entries that
// first moved since the last backup; 6: and not the values it can derive (write_trace_bases).
constexpr std::uint16_t kLearnerVersion = 8;  // 7: trace_norm_, and weight-less deltas' list restart; 8: delta numbers
// The trace tail's `kept` in a weight-less delta after a trace point: the list starts again from the weights as
// restored (backup_partial_delta).
constexpr std::uint64_t kTraceFromRestoredWeights = ~std::uint64_t{0};
constexpr std::uint32_t kMergeTag = 0x4752454D;  // "MERG"
constexpr std::uint16_t kMergeVersion = 1;

LabelKind labels_for(Task t) {
  switch (t) {
    case Task::kLinear:
      return LabelKind::kReal;
    case Task::kSoftmax:
      return LabelKind::kClass;
    default:
      return LabelKind::kBinary;
  }
}

OnError on_error_of(const Params& p) {
  const auto s = p.get_string("on-error", "fail");
  if (s == "fail") return OnError::kThrow;
  if (s == "skip") return OnError::kSkip;
  throw ConfigError("on-error: expected fail or skip, got '" + s + "'");
}

int hash_bits_of(const Params& p, std::int64_t fallback, std::int64_t lo) {
  const auto b = p.get_int("hash-bits", fallback);
  if (b < lo || b > 31) {
    throw ConfigError("hash-bits: expected an integer in [" + std::to_string(lo) + ", 31], got " + std::to_string(b));
  }
  return static_cast<int>(b);
}

// The generator parameters named by p (data other than file).
SyntheticParams synthetic_of(const Params& p) {
  const auto data = p.get_string("data", "higgs");
  const auto n = p.get_uint("examples", 0);
  if (n == 0) throw ConfigError("examples: the dataset size must be >= 1");
  const auto seed = p.get_uint("seed", 1);
  if (data == "higgs") return higgs_like(n, seed);
  if (data == "kdd") {
    auto s = kdd_like(n, seed);
    s.hash_bits = hash_bits_of(p, 18, 1);
    return s;
  }
  SyntheticParams s;
  s.num_examples = n;
  s.seed = seed;
  const auto features = p.get_int("features", 28);
  if (features < 1 || features > (std::int64_t{1} << 24)) {
    throw ConfigError("features: expected an integer in [1, 2^24], got " + std::to_string(features));
  }
  s.num_features = static_cast<std::size_t>(features);
  s.noise = p.get_double("noise", data == "linear" ? 0.1 : 0.5);
  s.weight_scale = p.get_double("weight-scale", 1);
  if (data == "logistic") {
    s.model = SyntheticModel::kLogistic;
  } else if (data == "linear") {
    s.model = SyntheticModel::kLinear;
  } else if (data == "multiclass") {
    s.model = SyntheticModel::kMulticlass;
    s.num_classes = static_cast<int>(p.get_int("classes", 4));
  } else {
    throw ConfigError("data: expected higgs, kdd, logistic, linear, multiclass or file, got '" + data + "'");
  }
  return s;
}

LoadedDataset load_file(const Params& p) {
  const auto path = p.get_string("file", "");
  if (path.empty()) throw ConfigError("file: data = file needs a file path");
  const auto format = p.get_string("format", "csv");
  const Task task = parse_task(p.get_string("task", "logistic"));
  const LabelKind labels = labels_for(task);
  const OnError on_error = on_error_of(p);
  ReadResult r = [&] {
    if (format == "csv") {
      return read_csv(path, {.label_column = static_cast<int>(p.get_int("label-column", 0)),
                             .header = p.get_string("header", "false") == "true",
                             .labels = labels,
                             .on_error = on_error});
    }
    if (format == "libsvm") {
      return read_libsvm(path, {.labels = labels, .hash_bits = hash_bits_of(p, 0, 0), .on_error = on_error});
    }
    if (format == "vw") return read_vw(path, {.bits = hash_bits_of(p, 18, 1), .labels = labels, .on_error = on_error});
    if (format == "idx") {
      const auto lf = p.get_string("labels-file", "");
      if (lf.empty()) throw ConfigError("labels-file: format = idx needs the labels file");
      return read_idx(path, lf);
    }
    throw ConfigError("format: expected csv, libsvm, vw or idx, got '" + format + "'");
  }();
  if (r.data.size() == 0) {
    // Under on-error = skip every line may have been skipped: say so, and why the first was.
    throw InputError(path + ": no examples" +
                     (r.stats.skipped == 0
                          ? std::string()
                          : " (" + std::to_string(r.stats.skipped) + " malformed lines skipped of " +
                                std::to_string(r.stats.lines) + "; the first: " + r.stats.first_error + ")"));
  }
  return {std::make_shared<InMemoryDataset>(std::move(r.data)), std::move(r.stats)};
}

// What identifies a dataset: every parameter dataset_from reads.
std::string cache_key(const Params& p) {
  std::string k;
  for (const char* name : {"data", "examples", "seed", "features", "noise", "weight-scale", "classes", "hash-bits",
                           "file", "format", "labels-file", "label-column", "header", "task", "on-error"}) {
    k += name;
    k += '=';
    k += p.get_string(name, "");
    k += ';';
  }
  return k;
}

}  // namespace

LoadedDataset load_dataset(const Params& p) {
  static std::mutex mu;
  static std::map<std::string, LoadedDataset> cache;
  const auto key = cache_key(p);
  std::lock_guard lock(mu);  // held while loading: concurrent workers of one process wait for the one load
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  LoadedDataset d;
  if (p.get_string("data", "higgs") == "file") {
    d = load_file(p);
  } else {
    d.data = std::make_shared<SyntheticDataset>(synthetic_of(p));
  }
  cache.emplace(key, d);
  return d;
}

std::shared_ptr<const Dataset> dataset_from(const Params& p) { return load_dataset(p).data; }

LearnerConfig learner_config_from(const Params& p, const DatasetInfo& info) {
  LearnerConfig c;
  c.task = parse_task(p.get_string("task", "logistic"));
  c.optimizer = parse_optimizer(p.get_string("optimizer", "sgd"));
  c.eta0 = p.get_double("eta0", 0.5);
  c.l2 = p.get_double("l2", 1e-6);
  c.adagrad_init = p.get_double("adagrad-init", 1e-6);
  c.num_features = info.num_features;
  c.num_classes = c.task == Task::kSoftmax ? info.num_classes : 2;
  // A file's classes are its largest class id + 1, unless more are given (a file need not hold every class: one
  // written by `afstream gen` from K-class data whose last class was never drawn).
  if (c.task == Task::kSoftmax && p.get_string("data", "") == "file" && p.get_int("classes", 0) != 0) {
    const auto given = p.get_int("classes", 0);
    if (given < info.num_classes || given > 65536) {
      throw ConfigError("classes: " + std::to_string(given) + " classes given, expected " +
                        std::to_string(info.num_classes) + " to 65536 (the file's class ids go up to " +
                        std::to_string(info.num_classes - 1) + ")");
    }
    c.num_classes = static_cast<int>(given);
  }
  if (c.task == Task::kSoftmax && info.labels != LabelKind::kClass) {
    throw ConfigError("task: softmax needs class labels (data = multiclass, or a file with class ids)");
  }
  if (c.task != Task::kSoftmax && info.labels == LabelKind::kClass) {
    throw ConfigError("task: the data has class labels; use task = softmax");
  }
  if (c.task != Task::kLinear && info.labels == LabelKind::kReal) {
    throw ConfigError("task: the data has real-valued labels; use task = linear");
  }
  validate(c);
  return c;
}

std::optional<Eigen::VectorXd> true_model(const Params& p) {
  if (p.get_string("data", "higgs") == "file") return std::nullopt;
  const auto s = synthetic_of(p);
  if (s.sparse || s.drift != 0) return std::nullopt;
  SyntheticDataset d(s);
  Eigen::VectorXd w = d.true_weights(0);
  if (s.model != SyntheticModel::kLinear && s.noise > 0) w /= s.noise;          // the scores are m / noise
  if (s.model != SyntheticModel::kLinear && s.noise == 0) return std::nullopt;  // separable: no finite optimum
  if (s.model == SyntheticModel::kMulticlass) {
    // Softmax does not change when one vector is added to every class's weights, so the truth is a whole family;
    // its member with each feature's weights (and the biases) summing to 0 over the classes is the one SGD from zero
    // approaches (every SGD step sums to 0 over the classes; AdaGrad's per-weight scaling does not keep that sum) and
    // L2 selects. The draw itself is not centred: the L1 distance to it stayed at its distance from that subspace
    // however long the learner ran (19.1 after 2e4, 2e5 and 1e6 examples of 5 features and 3 classes).
    const auto K = static_cast<Eigen::Index>(s.num_classes), d1 = static_cast<Eigen::Index>(s.num_features + 1);
    for (Eigen::Index j = 0; j < d1; ++j) {
      double mean = 0;
      for (Eigen::Index k = 0; k < K; ++k) mean += w[k * d1 + j];
      mean /= static_cast<double>(K);
      for (Eigen::Index k = 0; k < K; ++k) w[k * d1 + j] -= mean;
    }
  }
  return w;
}

std::string example_context(const Params& p) {
  return p.get_string("data", "higgs") == "file" ? " (counted from 0) of " + p.get_string("file", "") : "";
}

void rethrow_for_example(const std::string& op, const std::string& context, std::uint64_t index, const InputError& e) {
  throw InputError(op + ": example " + std::to_string(index) + context + ": " + e.what());
}

// ---------------------------------------------------------------------------------------------------------------
// examples source

ExampleSource::ExampleSource(const Params& p, const InstanceInfo& at) {
  const auto begin = p.get_uint("begin", 0), n = p.get_uint("items", 0);
  begin_ = begin + n * static_cast<std::uint64_t>(at.index) / static_cast<std::uint64_t>(at.parallelism);
  end_ = begin + n * static_cast<std::uint64_t>(at.index + 1) / static_cast<std::uint64_t>(at.parallelism);
}

std::size_t ExampleSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= size()) return 0;
  const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  for (std::size_t i = 0; i < k; ++i) {
    const std::uint64_t index = begin_ + offset + i;
    out[i] = Item{index, static_cast<std::int64_t>(index), static_cast<std::int64_t>(index), 0};
  }
  return k;
}

// ---------------------------------------------------------------------------------------------------------------
// sgd-learner

SgdLearnerOperator::SgdLearnerOperator(const Params& p, const InstanceInfo& at)
    : data_(dataset_from(p)),
      context_(example_context(p)),
      config_(learner_config_from(p, data_->info())),
      clip_(p.get_double("clip", 10)),
      copy_(static_cast<std::uint32_t>(at.index)),
      opt_(make_optimizer_state(config_)),
      weights_(weight_count(config_), Metric::L2),
      sum_sq_(config_.optimizer == OptimizerKind::kAdaGrad ? TrackedVector(opt_.sum_sq, Metric::L2)
                                                           : TrackedVector(0, Metric::L2)) {
  if (!(clip_ > 0) || !std::isfinite(clip_)) {
    throw ConfigError("clip: the gradient bound H must be a finite number > 0, got " + std::to_string(clip_));
  }
  const auto every = p.get_int("trace-every", 0);
  if (every < 0) throw ConfigError("trace-every: expected examples >= 0 (0 = no trace), got " + std::to_string(every));
  trace_every_ = static_cast<std::uint64_t>(every);
  const auto clock = p.get_string("trace-clock", "wall");
  if (clock != "wall" && clock != "off") throw ConfigError("trace-clock: expected wall or off, got '" + clock + "'");
  trace_clock_ = clock == "wall";
  const auto now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  trace_start_ns_ = p.get_int("trace-start-ns", now_ns);
  if (trace_every_ > 0) trace_moved_ = DirtySlots<double>(weights_.size());
}

// A trace point: the counters now, the wall time since the start, and the L1 change of the weights since the
// previous point (proofs/theorem1-sgd.md measures convergence in the iterates; [J] plots this L1 norm).
void SgdLearnerOperator::take_trace_point() {
  const auto& w = weights_.values();
  double seconds = 0;  // trace-clock = off
  if (trace_clock_) {
    const auto now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    seconds = static_cast<double>(now_ns - trace_start_ns_) * 1e-9;
  }
  // ||w - w_prev||_1 over the entries that moved since the previous point (the others add 0), and ||w||_1 as the
  // previous point's plus what those entries changed it by (the weights start at 0; O(moved) instead of a sweep
  // over every weight, which a tracked vector stores with their backed-up values: 4 MB for 2^18).
  double l1 = 0;
  double norm_change = 0;
  const auto& idx = trace_moved_.indices();
  const auto& base = trace_moved_.bases();
  constexpr std::size_t kAhead = 16;  // scattered entries: start the misses ahead
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (k + kAhead < idx.size()) weights_.prefetch(std::size_t{idx[k + kAhead]});
    const double now = w[static_cast<Eigen::Index>(idx[k])];
    l1 += std::abs(now - base[k]);
    norm_change += std::abs(now) - std::abs(base[k]);
  }
  const double norm = trace_norm_pending_ ? weights_.values().lpNorm<1>() : trace_norm_ + norm_change;
  trace_norm_pending_ = false;
  trace_.push_back({static_cast<double>(count_), seconds, l1, loss_sum_, static_cast<double>(correct_), norm});
  trace_norm_ = norm;
  trace_moved_.clear();
  trace_derived_.clear();
  trace_backed_ = 0;  // the next delta starts the list again
  trace_restarted_ = true;
}

double SgdLearnerOperator::step_cap(std::uint64_t t) const {
  if (config_.optimizer != OptimizerKind::kSgd) return config_.eta0 * clip_;
  return config_.eta0 / std::sqrt(static_cast<double>(std::max<std::uint64_t>(t, 1))) * clip_;
}

// Scales step t (make_step has counted it) down to L2 norm step_cap(t) when it is longer. Entries with the same index
// (hash collisions in sparse data) are summed first, so the norm is that of the actual move of the weights.
void SgdLearnerOperator::clip_step() {
  const double cap = step_cap(opt_.t);
  double norm = 0;
  if (x_.is_sparse()) {
    // The L1 norm of the entries bounds the L2 norm of their sums: most steps are clearly shorter than the cap and
    // skip the merge (a sort, 6% of a KDD-like learner's time). The margin keeps the outcome the merge's exactly.
    double l1 = 0;
    for (const double v : step_.value) l1 += std::abs(v);
    if (l1 <= cap * (1 - 1e-9)) return;
    merged_.clear();
    for (std::size_t k = 0; k < step_.size(); ++k) merged_.emplace_back(step_.index[k], step_.value[k]);
    std::sort(merged_.begin(), merged_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    norm = l2_norm_of([&](auto&& f) {
      for (std::size_t k = 0; k < merged_.size();) {
        double v = 0;
        const auto i = merged_[k].first;
        for (; k < merged_.size() && merged_[k].first == i; ++k) v += merged_[k].second;
        f(v);
      }
    });
  } else {
    norm = l2_norm_of([&](auto&& f) {
      for (const double v : step_.value) f(v);
    });
  }
  if (!std::isfinite(norm)) throw InputError(kNonFiniteStep);
  if (norm > cap) {
    // A little below the cap, so that rounding in the scaled values and in the store cannot exceed it.
    const double scale = cap / norm * (1 - 1e-12);
    for (double& v : step_.value) v *= scale;
    ++clipped_;
  }
}

void SgdLearnerOperator::process(const Item& item, Emitter&) {
  if (item.key >= data_->size()) {
    throw InputError("sgd-learner: example index " + std::to_string(item.key) + " is outside the dataset of " +
                     std::to_string(data_->size()) + " examples");
  }
  data_->example(item.key, x_);
  if (x_.is_sparse()) {  // scattered entries of 2^b weights: start their cache misses together, before they are read
    weights_.prefetch(x_.indices);
    if (trace_every_ > 0) trace_moved_.prefetch(x_.indices);
    if (config_.optimizer == OptimizerKind::kAdaGrad) sum_sq_.prefetch(x_.indices);
  }
  // Progressive validation: the outcome before the update.
  const auto& w = weights_.values();
  Prediction pred;
  double l = 0;
  bool ok = false;
  try {  // the weights have not changed yet when the example is refused (the run stops there)
    pred = predict(config_, w, x_);
    l = loss(config_, w, x_);
    ok = correct(config_, pred, x_);
    gradient(config_, w, x_, step_);
    make_step(config_, opt_, step_);
    clip_step();
  } catch (const InputError& e) {
    rethrow_for_example("sgd-learner", context_, item.key, e);
  }
  if (trace_every_ > 0) {  // the trace remembers each entry's value at the last point before its first move
    const bool tracking = weights_.tracking();
    for (const auto i : step_.index) {
      const double now = w[static_cast<Eigen::Index>(i)];
      if (trace_moved_.remember(i, now) && tracking) [[unlikely]] {
        trace_derived_.push_back(std::bit_cast<std::uint64_t>(weights_.backed_up(i)) ==
                                 std::bit_cast<std::uint64_t>(now));
      }
    }
  }
  apply_step(step_, weights_);
  if (config_.optimizer == OptimizerKind::kAdaGrad) {
    for (const auto i : step_.index) sum_sq_.set(i, opt_.sum_sq[static_cast<Eigen::Index>(i)]);
  }
  ++count_;
  correct_ += ok ? 1 : 0;
  loss_sum_ += l;
  if (std::has_single_bit(count_)) {
    records_.push_back({static_cast<double>(count_), loss_sum_, static_cast<double>(correct_)});
  }
  if (trace_every_ > 0 && count_ % trace_every_ == 0) take_trace_point();
}

void SgdLearnerOperator::finish(Emitter& out) {
  const std::uint64_t base = static_cast<std::uint64_t>(copy_) << 32;
  const auto& w = weights_.values();
  for (Eigen::Index i = 0; i < w.size(); ++i) {
    if (w[i] != 0) out.emit(base | static_cast<std::uint64_t>(i), std::bit_cast<std::int64_t>(w[i]));
  }
  const auto meta = [&](std::uint32_t f, double v) { out.emit(kMetaBit | base | f, std::bit_cast<std::int64_t>(v)); };
  for (std::size_t r = 0; r < records_.size(); ++r) {
    const auto f = static_cast<std::uint32_t>(kRecordBase + 3 * r);
    meta(f, records_[r].count);
    meta(f + 1, records_[r].loss_sum);
    meta(f + 2, records_[r].correct);
  }
  meta(kRecords, static_cast<double>(records_.size()));
  for (std::size_t r = 0; r < trace_.size(); ++r) {
    const auto f = static_cast<std::uint32_t>(kTraceBase + 6 * r);
    const TracePoint& t = trace_[r];
    meta(f, t.count);
    meta(f + 1, t.seconds);
    meta(f + 2, t.l1);
    meta(f + 3, t.loss_sum);
    meta(f + 4, t.correct);
    meta(f + 5, t.norm);
  }
  meta(kTraces, static_cast<double>(trace_.size()));
  meta(kSteps, static_cast<double>(opt_.t));
  meta(kLossSum, loss_sum_);
  meta(kCorrect, static_cast<double>(correct_));
  meta(kCount, static_cast<double>(count_));  // last: a copy counts as reported once this arrives
}

void SgdLearnerOperator::write_scalars(ByteWriter& out) const {
  out.put<std::uint32_t>(kLearnerTag);
  out.put<std::uint16_t>(kLearnerVersion);
  out.put<std::uint64_t>(opt_.t);
  out.put<std::uint64_t>(count_);
  out.put<std::uint64_t>(correct_);
  out.put<double>(loss_sum_);
  out.put_array<ProgressRecord>(records_);
  out.put_array<TracePoint>(trace_);
  out.put<double>(trace_norm_);
  out.put<std::uint8_t>(trace_norm_pending_ ? 1 : 0);
}

void SgdLearnerOperator::snapshot_full(ByteWriter& out) const {
  write_scalars(out);
  weights_.write_full(out);
  sum_sq_.write_full(out);
  write_trace_bases(out, 0, false);
}

void SgdLearnerOperator::snapshot_delta(ByteWriter& out) const {
  write_scalars(out);
  out.put<std::uint64_t>(backups_ + 1);  // the backup it is (mark_backed_up counts it)
  weights_.write_delta(out);
  sum_sq_.write_delta(out);
  write_trace_bases(out, trace_backed_, true);  // the entries that first moved since the last backup
}

void SgdLearnerOperator::stop_tracking() {
  weights_.stop_tracking();
  sum_sq_.stop_tracking();
}

void SgdLearnerOperator::mark_backed_up() {
  ++backups_;
  weights_.mark_backed_up();
  sum_sq_.mark_backed_up();
  trace_backed_ = trace_moved_.count();
  trace_restarted_ = false;
}

// snapshot_delta's bytes, then mark_backed_up's state, with one visit per changed weight: the trace's entries no
// longer read the backed-up values (trace_derived_), so the vectors may take their new ones as they are written.
void SgdLearnerOperator::backup_delta(ByteWriter& out) {
  write_scalars(out);
  out.put<std::uint64_t>(++backups_);
  weights_.backup_delta(out);
  sum_sq_.backup_delta(out);
  write_trace_bases(out, trace_backed_, true);
  trace_backed_ = trace_moved_.count();
  trace_restarted_ = false;
}

// A weight-less delta leaves every backed-up value as it was, so the trace's derived values (read from the weights
// the delta applies to) stay right. AdaGrad's squared sums have no metric of their own here: always whole.
double SgdLearnerOperator::backup_partial_delta(ByteWriter& out, double residual) {
  const double d = weights_.divergence();
  if (!weights_.tracking() || config_.optimizer != OptimizerKind::kSgd || d > residual) {
    backup_delta(out);
    return 0;
  }
  write_scalars(out);
  out.put<std::uint64_t>(++backups_);
  weights_.write_empty_delta(out);
  sum_sq_.write_empty_delta(out);
  // Nor a trace entry: the restored list is the store's, which goes with the store's weights. Without a trace point
  // since the last backup with weights, it is exactly the restored weights' (an entry it lacks has not moved since
  // the point: its value then is the restored one, which it remembers when it moves). After one, the list starts
  // again from the weights as restored: the next point's change is measured from them, and its norm from theirs.
  // The entries wait for the next delta with weights: in the KDD-like job they were nine tenths of a weight-less
  // delta's 245 KB.
  out.put<std::uint64_t>(trace_restarted_ ? kTraceFromRestoredWeights : trace_backed_);
  out.put_array<std::uint32_t>(std::span<const std::uint32_t>{});
  out.put<std::uint64_t>(0);  // derived bits
  out.put<std::uint64_t>(0);  // values
  return d;
}

// The trace's moved entries as a backup carries them: `kept`, how many of the entries the state it applies to holds
// stay (0: the list starts again, as in a full snapshot or after a trace point), then the entries after those. The
// list only grows between trace points, so a delta carries the entries that first moved since the last backup, not
// every entry moved since the last point: a KDD-like run with 8 failures, whose halved thresholds back the learners
// up several times per trace point, wrote 278 MB of backups instead of 468 MB, and its restores re-insert fewer.
// Nor does a delta carry the values it can derive: an entry's value at the last trace point is, unless the entry also
// moved between the last backup and that point, its value in the last backup, which the state the delta applies to
// holds. A bit per entry says which (1: derived; never in a full snapshot), and only the others' values follow:
//   u64 kept | u64 n, n u32 indices | u64 (n + 7) / 8, the bits (entry k: byte k / 8, bit k % 8) | u64 m, m doubles.
struct SgdLearnerOperator::TraceBases {
  std::uint64_t kept = 0;
  bool from_restored_weights = false;  // kTraceFromRestoredWeights: no entries, kept 0
  ArrayView<std::uint32_t> indices;    // in place in the backup read: adopted while its buffer lives
  ArrayView<std::uint8_t> derived;     // the bits
  ArrayView<double> bases;             // the values of the entries not derived, in order
};

void SgdLearnerOperator::write_trace_bases(ByteWriter& out, std::size_t kept, bool delta) const {
  const auto idx = std::span(trace_moved_.indices()).subspan(kept);
  const auto base = std::span(trace_moved_.bases()).subspan(kept);
  out.put<std::uint64_t>(kept);
  out.put_array<std::uint32_t>(idx);
  auto& buf = out.buffer();
  out.put<std::uint64_t>((idx.size() + 7) / 8);
  const std::size_t bits = buf.size();
  buf.resize(bits + (idx.size() + 7) / 8, 0);
  std::size_t explicit_count = 0;
  // Untracked weights do not know their backed-up values. Bit-equal values (a -0.0 stays -0.0) are derived: the
  // restored state is this one, byte for byte.
  const bool derive = delta && weights_.tracking();
  assert(!derive || trace_derived_.size() == trace_moved_.count());
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (derive && trace_derived_[kept + k] != 0) {
      buf[bits + k / 8] |= static_cast<std::uint8_t>(1u << (k % 8));
    } else {
      ++explicit_count;
    }
  }
  out.put<std::uint64_t>(explicit_count);
  const std::size_t values = buf.size();
  buf.resize(values + explicit_count * sizeof(double));
  std::uint8_t* at = buf.data() + values;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if ((buf[bits + k / 8] >> (k % 8)) & 1) continue;
    std::memcpy(at, &base[k], sizeof(double));
    at += sizeof(double);
  }
}

// Reads and checks the entries against the current state (for a delta) before anything changes.
SgdLearnerOperator::TraceBases SgdLearnerOperator::read_trace_bases(ByteReader& in, bool delta) {
  TraceBases t;
  t.kept = in.get<std::uint64_t>("sgd-learner trace entries kept");
  if (t.kept == kTraceFromRestoredWeights) {
    if (!delta) throw FormatError("sgd-learner: a full snapshot starts its trace from the weights as restored");
    t.kept = 0;
    t.from_restored_weights = true;
  }
  t.indices = in.get_array_view<std::uint32_t>("sgd-learner trace entries");
  if (t.from_restored_weights && !t.indices.empty()) {
    throw FormatError("sgd-learner: a trace that starts again from the weights as restored has " +
                      std::to_string(t.indices.size()) + " entries");
  }
  t.derived = in.get_array_view<std::uint8_t>("sgd-learner trace derived bits");
  t.bases = in.get_array_view<double>("sgd-learner trace values");
  if (t.derived.size() != (t.indices.size() + 7) / 8) {
    throw FormatError("sgd-learner: " + std::to_string(t.derived.size()) + " bytes of derived bits for " +
                      std::to_string(t.indices.size()) + " trace entries");
  }
  std::size_t derived = 0;
  for (std::size_t b = 0; b < t.derived.size(); ++b) derived += static_cast<std::size_t>(std::popcount(t.derived[b]));
  if (const std::size_t pad = t.derived.size() * 8 - t.indices.size();
      pad > 0 && (t.derived[t.derived.size() - 1] >> (8 - pad)) != 0) {
    throw FormatError("sgd-learner: derived bits set past the trace entries");
  }
  if (derived > 0 && !delta) throw FormatError("sgd-learner: a full snapshot derives trace values");
  if (t.indices.size() - derived != t.bases.size()) {
    throw FormatError("sgd-learner: " + std::to_string(t.indices.size() - derived) + " trace entries with values but " +
                      std::to_string(t.bases.size()) + " values");
  }
  if (t.kept != 0 && !delta)
    throw FormatError("sgd-learner: a full snapshot keeps " + std::to_string(t.kept) + " trace entries");
  const std::size_t n = trace_moved_.slots();
  for (std::size_t k = 0; k < t.indices.size(); ++k) {
    if (const std::uint32_t i = t.indices[k]; i >= n) {
      throw FormatError("sgd-learner: trace entry " + std::to_string(i) + " out of range (" + std::to_string(n) +
                        " trace slots)");
    }
  }
  // That no entry is repeated (nor, in a delta that keeps entries, already held) is checked by adopt_trace, which
  // inserts them all or none: one pass over the scattered slots instead of a check and an insertion.
  return t;
}

// A delta's trace against the state it applies to (apply_delta, once it knows whether the delta is applied again).
void SgdLearnerOperator::check_trace_kept(const TraceBases& t, bool again) const {
  if (again) {  // the state holds what the delta's trace leads to
    if (t.kept + t.indices.size() != trace_moved_.count()) {
      throw FormatError("sgd-learner: the delta applied again leads to " + std::to_string(t.kept + t.indices.size()) +
                        " trace entries but the state holds " + std::to_string(trace_moved_.count()));
    }
  } else if (t.kept != 0 && t.kept != trace_moved_.count()) {
    throw FormatError("sgd-learner: the delta keeps " + std::to_string(t.kept) + " trace entries but the state holds " +
                      std::to_string(trace_moved_.count()));
  }
}

// The trace's entries as read_trace_bases returned them: the list starts again (kept 0) or grows. Throws FormatError,
// with the state as it was, when an entry is repeated or already held.
void SgdLearnerOperator::adopt_trace(TraceBases& trace) {
  // The values: derived ones from the weights as the delta finds them (before it applies), the others as written.
  std::vector<double> bases(trace.indices.size());
  for (std::size_t k = 0, e = 0; k < bases.size(); ++k) {
    const bool derived = (trace.derived[k / 8] >> (k % 8)) & 1;
    bases[k] = derived ? weights_.values()[static_cast<Eigen::Index>(trace.indices[k])] : trace.bases[e++];
  }
  std::pair<std::vector<std::uint32_t>, std::vector<double>> old;  // the list that starts again, to put back
  if (trace.kept == 0) old = trace_moved_.take_all();
  const std::size_t bad = trace_moved_.insert_clean(trace.indices, bases);
  if (bad == trace.indices.size()) {
    if (trace.kept == 0) trace_derived_.clear();
    if (weights_.tracking())
      trace_derived_.resize(trace_moved_.count(), 0);  // held by the backup: no delta carries them
    return;
  }
  (void)trace_moved_.insert_clean(old.first, old.second);
  throw FormatError("sgd-learner: trace entry " + std::to_string(trace.indices[bad]) +
                    (trace.kept == 0 ? " repeated" : " repeated or already held"));
}

struct SgdLearnerOperator::Scalars {
  std::uint64_t t = 0, count = 0, correct = 0;
  double loss_sum = 0;
  std::vector<ProgressRecord> records;
  std::vector<TracePoint> trace;
  double trace_norm = 0;
  bool trace_norm_pending = false;
};

SgdLearnerOperator::Scalars SgdLearnerOperator::read_scalars(ByteReader& in) {
  if (in.get<std::uint32_t>("sgd-learner tag") != kLearnerTag) throw FormatError("sgd-learner: not a learner state");
  if (const auto v = in.get<std::uint16_t>("sgd-learner version"); v != kLearnerVersion) {
    throw FormatError("sgd-learner: unsupported state version " + std::to_string(v));
  }
  Scalars s;
  s.t = in.get<std::uint64_t>("sgd-learner step counter");
  s.count = in.get<std::uint64_t>("sgd-learner count");
  s.correct = in.get<std::uint64_t>("sgd-learner correct");
  s.loss_sum = in.get<double>("sgd-learner loss sum");
  s.records = in.get_array<ProgressRecord>("sgd-learner progress records");
  s.trace = in.get_array<TracePoint>("sgd-learner trace points");
  s.trace_norm = in.get<double>("sgd-learner trace norm");
  const auto pending = in.get<std::uint8_t>("sgd-learner trace norm pending");
  if (pending > 1) throw FormatError("sgd-learner: trace norm pending flag " + std::to_string(pending));
  s.trace_norm_pending = pending == 1;
  if (s.correct > s.count) throw FormatError("sgd-learner: more correct predictions than examples");
  return s;
}

// Applies what restore_full / apply_delta read and checked; only the trace's entries can still be refused (a
// FormatError from adopt_trace, before anything changes). The weights are not copied (a restore applies up to
// ft.full-backup-every deltas: a copy each made it O(chain x weights)).
void SgdLearnerOperator::adopt(Scalars&& s, TrackedVector::Delta&& weights, TrackedVector::Delta&& sum_sq,
                               TraceBases&& trace, bool again) {
  if (!again) adopt_trace(trace);  // first: the one step that can refuse, with nothing changed
  weights_.apply_delta(std::move(weights));
  sum_sq_.apply_delta(std::move(sum_sq));
  trace_backed_ = trace_moved_.count();  // the restored state is the backup
  trace_restarted_ = false;
  // The list starts again from these weights (a weight-less delta after a trace point): so does the norm, which the
  // next point sums.
  trace_norm_ = s.trace_norm;
  trace_norm_pending_ = trace.from_restored_weights || s.trace_norm_pending;
  trace_ = std::move(s.trace);
  opt_.t = s.t;
  if (sum_sq_.size() > 0) opt_.sum_sq = sum_sq_.values();
  count_ = s.count;
  correct_ = s.correct;
  loss_sum_ = s.loss_sum;
  records_ = std::move(s.records);
}

// Whether the state is the one the delta leads to: its scalars, and its trace's entries where the delta puts them
// (with the values it writes; a derived one's value was the weight before the delta, which the state no longer
// holds). Only examples move the counters and the trace, so a delta written later that this also holds carries no
// entry and no weight that the state lacks: taking it as one applied again changes nothing either.
bool SgdLearnerOperator::holds_delta(const Scalars& s, const TraceBases& t) const {
  if (s.t != opt_.t || s.count != count_ || s.correct != correct_ ||
      std::bit_cast<std::uint64_t>(s.loss_sum) != std::bit_cast<std::uint64_t>(loss_sum_) || s.trace != trace_ ||
      t.kept + t.indices.size() != trace_moved_.count()) {
    return false;
  }
  const auto& idx = trace_moved_.indices();
  const auto& base = trace_moved_.bases();
  for (std::size_t k = 0, e = 0; k < t.indices.size(); ++k) {
    if (idx[t.kept + k] != t.indices[k]) return false;
    if ((t.derived[k / 8] >> (k % 8)) & 1) continue;
    if (std::bit_cast<std::uint64_t>(base[t.kept + k]) != std::bit_cast<std::uint64_t>(t.bases[e++])) return false;
  }
  return true;
}

void SgdLearnerOperator::restore_full(ByteReader& in) {
  auto s = read_scalars(in);
  // Read and checked before anything changes, as a delta is (a copy of the weights to read into cost 2 MB).
  auto wd = weights_.read_full_values(in);
  auto qd = sum_sq_.read_full_values(in);
  auto tw = read_trace_bases(in, false);
  in.expect_end("sgd-learner snapshot");
  adopt(std::move(s), std::move(wd), std::move(qd), std::move(tw));
  backups_ = 0;  // the deltas after it carry numbers from 1 up
}

void SgdLearnerOperator::apply_delta(ByteReader& in) {
  auto s = read_scalars(in);
  const auto number = in.get<std::uint64_t>("sgd-learner backup number");
  if (number == 0) throw FormatError("sgd-learner: a delta numbered 0");
  // Everything is read and checked before anything changes.
  auto wd = weights_.read_delta(in);
  auto qd = sum_sq_.read_delta(in);
  auto tw = read_trace_bases(in, true);
  in.expect_end("sgd-learner delta");
  // The delta the state was last restored from, applied a second time in a row (a put a restarted backup server
  // stored twice): its weights and scalars set the values they hold, and its trace is the state's (applied again, a
  // derived entry would take the weight the delta wrote as its value, and a delta that keeps entries would find more).
  // After a full snapshot's restore the number says nothing: the backup server may have compacted the chain up to the
  // first copy before the second came (ChainCompactor), whose full snapshot then holds the delta; the state tells.
  const bool again = number == backups_ || (backups_ == 0 && holds_delta(s, tw));
  check_trace_kept(tw, again);
  adopt(std::move(s), std::move(wd), std::move(qd), std::move(tw), again);
  backups_ = number;
}

double SgdLearnerOperator::distance(const Operator& other) const {
  return weights_.distance(dynamic_cast<const SgdLearnerOperator&>(other).weights_);
}

// ---------------------------------------------------------------------------------------------------------------
// model-merge

namespace {
int parallelism_of(const Params& p) {
  const auto n = p.get_int("parallelism", 1);
  if (n < 1 || n > (1 << 20)) {
    throw ConfigError("model-merge: parallelism must be in [1, 2^20], got " + std::to_string(n));
  }
  return static_cast<int>(n);
}
}  // namespace

ModelMerge::ModelMerge(const Params& p)
    : parallelism_(parallelism_of(p)),
      config_(learner_config_from(p, dataset_from(p)->info())),
      weight_count_(weight_count(config_)),
      weights_(static_cast<std::size_t>(parallelism_) * weight_count_, Metric::L2) {}

void ModelMerge::process(const Item& item, Emitter&) {
  const std::uint64_t copy = (item.key & ~kMetaBit) >> 32, low = item.key & 0xffffffffu;
  const double v = std::bit_cast<double>(item.value);
  if (copy >= static_cast<std::uint64_t>(parallelism_) || (!(item.key & kMetaBit) && low >= weight_count_)) {
    throw FormatError("model-merge: item key " + std::to_string(item.key) + " is not a weight or counter of one of " +
                      std::to_string(parallelism_) + " learner copies of " + std::to_string(weight_count_) +
                      " weights");
  }
  if (item.key & kMetaBit) {
    const std::uint64_t k = item.key & ~kMetaBit;
    if (fields_.contains(k) && fields_.get(k) == v) return;  // a resent duplicate
    fields_.set(k, v);
  } else {
    const std::size_t i = static_cast<std::size_t>(copy) * weight_count_ + low;
    if (weights_.get(i) != v) weights_.set(i, v);  // set: a resent duplicate changes nothing
  }
}

double ModelMerge::divergence() const {
  return weights_.dirty_count() > 0 || fields_.dirty_count() > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

void ModelMerge::snapshot_full(ByteWriter& out) const {
  out.put<std::uint32_t>(kMergeTag);
  out.put<std::uint16_t>(kMergeVersion);
  weights_.write_full(out);
  fields_.write_full(out);
}

void ModelMerge::snapshot_delta(ByteWriter& out) const {
  out.put<std::uint32_t>(kMergeTag);
  out.put<std::uint16_t>(kMergeVersion);
  weights_.write_delta(out);
  fields_.write_delta(out);
}

void ModelMerge::mark_backed_up() {
  weights_.mark_backed_up();
  fields_.mark_backed_up();
}

namespace {
void check_merge_header(ByteReader& in) {
  if (in.get<std::uint32_t>("model-merge tag") != kMergeTag) throw FormatError("model-merge: not a merge state");
  if (const auto v = in.get<std::uint16_t>("model-merge version"); v != kMergeVersion) {
    throw FormatError("model-merge: unsupported state version " + std::to_string(v));
  }
}
}  // namespace

void ModelMerge::restore_full(ByteReader& in) {
  check_merge_header(in);
  TrackedVector w = weights_;
  auto f = fields_;
  w.read_full(in);
  f.read_full(in);
  in.expect_end("model-merge snapshot");
  weights_ = std::move(w);
  fields_ = std::move(f);
}

void ModelMerge::apply_delta(ByteReader& in) {
  check_merge_header(in);
  auto wd = weights_.read_delta(in);  // checked first, applied without copying the weights
  const auto fd = fields_.read_delta(in);
  in.expect_end("model-merge delta");
  weights_.apply_delta(std::move(wd));
  fields_.apply_delta(fd);
}

double ModelMerge::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const ModelMerge&>(other);
  return weights_.distance(o.weights_) == 0 && fields_.size() == o.fields_.size() && fields_.distance(o.fields_) == 0
             ? 0.0
             : std::numeric_limits<double>::infinity();
}

double ModelMerge::field(int copy, std::uint32_t f) const {
  const std::uint64_t k = (static_cast<std::uint64_t>(copy) << 32) | f;
  return fields_.contains(k) ? fields_.get(k) : 0.0;
}

int ModelMerge::copies_reported() const {
  int n = 0;
  for (int c = 0; c < parallelism_; ++c) n += fields_.contains((static_cast<std::uint64_t>(c) << 32) | kCount);
  return n;
}

std::vector<int> ModelMerge::learned_copies() const {
  std::vector<int> copies;
  for (int c = 0; c < parallelism_; ++c) {
    if (field(c, kCount) > 0) copies.push_back(c);
  }
  return copies;
}

Eigen::VectorXd ModelMerge::averaged_model() const {
  Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(weight_count_));
  const auto copies = learned_copies();
  for (const int c : copies) {
    w += weights_.values().segment(static_cast<Eigen::Index>(c * weight_count_),
                                   static_cast<Eigen::Index>(weight_count_));
  }
  if (!copies.empty()) w /= static_cast<double>(copies.size());
  return w;
}

double ModelMerge::total(MetaField f) const {
  double s = 0;
  for (int c = 0; c < parallelism_; ++c) s += field(c, f);
  return s;
}

std::vector<ModelMerge::ProgressRow> ModelMerge::progress() const {
  std::vector<ProgressRow> rows;
  std::size_t points = std::numeric_limits<std::size_t>::max();
  const auto copies = learned_copies();
  for (const int c : copies) points = std::min(points, static_cast<std::size_t>(field(c, kRecords)));
  if (copies.empty()) return rows;
  double last_n = 0, last_loss = 0;
  const auto add = [&](double n, double loss_sum, double correct) {
    if (n <= last_n) return;
    rows.push_back({n, loss_sum / n, (loss_sum - last_loss) / (n - last_n), correct / n});
    last_n = n;
    last_loss = loss_sum;
  };
  for (std::size_t r = 0; r < points; ++r) {
    double n = 0, loss_sum = 0, correct = 0;
    for (const int c : copies) {
      const auto f = static_cast<std::uint32_t>(kRecordBase + 3 * r);
      n += field(c, f);
      loss_sum += field(c, f + 1);
      correct += field(c, f + 2);
    }
    add(n, loss_sum, correct);
  }
  add(total(kCount), total(kLossSum), total(kCorrect));
  return rows;
}

std::vector<TracePoint> ModelMerge::trace(int copy) const {
  std::vector<TracePoint> out;
  const auto points_of = [&](int c) -> std::size_t {
    const std::uint64_t k = (static_cast<std::uint64_t>(c) << 32) | kTraces;
    return fields_.contains(k) ? static_cast<std::size_t>(fields_.get(k)) : 0;
  };
  const auto point = [&](int c, std::size_t r) {
    const auto f = static_cast<std::uint32_t>(kTraceBase + 6 * r);
    return TracePoint{field(c, f), field(c, f + 1), field(c, f + 2), field(c, f + 3), field(c, f + 4), field(c, f + 5)};
  };
  if (copy >= 0) {
    if (copy >= parallelism_) throw std::out_of_range("model-merge: no copy " + std::to_string(copy));
    for (std::size_t r = 0; r < points_of(copy); ++r) out.push_back(point(copy, r));
    return out;
  }
  const auto copies = learned_copies();
  std::size_t points = std::numeric_limits<std::size_t>::max();
  for (const int c : copies) points = std::min(points, points_of(c));
  if (copies.empty()) return out;
  for (std::size_t r = 0; r < points; ++r) {
    TracePoint sum{0, 0, 0, 0, 0, 0};
    for (const int c : copies) {
      const TracePoint t = point(c, r);
      sum.count += t.count;
      sum.seconds = std::max(sum.seconds, t.seconds);
      sum.l1 += t.l1 / static_cast<double>(copies.size());
      sum.loss_sum += t.loss_sum;
      sum.correct += t.correct;
      sum.norm += t.norm / static_cast<double>(copies.size());
    }
    out.push_back(sum);
  }
  return out;
}

void register_ml(Registry& registry) {
  registry.add_source("examples", "example indices [begin, begin + items) of a dataset, split among instances",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<ExampleSource>(p, at); });
  registry.add_operator(
      "sgd-learner",
      "online learner, predict then learn (data, task, optimizer, eta0, l2, clip; weights in a TrackedVector, L2)",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<SgdLearnerOperator>(p, at); });
  registry.add_operator("model-merge", "averages the models of parallel sgd-learner copies (sink; parallelism)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<ModelMerge>(p); });
}

}  // namespace afs::ml
