// `afstream run --job join`: ripple join over two generated streams (issue 4, item 2), its options, topology and
// evaluation against the exact join (PAPER: online join, Theorem 3).
#include "algorithms/join/join_job.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "algorithms/join/join_generator.h"
#include "algorithms/join/join_operators.h"

namespace afs::join {

namespace po = boost::program_options;

namespace {

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

class JoinJob final : public Job {
 public:
  std::string name() const override { return "join"; }
  std::string description() const override {
    return "ripple join (Bernoulli sampling) of two Zipf streams: COUNT/SUM estimate and Theorem 3 interval";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("join.r-items", po::value<std::uint64_t>()->default_value(0),
                    "tuples of stream R (0: half of --items)")(
        "join.s-items", po::value<std::uint64_t>()->default_value(0), "tuples of stream S (0: the rest of --items)")(
        "join.keys", po::value<std::uint64_t>()->default_value(100000), "join key space")(
        "join.skew", real_value(1.0), "Zipf skew of the keys of both streams (0: uniform)")(
        "join.max-value", po::value<std::int64_t>()->default_value(100), "R values (for SUM) are in [1, max-value]")(
        "join.sample-rate", real_value(0.1), "Bernoulli sample rate p, in (0, 1]")(
        "join.confidence", real_value(0.95), "confidence level of the interval, in (0, 1)")(
        "join.parallelism", po::value<int>()->default_value(2), "parallel ripple-join workers (keyed by join key)");
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    const auto items = vm["items"].as<std::uint64_t>();
    const auto seed = vm["seed"].as<std::uint64_t>();
    auto r_items = vm["join.r-items"].as<std::uint64_t>();
    auto s_items = vm["join.s-items"].as<std::uint64_t>();
    if (r_items == 0 && s_items == 0) {
      r_items = items / 2;
      s_items = items - r_items;
    } else if (r_items == 0 || s_items == 0) {
      throw ConfigError("join.r-items / join.s-items: give both sizes (>= 1 each) or neither");
    }
    const int par = vm["join.parallelism"].as<int>();
    if (par < 1) throw ConfigError("join.parallelism: expected >= 1, got " + std::to_string(par));
    rate_ = vm["join.sample-rate"].as<double>();
    if (!(rate_ >= RippleJoin::kMinSampleRate && rate_ <= 1)) {
      throw ConfigError("join.sample-rate: expected a rate in [2^-53, 1] (the coin has 53 bits), got " + num(rate_));
    }
    confidence_ = vm["join.confidence"].as<double>();
    if (!(confidence_ > 0 && confidence_ < 1)) {
      throw ConfigError("join.confidence: expected a level in (0, 1), got " + num(confidence_));
    }
    source_params_ = Params()
                         .set("r-items", r_items)
                         .set("s-items", s_items)
                         .set("keys", vm["join.keys"].as<std::uint64_t>())
                         .set("skew", vm["join.skew"].as<double>())
                         .set("seed", seed)
                         .set("max-value", vm["join.max-value"].as<std::int64_t>());
    (void)JoinGenerator(join_stream_params(source_params_));  // ConfigError naming a bad join.* option
    items_ = r_items + s_items;
    // Theorem 3 is stated in samples: with failures planned in approximate mode, Theta + L + Gamma must be well
    // below the number of samples, or the widened interval is unbounded (n - Theta - L*beta - Gamma <= 0).
    const double expected_samples = rate_ * static_cast<double>(items_);
    const double loss = run.bounds.theta + run.bounds.l + run.bounds.gamma;
    const bool failures_planned = (vm.count("fail.count") && vm["fail.count"].as<int>() > 0) ||
                                  (vm.count("fail.random") && vm["fail.random"].as<int>() > 0) ||
                                  (vm.count("fail.at") && !vm["fail.at"].as<std::string>().empty()) ||
                                  !run.failures.empty();
    if (run.mode == FtMode::Approx && failures_planned && loss >= expected_samples / 2) {
      throw ConfigError("ft.state-divergence-max + ft.unbacked-items-max + ft.unacked-items-max (Theta + L + Gamma): " +
                        num(loss) + " is not below half the expected " + num(expected_samples) +
                        " samples, so the interval after a failure (Theorem 3: n - Theta - L - Gamma samples) "
                        "says nothing; the join job measures Theta in samples: use e.g. --ft.theta 100 --ft.l 50 "
                        "--ft.gamma 50");
    }
    const std::uint64_t sampler_seed = seed * 131 + 17;
    const Params rj = Params().set("rate", rate_).set("seed", sampler_seed);
    // The Gamma term of Theorem 3: outputs of the join's upstream a failure may lose (one sample each at most). The
    // sink charges it once any ripple-join copy has failed, as the theorem states it (behind a replayable source
    // it is slack; proofs/theorem3-ripple-join.md).
    const double gamma = run.mode == FtMode::Approx ? run.bounds.gamma : 0;
    const Params merge = Params()
                             .set("rate", rate_)
                             .set("confidence", confidence_)
                             .set("parallelism", static_cast<std::int64_t>(par))
                             .set("gamma", gamma);
    return TopologyBuilder()
        .source("source", "join-streams", source_params_)
        .stage("join", "ripple-join", rj)
        .parallelism(par)
        .key_by()
        .from("source")
        .stage("sink", "join-merge", merge)
        .forward()
        .from("join")
        .build();
  }

  std::uint64_t total_items() const override { return items_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    auto* merge = dynamic_cast<JoinMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("join: the sink did not finish");
    if (!merge->complete()) throw RuntimeError("join: the sink did not receive the results of every ripple-join copy");
    const JoinTruth exact = JoinGenerator(join_stream_params(source_params_)).exact();
    const auto count = merge->estimate(Aggregate::Count);
    const auto interval = merge->interval(Aggregate::Count);
    const auto sum = merge->estimate(Aggregate::Sum);
    const auto sum_interval = merge->interval(Aggregate::Sum);
    const double rel = exact.count > 0 ? count.estimate / exact.count - 1 : 0;
    const double sum_rel = exact.sum > 0 ? sum.estimate / exact.sum - 1 : 0;
    Scores s = {{"estimate", count.estimate},
                {"exact", exact.count},
                {"relative_error", rel},
                {"lower", interval.lower},
                {"upper", interval.upper},
                {"covered", interval.contains(exact.count) ? 1.0 : 0.0},
                {"samples", merge->moments().samples},
                {"sampled_pairs", merge->moments().pairs},
                {"lost_sample_bound", merge->lost_sample_bound()},
                {"missing_items", merge->missing_items()},
                {"sum_estimate", sum.estimate},
                {"sum_exact", exact.sum},
                {"sum_relative_error", sum_rel},
                {"sum_covered", sum_interval.contains(exact.sum) ? 1.0 : 0.0}};
    if (!out_dir.empty()) {
      std::ofstream f(out_dir + "/join.csv");
      f.precision(17);
      for (std::size_t i = 0; i < s.size(); ++i) f << (i ? "," : "") << s[i].first;
      f << '\n';
      for (std::size_t i = 0; i < s.size(); ++i) f << (i ? "," : "") << s[i].second;
      f << '\n';
      close_checked(f, out_dir + "/join.csv");
    }
    return s;
  }

  std::vector<std::string> score_names() const override {
    return {"estimate",
            "exact",
            "relative_error",
            "lower",
            "upper",
            "covered",
            "samples",
            "sampled_pairs",
            "lost_sample_bound",
            "missing_items",
            "sum_estimate",
            "sum_exact",
            "sum_relative_error",
            "sum_covered"};
  }

 private:
  std::uint64_t items_ = 0;
  double rate_ = 0.1;
  double confidence_ = 0.95;
  Params source_params_;
};

}  // namespace

std::unique_ptr<Job> make_join_job() { return std::make_unique<JoinJob>(); }

}  // namespace afs::join
