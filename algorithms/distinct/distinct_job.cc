// `afstream run --job distinct`: HyperLogLog over a Zipf stream (issue 4), its options, topology and evaluation.
#include "algorithms/distinct/distinct_job.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "algorithms/distinct/distinct_operators.h"
#include "algorithms/distinct/hyperloglog.h"
#include "algorithms/heavy_hitters/hh_operators.h"

namespace afs::distinct {

namespace po = boost::program_options;

namespace {

class DistinctJob final : public Job {
 public:
  std::string name() const override { return "distinct"; }
  std::string description() const override {
    return "HyperLogLog distinct count over a Zipf stream: relative error against the exact count";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("distinct.keys", po::value<std::uint64_t>()->default_value(1000000),
                    "key space of the Zipf stream")("distinct.skew", real_value(0.9), "Zipf skew s")(
        "distinct.precision", po::value<int>()->default_value(12), "2^precision registers (4..18)")(
        "distinct.epsilon", real_value(0), "relative standard error (sizes the precision if > 0)")(
        "distinct.parallelism", po::value<int>()->default_value(2), "parallel distinct-hll workers (keyed)");
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    items_ = vm["items"].as<std::uint64_t>();
    const auto seed = vm["seed"].as<std::uint64_t>();
    const int par = vm["distinct.parallelism"].as<int>();
    if (par < 1) throw ConfigError("distinct.parallelism: expected >= 1, got " + std::to_string(par));
    Params hll;
    hll.set("seed", seed * 31 + 7);
    if (vm["distinct.epsilon"].as<double>() > 0) {
      hll.set("epsilon", vm["distinct.epsilon"].as<double>());
    } else {
      hll.set("precision", static_cast<std::int64_t>(vm["distinct.precision"].as<int>()));
    }
    precision_ = precision_of(hll);  // ConfigError naming the range before anything starts
    // Theta is in register ranks here (at most 64 - p + 1): a Theta as large as the default, meant for byte
    // counters, would let a failure lose every register within the bound, so it is refused rather than obeyed.
    const int max_rank = HyperLogLog::max_rank(precision_);
    if (run.mode == FtMode::Approx && run.bounds.theta >= max_rank) {
      std::ostringstream theta;
      theta << run.bounds.theta;
      throw ConfigError("ft.state-divergence-max (Theta): " + theta.str() +
                        " is not below the largest HyperLogLog register rank, " + std::to_string(max_rank) +
                        ", so it would protect nothing; the distinct job measures divergence in ranks: use e.g. "
                        "--ft.theta 8");
    }
    source_params_ = Params()
                         .set("items", items_)
                         .set("keys", vm["distinct.keys"].as<std::uint64_t>())
                         .set("skew", vm["distinct.skew"].as<double>())
                         .set("seed", seed)
                         .set("weights", "unit");
    return TopologyBuilder()
        .source("source", "zipf", source_params_)
        .stage("hll", "distinct-hll", hll)
        .parallelism(par)
        .key_by()
        .from("source")
        .stage("sink", "hll-merge", Params().set("precision", static_cast<std::int64_t>(precision_)))
        .forward()
        .from("hll")
        .build();
  }

  std::uint64_t total_items() const override { return items_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    const double exact = static_cast<double>(hh::exact_weights(source_params_).size());
    auto* merge = dynamic_cast<HllMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("distinct: the sink did not finish");
    const double estimate = merge->estimate();
    const double rel = exact > 0 ? estimate / exact - 1 : 0;
    if (!out_dir.empty()) {
      std::ofstream f(out_dir + "/distinct.csv");
      f << "estimate,exact,relative_error,standard_error\n"
        << estimate << ',' << exact << ',' << rel << ',' << HyperLogLog::standard_error(precision_) << '\n';
    }
    return {{"estimate", estimate},
            {"exact", exact},
            {"relative_error", rel},
            {"standard_error", HyperLogLog::standard_error(precision_)}};
  }

  std::vector<std::string> score_names() const override {
    return {"estimate", "exact", "relative_error", "standard_error"};
  }

 private:
  std::uint64_t items_ = 0;
  int precision_ = 12;
  Params source_params_;
};

}  // namespace

std::unique_ptr<Job> make_distinct_job() { return std::make_unique<DistinctJob>(); }

}  // namespace afs::distinct
