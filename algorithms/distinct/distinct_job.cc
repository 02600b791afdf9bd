// `afstream run --job distinct`: HyperLogLog over a Zipf stream or a file's keys (issue 4), its options, topology
// and evaluation.
#include "algorithms/distinct/distinct_job.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_set>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/file_source.h"
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
    return "HyperLogLog distinct count over a Zipf stream (or a file's keys): relative error against the exact count";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("distinct.keys", po::value<std::uint64_t>()->default_value(1000000),
                    "key space of the Zipf stream")("distinct.skew", real_value(0.9), "Zipf skew s")(
        "distinct.precision", po::value<int>()->default_value(12), "2^precision registers (4..18)")(
        "distinct.epsilon", real_value(0),
        "relative standard error in (0, 1): sizes the precision in its place (0: use distinct.precision)")(
        "distinct.parallelism", po::value<int>()->default_value(2), "parallel distinct-hll workers (keyed)")(
        "distinct.input", path_value("FILE"),
        "count the distinct keys of this text file ('key' or 'key,value' per line; a key that is not an unsigned "
        "integer, such as a word or an address, is hashed) instead of a Zipf stream")(
        "distinct.on-error", po::value<std::string>()->default_value("fail"), "malformed input lines: fail | skip");
  }

  // Theta in register ranks (topology() refuses one at or above the largest rank): the general default, 1e5, meant
  // for byte counters, would be refused, and `afstream run --job distinct` failed as given.
  std::vector<std::pair<std::string, std::string>> run_defaults() const override {
    return {{"ft.state-divergence-max", "8"}};
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    items_ = vm["items"].as<std::uint64_t>();
    const auto seed = vm["seed"].as<std::uint64_t>();
    const int par = vm["distinct.parallelism"].as<int>();
    if (par < 1) throw ConfigError("distinct.parallelism: expected >= 1, got " + std::to_string(par));
    Params hll;
    hll.set("seed", seed * 31 + 7);
    // Any epsilon given (not the default 0) sizes the precision, so that one outside (0, 1) is refused rather than
    // silently ignored (--distinct.epsilon -1 ran at the default precision).
    if (vm["distinct.epsilon"].as<double>() != 0) {
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
    input_ = vm["distinct.input"].as<std::string>();
    on_error_ = vm["distinct.on-error"].as<std::string>();
    if (on_error_ != "fail" && on_error_ != "skip") {
      throw ConfigError("distinct.on-error: expected fail or skip, got '" + on_error_ + "'");
    }
    if (!input_.empty()) {
      std::size_t items = 0;
      try {
        items = FileSource::load(input_, on_error_ == "skip")->items.size();
      } catch (const InputError& e) {
        throw InputError(std::string("distinct.input: ") + e.what());
      }
      if (items == 0) throw InputError("distinct.input: no items in '" + input_ + "'");
      items_ = items;
      source_params_ = Params().set("path", input_).set("on-error", on_error_);
    } else {
      source_params_ = zipf_stream(vm);
    }
    return TopologyBuilder()
        .source("source", input_.empty() ? "zipf" : "file", source_params_)
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
    double exact = 0;
    if (input_.empty()) {
      exact = static_cast<double>(hh::exact_weights(source_params_).size());
    } else {
      std::unordered_set<std::uint64_t> keys;
      for (const auto& it : FileSource::load(input_, on_error_ == "skip")->items) keys.insert(it.key);
      exact = static_cast<double>(keys.size());
    }
    auto* merge = dynamic_cast<HllMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("distinct: the sink did not finish");
    const double estimate = merge->estimate();
    const double rel = exact > 0 ? estimate / exact - 1 : 0;
    if (!out_dir.empty()) {
      std::ofstream f(out_dir + "/distinct.csv");
      f.precision(17);  // as join.csv: the exact count in full (the default 6 digits wrote 1554468 as 1.55447e+06)
      f << "estimate,exact,relative_error,standard_error\n"
        << estimate << ',' << exact << ',' << rel << ',' << HyperLogLog::standard_error(precision_) << '\n';
      close_checked(f, out_dir + "/distinct.csv");
    }
    return {{"estimate", estimate},
            {"exact", exact},
            {"relative_error", rel},
            {"standard_error", HyperLogLog::standard_error(precision_)}};
  }

  std::vector<std::string> score_names() const override {
    return {"estimate", "exact", "relative_error", "standard_error"};
  }

  bool writes_input() const override { return true; }
  // The Zipf stream the options name, as the file source reads it back (distinct.input): the same keys, so the
  // same estimate and exact count.
  void check_input(const po::variables_map& vm, const std::string& format) override {
    if (const auto& in = vm["distinct.input"].as<std::string>(); !in.empty()) {
      throw ConfigError("distinct.input: the input is already a file ('" + in + "'), there is nothing to generate");
    }
    if (!format.empty() && format != "items") {
      throw ConfigError("gen.format: distinct writes its items as 'key,value' lines (format items), got '" + format +
                        "'");
    }
    check_options(vm);
  }
  WrittenInput write_input(const po::variables_map& vm, const std::string&, std::ostream& out, const std::string& path,
                           const GenProgress& progress) override {
    return {hh::write_zipf_stream(zipf_stream(vm), out, path, progress),
            "items",
            {"--distinct.input", path, "--seed", exact_text(vm["seed"].as<std::uint64_t>())}};
  }

 private:
  // The Zipf source's parameters the options name (unit weights).
  static Params zipf_stream(const po::variables_map& vm) {
    const auto items = vm["items"].as<std::uint64_t>();
    if (items == 0) throw ConfigError("items: expected > 0");
    hh::check_zipf_options("distinct.keys", vm["distinct.keys"].as<std::uint64_t>(), "distinct.skew",
                           vm["distinct.skew"].as<double>());
    return Params()
        .set("items", items)
        .set("keys", vm["distinct.keys"].as<std::uint64_t>())
        .set("skew", vm["distinct.skew"].as<double>())
        .set("seed", vm["seed"].as<std::uint64_t>())
        .set("weights", "unit");
  }

  std::string input_, on_error_;
  std::uint64_t items_ = 0;
  int precision_ = 12;
  Params source_params_;
};

}  // namespace

std::unique_ptr<Job> make_distinct_job() { return std::make_unique<DistinctJob>(); }

}  // namespace afs::distinct
