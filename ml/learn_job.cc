// `afstream run --job learn`: data-parallel online learning with model averaging (issue 5, part 2), its options
// (learn.*), topology and evaluation (progress.csv and learn.csv in the run directory).
#include "ml/learn_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "ml/learn_options.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"

namespace afs::ml {

namespace po = boost::program_options;

namespace {

// learn.tolerance = 0 (the default) picks these, calibrated on the HIGGS-like (dense) and KDD-like (sparse) data
// with a trace point per 1% of the input (ml/README.md, "Convergence"): the relative L1 change per point of SGD's
// iterates falls like 1 / sqrt(t) (HIGGS-like 0.38 at 5% of the input to 0.11 at 100%, noisy; KDD-like 0.13 to
// 0.016, smooth), and these are crossed for good near the middle of the input without failures.
constexpr double kDenseTolerance = 0.2;
constexpr double kSparseTolerance = 0.025;

class LearnJob final : public TrainingDataJob {
 public:
  std::string name() const override { return "learn"; }
  std::string description() const override {
    return "online learning (logistic | linear | hinge | softmax; SGD | AdaGrad), data-parallel with model "
           "averaging: progressive validation and held-out prediction rate";
  }

  // Behind the replayable source a failure loses nothing, but repeats work: the examples since the learner's last
  // state backup, and everything the source had produced ahead of its receivers. A cheap model (HIGGS-like, 28
  // weights) is then backed up every few hundred examples for at most 1% of the time, and the source runs at most
  // 16384 examples ahead per learner: the convergence delay with 8 failures fell from +78% to +1-3% (ml/README.md,
  // "Convergence"). A large model (2^18 weights) costs more than 1% at any interval; it is backed up every 4096
  // examples (ft.replay-items-max), which costs the same CPU time as the Theta rule's backups alone (KDD-like 5e6
  // examples: +1.3% and +1.5% over mode none) and repeats about 2,000 examples per failure instead of 35,000.
  // On worker processes the backup server leaves the learners' chains to them (process.store-compact-ratio 0, the
  // process runtime's default): compacting 4096-example deltas at 1x cost the KDD-like job 15% more CPU, and at 4x
  // every compaction was superseded by the learner's own full snapshot (experiments/results/process-runtime/
  // learners/README.md, "The server's compactions of the learners' chains").
  // Whole deltas (ft.delta-residual 0): a partial one leaves the learner's weights at an older backup's, and a
  // restore sets the model back by that drift while the sources' position advances. KDD-like, 1e6 examples, 8
  // failures of all workers: converged +15% later in items (+0.0% with whole deltas) and -0.15 points of held-out
  // prediction rate, for 52 MB of backups instead of 155 and 87% of none instead of 78% on worker processes (no
  // gain on threads; experiments/results/learner-partial-delta, "Convergence").
  std::vector<std::pair<std::string, std::string>> run_defaults() const override {
    return {{"ft.replay-overhead-max", "0.01"},
            {"ft.replay-items-max", "4096"},
            {"net.in-flight-max", "16384"},
            {"ft.delta-residual", "0"}};
  }

  void add_options(po::options_description& o) const override {
    add_learner_options(o);
    o.add_options()(
        "learn.clip", real_value(10),
        "gradient bound H: step t is clipped to L2 norm eta_t * H (SGD: eta0 / sqrt(t) * H; AdaGrad: eta0 * H), the "
        "operator's alpha (> 0)");
    add_data_options(o);
    o.add_options()("learn.parallelism", po::value<int>()->default_value(2),
                    "parallel sgd-learner copies (model averaging)")(
        "learn.trace-every", po::value<std::uint64_t>()->default_value(0),
        "convergence trace: a point every N training examples over all copies (each copy every N / parallelism "
        "of its own); 0 = 1% of the input")(
        "learn.tolerance", real_value(0),
        "convergence: the L1 model change per trace point relative to the model's L1 norm (means over the copies) "
        "must stay below this (>= 0; 0 = 0.2 for dense data, 0.025 for sparse)")(
        "learn.window", po::value<std::uint64_t>()->default_value(5),
        "convergence: for this many consecutive trace points (>= 1)");
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    const int par = vm["learn.parallelism"].as<int>();
    if (par < 1 || par > 1024) throw ConfigError("learn.parallelism: expected [1, 1024], got " + std::to_string(par));
    TrainingData t = training_data_from(vm);
    items_ = t.items;
    data_ = t.data;
    config_ = t.learner;
    read_ = t.read;
    params_ = std::move(t.params);
    // The sink reads the data's and the learner's description (features, classes, ...) and how many copies to merge;
    // the learners their step's clip and trace points besides.
    Params merge = params_;
    merge.set("parallelism", static_cast<std::int64_t>(par));
    params_.set("clip", vm["learn.clip"].as<double>());
    const double clip = vm["learn.clip"].as<double>();
    if (!(clip > 0) || !std::isfinite(clip)) throw ConfigError("learn.clip: expected a finite H > 0");
    tolerance_ = vm["learn.tolerance"].as<double>();
    if (!(tolerance_ >= 0) || !std::isfinite(tolerance_)) {
      throw ConfigError("learn.tolerance: expected a finite relative L1 change > 0 (or 0 for the default)");
    }
    if (tolerance_ == 0) tolerance_ = data_->info().sparse ? kSparseTolerance : kDenseTolerance;
    window_ = vm["learn.window"].as<std::uint64_t>();
    if (window_ < 1) throw ConfigError("learn.window: expected >= 1 trace points");
    std::uint64_t every = vm["learn.trace-every"].as<std::uint64_t>();
    if (every == 0) every = std::max<std::uint64_t>(1, items_ / 100);
    if (every > items_) {
      throw ConfigError("learn.trace-every: expected at most the " + std::to_string(items_) +
                        " training examples, got " + std::to_string(every));
    }
    params_.set("trace-every", static_cast<std::int64_t>(std::max<std::uint64_t>(1, every / par)))
        .set("trace-start-ns", run.started_ns > 0 ? run.started_ns
                                                  : std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                        std::chrono::system_clock::now().time_since_epoch())
                                                        .count());
    holdout_begin_ = items_;
    holdout_end_ = t.holdout_end;
    lossy_ = run.mode == FtMode::None;  // (the failure plan is made after the topology; a kill may come from outside)
    cautions_.clear();
    // The held-out examples are the file's last ones: a file sorted by label holds out one class, and its "held-out
    // prediction rate" is that of a constant (a helper's sorted file read 99.2%).
    if (params_.get_string("data", "") == "file" && is_classification(config_.task) && holdout_end_ > items_) {
      Example e;
      data_->example(items_, e);
      const double label = e.label;
      bool one = true;
      for (std::uint64_t i = items_ + 1; i < holdout_end_ && one; ++i) {
        data_->example(i, e);
        one = e.label == label;
      }
      bool other = false;
      for (std::uint64_t i = 0; i < items_ && one && !other; ++i) {
        data_->example(i, e);
        other = e.label != label;
      }
      if (one && other) {
        cautions_.push_back("learn.holdout: the " + std::to_string(holdout_end_ - items_) +
                            " held-out examples (the file's last) all have one label, the training examples others: " +
                            "is the file sorted by label? (shuffle it, e.g. with shuf)");
      }
    }
    // A model's weights are held many times over: each learner copy's (beside their backed-up values in approx), the
    // sink's merge, the backups of every copy (the whole chain). learn.hash-bits 24 on threads took 1.0 GB (none) and
    // 2.0 GB (approx), about 8 and 15 times the 2^24 doubles with 2 copies; hash-bits 28 took 23 GB of a 24 GB host.
    const double weights = static_cast<double>(weight_count(config_));
    const double need = weights * sizeof(double) * 8.0 * par;
    const double memory =
        static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    if (memory > 0 && need > memory / 2) {
      const auto gb = [](double bytes) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", bytes / 1e9);
        return std::string(buf);
      };
      cautions_.push_back(
          "the model has " + std::to_string(weight_count(config_)) +
          " weights, which this job holds many times over (each learner copy, the sink, the backups): " + "about " +
          gb(need) + " GB, against " + gb(memory) +
          " GB of memory here (a smaller learn.hash-bits or learn.parallelism takes less)");
    }
    return TopologyBuilder()
        .source("source", "examples", Params().set("items", items_))
        .parallelism(par)
        .stage("learner", "sgd-learner", params_)
        .parallelism(par)
        .forward()
        .from("source")
        .stage("sink", "model-merge", merge)
        .forward()
        .from("learner")
        .build();
  }

  std::uint64_t total_items() const override { return items_; }
  std::vector<std::string> cautions() const override { return cautions_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    auto* merge = dynamic_cast<ModelMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("learn: the sink did not finish");
    // In mode none a failure loses what the sink had received: the model of a copy that had finished before it (a
    // finished copy is not restarted and does not report again). The model is then the others'.
    if (merge->copies_reported() != merge->parallelism() && !lossy_) {
      throw RuntimeError("learn: " + std::to_string(merge->copies_reported()) + " of " +
                         std::to_string(merge->parallelism()) + " learner copies reported their model");
    }
    const Eigen::VectorXd w = merge->averaged_model();
    const HoldoutResult h = evaluate_holdout(w);
    const double n = merge->total(kCount);
    const double pv_loss = n > 0 ? merge->total(kLossSum) / n : 0;
    const double pv_acc = prediction_rate(config_.task, merge->total(kCorrect), n);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double l1 = std::numeric_limits<double>::quiet_NaN();
    if (const auto truth = true_model(params_)) l1 = l1_change(w, *truth);
    // The convergence trace (the copies combined) and the convergence point on it.
    const auto trace = merge->trace(-1);
    ConvergenceDetector detector(tolerance_, window_);
    for (const auto& t : trace) detector.observe(static_cast<std::uint64_t>(t.count), t.seconds, relative(t));
    const double conv_items = detector.converged() ? static_cast<double>(detector.items_at_convergence()) : nan;
    const double conv_seconds = detector.converged() ? detector.seconds_at_convergence() : nan;
    if (!out_dir.empty()) {
      std::ofstream f(out_dir + "/progress.csv");
      f << "items,average_loss,since_last_loss,accuracy\n";
      for (const auto& r : merge->progress()) {
        f << r.items << ',' << r.average_loss << ',' << r.since_last_loss << ','
          << (is_classification(config_.task) ? r.accuracy : nan) << '\n';
      }
      close_checked(f, out_dir + "/progress.csv");
      std::ofstream s(out_dir + "/learn.csv");
      s << "examples,progressive_loss,progressive_accuracy,holdout_examples,holdout_loss,holdout_accuracy,"
           "l1_to_true,skipped_lines\n"
        << n << ',' << pv_loss << ',' << pv_acc << ',' << h.examples << ',' << h.average_loss << ',' << h.accuracy
        << ',' << l1 << ',' << read_.skipped << '\n';
      close_checked(s, out_dir + "/learn.csv");
      write_skipped(out_dir + "/skipped.txt", read_);
      write_model(out_dir + "/model.csv", w);
      std::ofstream tf(out_dir + "/trace.csv");
      tf << "items,seconds,l1_change,relative_change,model_l1,progressive_loss,progressive_accuracy\n";
      for (const auto& t : trace) write_point(tf, t, config_.task);
      close_checked(tf, out_dir + "/trace.csv");
      std::ofstream tc(out_dir + "/trace_copies.csv");
      tc << "copy,items,seconds,l1_change,relative_change,model_l1,progressive_loss,progressive_accuracy\n";
      for (int c = 0; c < merge->parallelism(); ++c) {
        for (const auto& t : merge->trace(c)) write_point(tc << c << ',', t, config_.task);
      }
      close_checked(tc, out_dir + "/trace_copies.csv");
    }
    return {{"progressive_loss", pv_loss},
            {"progressive_accuracy", pv_acc},
            {"holdout_accuracy", h.accuracy},
            {"holdout_loss", h.average_loss},
            {"l1_to_true", l1},
            {"trace_points", static_cast<double>(trace.size())},
            {"converged_items", conv_items},
            {"converged_seconds", conv_seconds},
            {"tolerance", tolerance_},
            {"skipped_lines", static_cast<double>(read_.skipped)}};
  }

  std::vector<std::string> score_names() const override {
    return {"progressive_loss", "progressive_accuracy", "holdout_accuracy",  "holdout_loss", "l1_to_true",
            "trace_points",     "converged_items",      "converged_seconds", "tolerance",    "skipped_lines"};
  }

  WrittenInput write_input(const po::variables_map& vm, const std::string& format, std::ostream& out,
                           const std::string& path, const GenProgress& progress) override {
    auto w = TrainingDataJob::write_input(vm, format, out, path, progress);
    // Dense data written as libsvm reads back as sparse data, whose default tolerance differs: keep the data's.
    if (vm["learn.tolerance"].as<double>() == 0 && w.format == "libsvm" &&
        !training_data_from(vm).data->info().sparse) {
      w.read_back.insert(w.read_back.end(), {"--learn.tolerance", readable_text(kDenseTolerance)});
    }
    return w;
  }

 private:
  // The convergence measure: the L1 model change relative to the model's L1 norm (scale-free, so one tolerance
  // serves the dense HIGGS-like model of 29 weights and the hashed KDD-like one of 2^18).
  static double relative(const TracePoint& t) { return t.norm > 0 ? t.l1 / t.norm : t.l1 > 0 ? 1.0 : 0.0; }
  static void write_point(std::ostream& o, const TracePoint& t, Task task) {
    const auto old = o.precision(10);
    o << static_cast<std::uint64_t>(t.count) << ',' << t.seconds << ',' << t.l1 << ',' << relative(t) << ',' << t.norm
      << ',' << (t.count > 0 ? t.loss_sum / t.count : 0) << ',' << prediction_rate(task, t.correct, t.count) << '\n';
    o.precision(old);
  }

  HoldoutResult evaluate_holdout(const Eigen::VectorXd& w) const {
    return ml::evaluate(config_, w, *data_, holdout_begin_, holdout_end_);
  }

  std::uint64_t items_ = 0, holdout_begin_ = 0, holdout_end_ = 0;
  std::vector<std::string> cautions_;  // topology(): cautions() for these options
  bool lossy_ = false;                 // mode none: a failure may lose a copy's model
  double tolerance_ = kDenseTolerance;
  std::uint64_t window_ = 5;
  Params params_;
  std::shared_ptr<const Dataset> data_;
  LearnerConfig config_;
  ReadStats read_;
};

}  // namespace

std::unique_ptr<Job> make_learn_job() { return std::make_unique<LearnJob>(); }

}  // namespace afs::ml
