#include "algorithms/heavy_hitters/hh_job.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/runtime/file_source.h"
#include "algorithms/heavy_hitters/evaluation.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/space_saving_hh.h"

namespace po = boost::program_options;

namespace afs::hh {

namespace {

class HeavyHittersJob final : public Job {
 public:
  std::string name() const override { return "heavy-hitters"; }
  std::string description() const override {
    return "heavy hitters over a Zipf stream, by Count-Min (PAPER Theorem 2) or Space-Saving "
           "(proofs/space-saving.md): precision, recall, average relative error";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("hh.algorithm", po::value<std::string>()->default_value("count-min"),
                    "count-min (count-min-hh, sized by hh.width/hh.depth) or space-saving (space-saving-hh, sized "
                    "by hh.capacity)")(
        "hh.capacity", po::value<std::uint64_t>()->default_value(8000),
        "Space-Saving monitored keys k (unless hh.epsilon > 0, which sets k = ceil(1/epsilon))")(
        "hh.keys", po::value<std::uint64_t>()->default_value(1000000), "distinct keys in the Zipf stream")(
        "hh.skew", real_value(0.9), "Zipf skew s (P(rank k) ~ (k+1)^-s)")(
        "hh.width", po::value<std::uint64_t>()->default_value(8000),
        "Count-Min width w (unless hh.epsilon > 0, which sizes it)")(
        "hh.depth", po::value<std::uint64_t>()->default_value(4),
        "Count-Min depth r (unless hh.delta > 0, which sizes it)")(
        "hh.epsilon", real_value(0), "error epsilon (sizes the Count-Min width, or the Space-Saving capacity, if > 0)")(
        "hh.delta", real_value(0), "Count-Min confidence delta (sizes the depth if > 0)")(
        "hh.input", path_value("FILE"),
        "read items from this text file ('key' or 'key,value' per line) instead of generating a Zipf stream")(
        "hh.on-error", po::value<std::string>()->default_value("fail"), "malformed input lines: fail | skip")(
        "hh.weights", po::value<std::string>()->default_value("packet"),
        "item weights: packet (40..1500 bytes, as the paper's packet trace) or unit")(
        "hh.phi", real_value(1e-3),
        "heavy-hitter threshold: a key is heavy if its total weight exceeds phi (a fraction of the expected total "
        "weight if < 1)")(
        "hh.residual-share", real_value(kResidualShare),
        "Count-Min after failures: the most the residuals of its partial backups add back to every counter over all "
        "failures, as a share of phi (0 < share <= 0.25; smaller keeps keys just below phi from being reported on "
        "short streams, larger writes smaller backups)")(
        "hh.divergence-block", po::value<std::uint64_t>()->default_value(kCountMinDivergenceBlock),
        "Count-Min counters per divergence block (a power of two; 1: every counter's drift "
        "measured exactly, the cheapest; larger blocks bound runs of counters: more backups; lowered to "
        "divide hh.width)")("hh.parallelism", po::value<int>()->default_value(2),
                            "parallel count-min-hh workers (keyed)")("hh.sources", po::value<int>()->default_value(1),
                                                                     "parallel source instances");
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    items_ = vm["items"].as<std::uint64_t>();
    input_ = vm["hh.input"].as<std::string>();
    on_error_ = vm["hh.on-error"].as<std::string>();
    std::int64_t file_max_weight = 1;
    double file_total = 0;
    if (!input_.empty()) {
      std::shared_ptr<const FileItems> loaded;
      try {
        loaded = FileSource::load(input_, on_error_ == "skip");
      } catch (const InputError& e) {
        throw InputError(std::string("hh.input: ") + e.what());
      }
      const auto& all = loaded->items;
      if (all.empty()) throw InputError("hh.input: no items in '" + input_ + "'");
      items_ = all.size();
      std::int64_t sum = 0;  // every count, and the exact weights, are int64: their total must fit
      // The file and line of the i-th item, for the errors below (the items keep no line numbers).
      const auto where = [&](std::size_t i) {
        const auto [line, text] = FileSource::line_of(input_, on_error_ == "skip", i);
        return input_ + ":" + std::to_string(line) + ": '" + text + "'";
      };
      for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& it = all[i];
        if (it.value < 1) {
          throw InputError("hh.input: " + where(i) + ": item values must be >= 1 (weights), got " +
                           std::to_string(it.value));
        }
        if (__builtin_add_overflow(sum, it.value, &sum)) {
          throw InputError("hh.input: the item values add up to more than 2^63 - 1 at " + where(i) +
                           "; the counts would overflow");
        }
        file_max_weight = std::max(file_max_weight, it.value);
        file_total += static_cast<double>(it.value);
      }
    }
    const auto seed = vm["seed"].as<std::uint64_t>();
    if (input_.empty())
      check_zipf_options("hh.keys", vm["hh.keys"].as<std::uint64_t>(), "hh.skew", vm["hh.skew"].as<double>());
    const auto w = parse_weights(vm["hh.weights"].as<std::string>());
    const double phi = vm["hh.phi"].as<double>();
    if (!(phi > 0 && std::isfinite(phi)))
      throw ConfigError("hh.phi: expected > 0 and finite, got " + readable_text(phi));
    const double mean_weight = w == Weights::Packet ? (40.0 + 1500.0) / 2 : 1.0;
    const double total = input_.empty() ? static_cast<double>(items_) * mean_weight : file_total;
    phi_ = phi < 1 ? phi * total : phi;
    const std::int64_t alpha = input_.empty() ? max_weight(w) : file_max_weight;
    const std::string algorithm = vm["hh.algorithm"].as<std::string>();
    if (algorithm != "count-min" && algorithm != "space-saving") {
      throw ConfigError("hh.algorithm: expected count-min or space-saving, got '" + algorithm + "'");
    }
    const auto width = vm["hh.width"].as<std::uint64_t>();
    const auto depth = vm["hh.depth"].as<std::uint64_t>();
    const auto eps = vm["hh.epsilon"].as<double>();
    const auto delta = vm["hh.delta"].as<double>();
    // Written so that NaN is refused too (it compared false both ways, and ran on hh.width/hh.depth without a word).
    if (!(eps >= 0 && eps < 1)) throw ConfigError("hh.epsilon: expected 0 <= epsilon < 1");
    if (!(delta >= 0 && delta < 1)) throw ConfigError("hh.delta: expected 0 <= delta < 1");
    if (algorithm == "count-min" && width == 0 && eps == 0)
      throw ConfigError("hh.width: must be > 0 (or give hh.epsilon)");
    if (algorithm == "count-min" && depth == 0 && delta == 0)
      throw ConfigError("hh.depth: must be > 0 (or give hh.delta)");
    const auto capacity = vm["hh.capacity"].as<std::uint64_t>();
    if (algorithm == "space-saving" && capacity == 0 && eps == 0) {
      throw ConfigError("hh.capacity: must be > 0 (or give hh.epsilon)");
    }
    const int par = vm["hh.parallelism"].as<int>();
    const int sources = vm["hh.sources"].as<int>();
    if (par < 1) throw ConfigError("hh.parallelism: expected >= 1");
    if (sources < 1) throw ConfigError("hh.sources: expected >= 1");
    if (items_ == 0) throw ConfigError("items: expected > 0");
    if (const auto block = vm["hh.divergence-block"].as<std::uint64_t>(); !std::has_single_bit(block)) {
      throw ConfigError("hh.divergence-block: expected a power of two >= 1, got " + std::to_string(block));
    }

    const Params src = input_.empty() ? zipf_stream(vm) : Params().set("path", input_).set("on-error", on_error_);
    source_params_ = src;
    Params cm;
    cm.set("width", width).set("depth", depth).set("phi", phi_).set("seed", seed * 7919 + 1);
    cm.set("max-weight", alpha).set("divergence-block", vm["hh.divergence-block"].as<std::uint64_t>());
    // Here, not only in the operator's validate: NaN would reach it as the text "nan", which Params does not read.
    check_residual_share(vm["hh.residual-share"].as<double>());
    cm.set("residual-share", vm["hh.residual-share"].as<double>());
    // Theorem 2 after failures: keys are watched from phi minus the most that failures can take from one copy's
    // counters, so a heavy key whose crossing item was lost is still found (proofs/theorem2-count-min.md, CM-R';
    // count_min_watch_margin). The sketches read straight from the replayable source. Set in every mode, from the
    // same Theta and L: finish() reports every watched key above phi, so a margin in approx mode alone made its report
    // differ from mode none's and exact mode's without any failure (Proposition CM0).
    cm.set("watch-margin",
           count_min_watch_margin(run.bounds.theta, run.bounds.l, static_cast<double>(alpha), par, phi_, true));
    if (eps > 0) cm.set("epsilon", eps);
    if (delta > 0) cm.set("delta", delta);
    // Space-Saving: capacity (or epsilon), phi and max-weight; its report is made at the end from its summary, so it
    // needs no watch margin (proofs/space-saving.md).
    cautions_.clear();
    if (algorithm == "space-saving") {
      // Its guarantee (proofs/space-saving.md (3)): every key above N / k of an instance's weight N is monitored. A
      // phi below that, which the job accepts, may miss heavy hitters without any failure (recall 0.34-0.65 at
      // capacity 100 on 1e6 Zipf items).
      const double k = eps > 0 ? std::ceil(1 / eps) : static_cast<double>(capacity);  // as space-saving-hh sizes it
      const double guaranteed = total / (par * k);
      if (phi_ < guaranteed) {
        cautions_.push_back("hh.capacity: Space-Saving monitors " + readable_text(k) +
                            " keys per instance, which guarantees only the keys above an instance's weight / " +
                            readable_text(k) + " (about " + readable_text(guaranteed) + " here); hh.phi is " +
                            readable_text(phi_) + ", below that, so heavy hitters may be missed; hh.capacity " +
                            readable_text(std::ceil(total / phi_)) +
                            " (the total weight / phi) or more guarantees them");
      }
    }
    Params ss;
    ss.set("capacity", capacity).set("phi", phi_).set("max-weight", alpha);
    if (eps > 0) ss.set("epsilon", eps);
    // Fail fast on bad sketch parameters, before any thread starts (without building a sketch: a worker process
    // builds this topology at every start, and a big sketch costs milliseconds of its recovery).
    const bool space_saving = algorithm == "space-saving";
    try {  // the operators' parameters, named as the options that set them
      if (space_saving) {
        SpaceSavingHeavyHitters::validate(ss);
      } else {
        CountMinHeavyHitters::validate(cm);
      }
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      if (what.starts_with("hh.")) throw;  // it names its option already (hh.residual-share)
      throw ConfigError(std::string(space_saving ? "hh.capacity/epsilon: " : "hh.width/depth/epsilon/delta: ") + what);
    }
    return TopologyBuilder()
        .source("source", input_.empty() ? "zipf" : "file", src)
        .parallelism(sources)
        .stage("hh", space_saving ? "space-saving-hh" : "count-min-hh", space_saving ? ss : cm)
        .parallelism(par)
        .key_by()
        .from("source")
        .stage("sink", "hh-merge", Params())
        .forward()
        .from("hh")
        .build();
  }

  std::uint64_t total_items() const override { return items_; }
  std::vector<std::string> cautions() const override { return cautions_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    std::unordered_map<std::uint64_t, std::int64_t> exact;
    if (input_.empty()) {
      exact = exact_weights(source_params_);
    } else {
      for (const auto& it : FileSource::load(input_, on_error_ == "skip")->items) exact[it.key] += it.value;
    }
    const int sink = t.first_worker(t.stage_index("sink"));
    auto* merge = dynamic_cast<HeavyHitterMerge*>(cluster.final_operator(sink));
    if (!merge) throw RuntimeError("heavy-hitters: the sink did not finish");
    const auto reported = merge->results();
    const auto s = score_heavy_hitters(reported, exact, phi_);
    if (!out_dir.empty()) {
      // Largest estimate first (then by key): the same file whatever order the sink's table holds them in.
      std::vector<std::pair<std::uint64_t, std::int64_t>> rows(reported.begin(), reported.end());
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
      std::ofstream f(out_dir + "/heavy_hitters.csv");
      f << "key,estimate,exact\n";
      for (const auto& [k, v] : rows) {
        auto it = exact.find(k);
        f << k << ',' << v << ',' << (it == exact.end() ? 0 : it->second) << '\n';
      }
      close_checked(f, out_dir + "/heavy_hitters.csv");
    }
    return {{"precision", s.precision},
            {"recall", s.recall},
            {"are", s.are},
            {"reported", static_cast<double>(s.reported)},
            {"true_heavy", static_cast<double>(s.true_heavy)}};
  }

  std::vector<std::string> score_names() const override {
    return {"precision", "recall", "are", "reported", "true_heavy"};
  }

  std::vector<std::pair<std::string, std::string>> unused_options(const po::variables_map& vm) const override {
    std::vector<std::pair<std::string, std::string>> unused;
    if (vm["hh.algorithm"].as<std::string>() == "space-saving") {
      for (const char* key : {"hh.width", "hh.depth", "hh.delta", "hh.residual-share", "hh.divergence-block"}) {
        unused.emplace_back(key, "count-min only");
      }
      if (vm["hh.epsilon"].as<double>() > 0) unused.emplace_back("hh.capacity", "hh.epsilon > 0 sets the capacity");
    } else {
      unused.emplace_back("hh.capacity", "space-saving only");
      if (vm["hh.epsilon"].as<double>() > 0) unused.emplace_back("hh.width", "hh.epsilon > 0 sizes the width");
      if (vm["hh.delta"].as<double>() > 0) unused.emplace_back("hh.depth", "hh.delta > 0 sizes the depth");
    }
    if (!vm["hh.input"].as<std::string>().empty()) {
      for (const char* key : {"hh.keys", "hh.skew", "hh.weights"})
        unused.emplace_back(key, "the items come from hh.input");
    } else {
      unused.emplace_back("hh.on-error", "for hh.input only");
    }
    return unused;
  }

  bool writes_input() const override { return true; }
  // The Zipf stream the options name, every source instance's items in order, as the file source reads them back
  // (hh.input). Run on that file, the job counts the same items; only a relative hh.phi (< 1) moves a little, as it is
  // taken of the file's total weight instead of the expected one.
  void check_input(const po::variables_map& vm, const std::string& format) override {
    if (const auto& in = vm["hh.input"].as<std::string>(); !in.empty()) {
      throw ConfigError("hh.input: the input is already a file ('" + in + "'), there is nothing to generate");
    }
    if (!format.empty() && format != "items") {
      throw ConfigError("gen.format: heavy-hitters writes its items as 'key,value' lines (format items), got '" +
                        format + "'");
    }
    check_options(vm);
  }
  WrittenInput write_input(const po::variables_map& vm, const std::string&, std::ostream& out, const std::string& path,
                           const GenProgress& progress) override {
    return {write_zipf_stream(zipf_stream(vm), out, path, progress),
            "items",
            {"--hh.input", path, "--seed", exact_text(vm["seed"].as<std::uint64_t>())}};
  }

 private:
  // The Zipf source's parameters the options name (the run's stream, and what gen writes).
  static Params zipf_stream(const po::variables_map& vm) {
    return Params()
        .set("items", vm["items"].as<std::uint64_t>())
        .set("keys", vm["hh.keys"].as<std::uint64_t>())
        .set("skew", vm["hh.skew"].as<double>())
        .set("seed", vm["seed"].as<std::uint64_t>())
        .set("weights", vm["hh.weights"].as<std::string>());
  }

  std::uint64_t items_ = 0;
  double phi_ = 0;
  std::string input_, on_error_;
  Params source_params_;
  std::vector<std::string> cautions_;  // topology(): cautions() for these options
};

}  // namespace

std::unique_ptr<Job> make_heavy_hitters_job() { return std::make_unique<HeavyHittersJob>(); }

}  // namespace afs::hh
