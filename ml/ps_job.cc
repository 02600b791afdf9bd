// `afstream run --job ps`: parameter-server training with BSP / SSP / ASP (ps_operators.h), its options (learn.*),
// topology and evaluation (learn.csv in the run directory, as the learn job, plus the consistency columns).
#include "ml/ps_job.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"
#include "ml/ps_operators.h"

namespace afs::ml {

namespace po = boost::program_options;

namespace {

class PsJob final : public Job {
 public:
  std::string name() const override { return "ps"; }
  std::string description() const override {
    return "parameter-server training (logistic | linear | hinge | softmax; SGD | AdaGrad) with BSP, SSP or ASP "
           "consistency: progressive validation, held-out prediction rate, staleness observed";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("learn.task", po::value<std::string>()->default_value("logistic"),
                    "logistic | linear | hinge | softmax")(
        "learn.optimizer", po::value<std::string>()->default_value("sgd"), "sgd (eta0 / sqrt(t)) | adagrad")(
        "learn.eta0", po::value<double>()->default_value(0.5), "initial step size (> 0)")(
        "learn.l2", po::value<double>()->default_value(1e-6), "L2 regularisation lambda (>= 0)")(
        "learn.clip", po::value<double>()->default_value(10),
        "gradient bound H: each example's gradient is clipped to L2 norm H (> 0)")(
        "learn.data", po::value<std::string>()->default_value("higgs"), "higgs | kdd | logistic | linear | multiclass")(
        "learn.features", po::value<int>()->default_value(28), "features of the logistic/linear/multiclass data")(
        "learn.classes", po::value<int>()->default_value(4), "classes of the multiclass data")(
        "learn.noise", po::value<double>()->default_value(0.5), "label noise of the logistic/linear/multiclass data")(
        "learn.hash-bits", po::value<int>()->default_value(18), "hashed features 2^bits (kdd)")(
        "learn.holdout", po::value<std::uint64_t>()->default_value(10000), "held-out examples after the training ones")(
        "learn.workers", po::value<int>()->default_value(2), "ps-worker copies, data-parallel ([1, 1024])")(
        "learn.servers", po::value<int>()->default_value(2), "ps-server shards of the model ([1, 256])")(
        "learn.batch", po::value<std::int64_t>()->default_value(16), "examples per worker clock (mini-batch, >= 1)")(
        "learn.consistency", po::value<std::string>()->default_value("bsp"), "bsp | ssp | asp")(
        "learn.staleness", po::value<std::int64_t>()->default_value(5),
        "SSP: most clocks a worker may run ahead of the slowest ([0, 1000000])");
  }

  Topology topology(const po::variables_map& vm, const RunConfig&) override {
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
    const auto holdout = vm["learn.holdout"].as<std::uint64_t>();
    if (holdout < 1) throw ConfigError("learn.holdout: expected >= 1 held-out examples");
    const auto data = vm["learn.data"].as<std::string>();
    if (data == "file") throw ConfigError("learn.data: the ps job takes generated data (higgs, kdd, logistic, ...)");
    const double eta0 = vm["learn.eta0"].as<double>(), l2 = vm["learn.l2"].as<double>();
    if (!(eta0 > 0) || !std::isfinite(eta0)) throw ConfigError("learn.eta0: expected a finite number > 0");
    if (!(l2 >= 0) || !std::isfinite(l2)) throw ConfigError("learn.l2: expected a finite number >= 0");
    const double clip = vm["learn.clip"].as<double>();
    if (!(clip > 0) || !std::isfinite(clip)) throw ConfigError("learn.clip: expected a finite H > 0");
    items_ = vm["items"].as<std::uint64_t>();
    if (items_ < 1) throw ConfigError("items: expected >= 1 training examples");
    params_ = Params()
                  .set("data", data)
                  .set("seed", vm["seed"].as<std::uint64_t>())
                  .set("task", vm["learn.task"].as<std::string>())
                  .set("optimizer", vm["learn.optimizer"].as<std::string>())
                  .set("eta0", eta0)
                  .set("l2", l2)
                  .set("clip", clip)
                  .set("examples", items_ + holdout)
                  .set("workers", static_cast<std::int64_t>(workers))
                  .set("servers", static_cast<std::int64_t>(servers))
                  .set("batch", batch)
                  .set("consistency", consistency)
                  .set("staleness", staleness);
    if (data == "kdd") params_.set("hash-bits", static_cast<std::int64_t>(vm["learn.hash-bits"].as<int>()));
    if (data == "logistic" || data == "linear" || data == "multiclass") {
      params_.set("features", static_cast<std::int64_t>(vm["learn.features"].as<int>()))
          .set("noise", vm["learn.noise"].as<double>())
          .set("classes", static_cast<std::int64_t>(vm["learn.classes"].as<int>()));
    }
    try {
      data_ = dataset_from(params_);
      config_ = ps_config_from(params_, data_->info());
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("learn.") + e.what());
    }
    holdout_begin_ = items_;
    holdout_end_ = items_ + holdout;
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
    const double pv_acc = n > 0 ? merge->worker_total(kPsCorrect) / n : 0;
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
           "l1_to_true,consistency,staleness_bound,max_staleness,server_max_gap,worker_clocks\n"
        << n << ',' << pv_loss << ',' << pv_acc << ',' << h.examples << ',' << h.average_loss << ',' << h.accuracy
        << ',' << l1 << ',' << to_string(consistency_) << ',' << bound << ',' << staleness << ',' << gap << ','
        << clocks << '\n';
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
            {"server_steps_max", steps}};
  }

  std::vector<std::string> score_names() const override {
    return {"progressive_loss", "progressive_accuracy", "holdout_accuracy", "holdout_loss",  "l1_to_true",
            "staleness_bound",  "max_staleness",        "server_max_gap",   "worker_clocks", "server_steps_max"};
  }

 private:
  std::uint64_t items_ = 0, holdout_begin_ = 0, holdout_end_ = 0;
  Consistency consistency_ = Consistency::kBsp;
  std::int64_t staleness_ = 5;
  Params params_;
  std::shared_ptr<const Dataset> data_;
  PsConfig config_;
};

}  // namespace

std::unique_ptr<Job> make_ps_job() { return std::make_unique<PsJob>(); }

}  // namespace afs::ml
