// `afstream run --job ps`: parameter-server training with BSP / SSP / ASP (ps_operators.h), its options (learn.*;
// the learner's and the data's are the learn job's, learn_options.h), topology and evaluation (learn.csv and
// model.csv in the run directory, as the learn job, plus the consistency columns).
#include "ml/ps_job.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "ml/learn_options.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"
#include "ml/ps_operators.h"

namespace afs::ml {

namespace po = boost::program_options;

namespace {

class PsJob final : public TrainingDataJob {
 public:
  std::string name() const override { return "ps"; }
  std::string description() const override {
    return "parameter-server training (logistic | linear | hinge | softmax; SGD | AdaGrad) with BSP, SSP or ASP "
           "consistency: progressive validation, held-out prediction rate, staleness observed";
  }

  // The servers are fed by the ps-workers, not by a replayable source: what a failure loses of their model is bounded
  // by Theta alone (their pushes are not sent again). The general default, 1e5, is meant for counters and never
  // backs a model up (its L2 moves by a few units in a whole run): a failure near the end of an SSP run took the
  // servers back to their start (held-out accuracy 0.64 -> 0.48). Theta 10, the paper's setting for the learners,
  // keeps the model (0.639 with and without that failure, 5 more state backups).
  std::vector<std::pair<std::string, std::string>> run_defaults() const override {
    // A ps-worker backs up at least every 1,000 examples: a restored one predicts again only those it processed
    // since, from the servers' current weights, which have learned from them (ml/README.md, "Progressive figures").
    return {{"ft.state-divergence-max", "10"}, {"ft.replay-items-max", "1000"}};
  }
  std::vector<std::string> cautions() const override { return cautions_; }

  void add_options(po::options_description& o) const override {
    add_learner_options(o);
    o.add_options()("learn.clip", real_value(10),
                    "gradient bound H: each example's gradient is clipped to L2 norm H (> 0)");
    add_data_options(o);
    o.add_options()("learn.workers", po::value<int>()->default_value(2), "ps-worker copies, data-parallel ([1, 1024])")(
        "learn.servers", po::value<int>()->default_value(2), "ps-server shards of the model ([1, 256])")(
        "learn.batch", po::value<std::int64_t>()->default_value(16), "examples per worker clock (mini-batch, >= 1)")(
        "learn.consistency", po::value<std::string>()->default_value("bsp"), "bsp | ssp | asp")(
        "learn.staleness", po::value<std::int64_t>()->default_value(5),
        "SSP: most clocks a worker may run ahead of the slowest ([0, 1000000])");
  }

  // learn.staleness bounds SSP alone: BSP's is 0 and ASP's unbounded (the summary's staleness_bound says so).
  std::vector<std::pair<std::string, std::string>> unused_options(const po::variables_map& vm) const override {
    auto unused = unused_data_options(vm);
    if (vm["learn.consistency"].as<std::string>() != "ssp") unused.emplace_back("learn.staleness", "ssp only");
    return unused;
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    const int workers = vm["learn.workers"].as<int>(), servers = vm["learn.servers"].as<int>();
    if (workers < 1 || workers > kMaxPsWorkers) {
      throw ConfigError("learn.workers: expected [1, 1024], got " + std::to_string(workers));
    }
    if (servers < 1 || servers > 256)
      throw ConfigError("learn.servers: expected [1, 256], got " + std::to_string(servers));
    const auto batch = vm["learn.batch"].as<std::int64_t>();
    if (batch < 1 || batch > (std::int64_t{1} << 30)) {
      throw ConfigError("learn.batch: expected examples per clock in [1, 2^30], got " + std::to_string(batch));
    }
    const auto staleness = vm["learn.staleness"].as<std::int64_t>();
    if (staleness < 0 || staleness > 1'000'000) {
      throw ConfigError("learn.staleness: expected clocks in [0, 1000000], got " + std::to_string(staleness));
    }
    const auto consistency = vm["learn.consistency"].as<std::string>();
    try {
      consistency_ = parse_consistency(consistency);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("learn.") + e.what());
    }
    staleness_ = staleness;
    cautions_.clear();
    // ASP's staleness is bounded only by what the channels hold (ml/README.md): with the general defaults the workers
    // compute from parameters hundreds to thousands of clocks old (a user's 5-class images: held-out 22% against
    // BSP's 69%; on a LIBSVM file the workers never received parameters at all).
    if (consistency_ == Consistency::kAsp && (run.flow_window > kAspQueue || run.queue_items > kAspQueue)) {
      cautions_.push_back(
          "learn.consistency asp: its staleness is bounded only by the queues, and at net.flow-window " +
          std::to_string(run.flow_window) + " / net.queue-items " + std::to_string(run.queue_items) +
          " the ps-workers may learn from parameters thousands of clocks old; --net.flow-window " +
          std::to_string(kAspQueue) + " --net.queue-items " + std::to_string(kAspQueue) + " keeps it near 100 clocks");
    }
    // Aligned barriers and the servers' feedback wait on each other: a server holds a ps-worker's push that came after
    // its barrier until the other ps-worker's barrier arrives, and that one waits, blocked, for parameters the server
    // sends only once it has both pushes (1 run in 6 of PsTraining's test never completed a checkpoint). Flink does
    // not checkpoint iterations either. ASP never waits.
    if (run.mode == FtMode::Checkpoint && consistency_ != Consistency::kAsp) {
      throw ConfigError("ft.mode checkpoint: the ps job under " + consistency +
                        " can deadlock (aligned barriers hold the pushes its servers must have before they send the "
                        "parameters the blocked ps-workers wait for); use exact, ask, microbatch, ack or approx, or "
                        "--learn.consistency asp");
    }
    const double clip = vm["learn.clip"].as<double>();
    if (!(clip > 0) || !std::isfinite(clip)) throw ConfigError("learn.clip: expected a finite H > 0");
    TrainingData t = training_data_from(vm);  // the data options, the file's or the generator's examples
    items_ = t.items;
    // A ps-worker's clock fits in 22 bits of the servers' keys (kMaxPsClock): a run with more clocks per worker than
    // that stopped with "clock ... reached the limit" once it got there (26 s into an ASP run of 4.2e6 examples at
    // batch 1; minutes under BSP), so refuse it now. The busiest worker reads ceil(items / workers) examples.
    const auto per_worker = (items_ + static_cast<std::uint64_t>(workers) - 1) / static_cast<std::uint64_t>(workers);
    const auto clocks = (per_worker + static_cast<std::uint64_t>(batch) - 1) / static_cast<std::uint64_t>(batch);
    if (clocks > static_cast<std::uint64_t>(kMaxPsClock)) {
      throw ConfigError("learn.batch: " + std::to_string(per_worker) + " examples per ps-worker in batches of " +
                        std::to_string(batch) + " make " + std::to_string(clocks) + " clocks, more than the " +
                        std::to_string(kMaxPsClock) + " a ps-worker can count; use a larger learn.batch (at least " +
                        std::to_string((per_worker + kMaxPsClock - 1) / kMaxPsClock) + ") or more learn.workers");
    }
    data_ = t.data;
    read_ = t.read;
    params_ = std::move(t.params);
    params_.set("clip", clip)
        .set("workers", static_cast<std::int64_t>(workers))
        .set("servers", static_cast<std::int64_t>(servers))
        .set("batch", batch)
        .set("consistency", consistency)
        .set("staleness", staleness);
    try {
      config_ = ps_config_from(params_, data_->info());
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("learn.") + e.what());
    }
    holdout_begin_ = items_;
    holdout_end_ = t.holdout_end;
    return TopologyBuilder()
        .source("source", "examples", Params().set("items", items_))
        .parallelism(workers)
        .stage("worker", "ps-worker", params_)
        .parallelism(workers)
        .forward()
        .from("source")
        .stage("server", "ps-server", params_)
        .parallelism(servers)
        .key_by()
        .from("worker")
        .stage("sink", "ps-merge", params_)
        .forward()
        .from("server")
        .build();
  }

  std::uint64_t total_items() const override { return items_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    auto* merge = dynamic_cast<PsMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("ps: the sink did not finish");
    if (merge->workers_reported() != merge->workers() || merge->servers_reported() != merge->servers()) {
      throw RuntimeError("ps: " + std::to_string(merge->workers_reported()) + " of " +
                         std::to_string(merge->workers()) + " workers and " +
                         std::to_string(merge->servers_reported()) + " of " + std::to_string(merge->servers()) +
                         " servers reported");
    }
    const Eigen::VectorXd& w = merge->model();
    const HoldoutResult h = ml::evaluate(config_.learner, w, *data_, holdout_begin_, holdout_end_);
    const double n = merge->worker_total(kPsCount);
    const double pv_loss = n > 0 ? merge->worker_total(kPsLossSum) / n : 0;
    const double pv_acc = prediction_rate(config_.learner.task, merge->worker_total(kPsCorrect), n);
    double l1 = std::numeric_limits<double>::quiet_NaN();
    if (const auto truth = true_model(params_)) l1 = l1_change(w, *truth);
    const double staleness = merge->max_of(kPsMaxStaleness, false);
    const double gap = merge->max_of(kPsMaxGap, true);
    const double steps = merge->max_of(kPsSteps, true);
    const double clocks = merge->worker_total(kPsClock);
    const double bound = consistency_ == Consistency::kBsp   ? 0
                         : consistency_ == Consistency::kSsp ? static_cast<double>(staleness_)
                                                             : std::numeric_limits<double>::infinity();
    if (!out_dir.empty()) {
      std::ofstream s(out_dir + "/learn.csv");
      s << "examples,progressive_loss,progressive_accuracy,holdout_examples,holdout_loss,holdout_accuracy,"
           "l1_to_true,consistency,staleness_bound,max_staleness,server_max_gap,worker_clocks,skipped_lines\n"
        << n << ',' << pv_loss << ',' << pv_acc << ',' << h.examples << ',' << h.average_loss << ',' << h.accuracy
        << ',' << l1 << ',' << to_string(consistency_) << ',' << bound << ',' << staleness << ',' << gap << ','
        << clocks << ',' << read_.skipped << '\n';
      close_checked(s, out_dir + "/learn.csv");
      write_skipped(out_dir + "/skipped.txt", read_);
      write_model(out_dir + "/model.csv", w);
    }
    return {{"progressive_loss", pv_loss},
            {"progressive_accuracy", pv_acc},
            {"holdout_accuracy", h.accuracy},
            {"holdout_loss", h.average_loss},
            {"l1_to_true", l1},
            {"staleness_bound", bound},
            {"max_staleness", staleness},
            {"server_max_gap", gap},
            {"worker_clocks", clocks},
            {"server_steps_max", steps},
            {"skipped_lines", static_cast<double>(read_.skipped)}};
  }

  std::vector<std::string> score_names() const override {
    return {"progressive_loss", "progressive_accuracy", "holdout_accuracy", "holdout_loss",
            "l1_to_true",       "staleness_bound",      "max_staleness",    "server_max_gap",
            "worker_clocks",    "server_steps_max",     "skipped_lines"};
  }

 private:
  std::uint64_t items_ = 0, holdout_begin_ = 0, holdout_end_ = 0;
  Consistency consistency_ = Consistency::kBsp;
  std::vector<std::string> cautions_;               // topology(): cautions() for these options
  static constexpr std::uint64_t kAspQueue = 2048;  // channel sizes that keep ASP's staleness near 100 clocks
  std::int64_t staleness_ = 5;
  Params params_;
  std::shared_ptr<const Dataset> data_;
  PsConfig config_;
  ReadStats read_;
};

}  // namespace

std::unique_ptr<Job> make_ps_job() { return std::make_unique<PsJob>(); }

}  // namespace afs::ml
