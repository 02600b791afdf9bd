// `afstream run --job nexmark-hot-items`: the job's options, its topology (nexmark -> count-min-hh -> hh-merge) and
// its evaluation against the exact bid counts of the generated stream (hot_items.csv).
#include "algorithms/nexmark/nexmark_job.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "algorithms/heavy_hitters/evaluation.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/nexmark/nexmark.h"
#include "algorithms/nexmark/nexmark_source.h"

namespace po = boost::program_options;

namespace afs::nexmark {

namespace {

std::string show(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

class HotItemsJob final : public Job {
 public:
  std::string name() const override { return "nexmark-hot-items"; }
  std::string description() const override {
    return "NEXMark query 5 (hot items): the auctions with the most bids, as Count-Min heavy hitters over the bid "
           "stream; precision, recall, average relative error (PAPER Theorem 2)";
  }

  void add_options(po::options_description& o) const override {
    const NexmarkParams d;
    o.add_options()("nexmark.events", po::value<std::uint64_t>()->default_value(0),
                    "events in the stream, all kinds (0: --items)")(
        "nexmark.person-proportion", po::value<std::uint64_t>()->default_value(d.person_proportion),
        "persons per epoch (>= 1)")("nexmark.auction-proportion",
                                    po::value<std::uint64_t>()->default_value(d.auction_proportion),
                                    "auctions per epoch (>= 1)")(
        "nexmark.bid-proportion", po::value<std::uint64_t>()->default_value(d.bid_proportion), "bids per epoch (>= 1)")(
        "nexmark.hot-auction-ratio", po::value<std::uint64_t>()->default_value(d.hot_auction_ratio),
        "a bid is on the hot auction with probability 1 - 1/ratio (>= 1)")(
        "nexmark.hot-auction-span", po::value<std::uint64_t>()->default_value(d.hot_auction_span),
        "the hot auction is the newest id rounded down to a multiple of this (>= 1)")(
        "nexmark.in-flight-auctions", po::value<std::uint64_t>()->default_value(d.in_flight_auctions),
        "other bids go to one of the newest in-flight-auctions + 1 auctions")(
        "nexmark.phi", real_value(0),
        "hot-item threshold: an auction is hot if its bids exceed phi (a fraction of all bids if < 1, a count if "
        ">= 1; 0: half the expected bids of a hot auction)")(
        "nexmark.width", po::value<std::uint64_t>()->default_value(65536), "Count-Min width w (0: from epsilon)")(
        "nexmark.depth", po::value<std::uint64_t>()->default_value(4), "Count-Min depth r (0: from delta)")(
        "nexmark.epsilon", real_value(0), "Count-Min error epsilon (sizes the width if > 0)")(
        "nexmark.delta", real_value(0), "Count-Min confidence delta (sizes the depth if > 0)")(
        "nexmark.parallelism", po::value<int>()->default_value(2), "parallel count-min-hh workers (keyed by auction)")(
        "nexmark.sources", po::value<int>()->default_value(1), "parallel source instances");
  }

  Topology topology(const po::variables_map& vm, const RunConfig& run) override {
    const auto events_opt = vm["nexmark.events"].as<std::uint64_t>();
    events_ = events_opt > 0 ? events_opt : vm["items"].as<std::uint64_t>();
    if (events_ == 0) throw ConfigError("nexmark.events: expected > 0 (or --items > 0)");
    source_params_ = Params()
                         .set("events", events_)
                         .set("seed", vm["seed"].as<std::uint64_t>())
                         .set("kinds", "bids")
                         .set("value", "count");
    std::uint64_t epoch = 0;
    for (const char* name : {"person-proportion", "auction-proportion", "bid-proportion", "hot-auction-ratio",
                             "hot-auction-span", "in-flight-auctions"}) {
      const std::string option = std::string("nexmark.") + name;
      const auto v = vm[option].as<std::uint64_t>();
      const bool proportion = option.find("proportion") != std::string::npos;
      if (v < 1 && option != "nexmark.in-flight-auctions") {
        throw ConfigError(option + ": expected >= 1, got 0");
      }
      if (proportion) epoch += std::min<std::uint64_t>(v, Generator::kMaxEpoch + 1);
      source_params_.set(name, v);
    }
    if (epoch > Generator::kMaxEpoch) {
      throw ConfigError("nexmark.person-proportion + auction-proportion + bid-proportion: expected at most " +
                        std::to_string(Generator::kMaxEpoch) + ", got " + std::to_string(epoch));
    }
    const NexmarkParams gp = nexmark_params(source_params_);
    (void)Generator(gp);  // what is left to check (events <= INT64_MAX) names itself
    bids_ = NexmarkSource::total_items(source_params_);
    if (bids_ == 0) throw ConfigError("nexmark.events: " + std::to_string(events_) + " events hold no bid");

    const double phi = vm["nexmark.phi"].as<double>();
    if (!(phi >= 0 && std::isfinite(phi))) throw ConfigError("nexmark.phi: expected >= 0 and finite, got " + show(phi));
    if (phi == 0) {
      // Half of what a hot auction collects while it is hot: B (1 - 1/ratio) bids per epoch for span / A epochs.
      if (gp.hot_auction_ratio < 2) {
        throw ConfigError("nexmark.phi: 0 (automatic) needs nexmark.hot-auction-ratio >= 2; give phi explicitly");
      }
      phi_ = 0.5 * static_cast<double>(gp.bid_proportion) * (1.0 - 1.0 / static_cast<double>(gp.hot_auction_ratio)) *
             static_cast<double>(gp.hot_auction_span) / static_cast<double>(gp.auction_proportion);
    } else {
      phi_ = phi < 1 ? phi * static_cast<double>(bids_) : phi;
    }

    const auto width = vm["nexmark.width"].as<std::uint64_t>();
    const auto depth = vm["nexmark.depth"].as<std::uint64_t>();
    const auto eps = vm["nexmark.epsilon"].as<double>();
    const auto delta = vm["nexmark.delta"].as<double>();
    if (!(eps >= 0 && eps < 1)) throw ConfigError("nexmark.epsilon: expected 0 <= epsilon < 1, got " + show(eps));
    if (!(delta >= 0 && delta < 1)) throw ConfigError("nexmark.delta: expected 0 <= delta < 1, got " + show(delta));
    if (width == 0 && eps == 0) throw ConfigError("nexmark.width: must be > 0 (or give nexmark.epsilon)");
    if (depth == 0 && delta == 0) throw ConfigError("nexmark.depth: must be > 0 (or give nexmark.delta)");
    const int par = vm["nexmark.parallelism"].as<int>();
    const int sources = vm["nexmark.sources"].as<int>();
    if (par < 1) throw ConfigError("nexmark.parallelism: expected >= 1, got " + std::to_string(par));
    if (sources < 1) throw ConfigError("nexmark.sources: expected >= 1, got " + std::to_string(sources));

    Params cm;
    cm.set("width", width).set("depth", depth).set("phi", phi_).set("seed", vm["seed"].as<std::uint64_t>() * 7919 + 3);
    cm.set("max-weight", std::int64_t{1});  // every bid counts 1: alpha = 1
    // As in the heavy-hitters job: auctions are watched from phi minus the most that failures can take from one
    // copy's counters, so a hot auction whose crossing bid was lost is still found (theorem2-count-min.md, CM-R';
    // count_min_watch_margin). The sketches read straight from the replayable source: phi / 4, not Theta + L / n.
    // Set in every mode, so that every mode reports the same auctions without failures (Proposition CM0).
    cm.set("watch-margin", hh::count_min_watch_margin(run.bounds.theta, run.bounds.l, 1, par, phi_, true));
    if (eps > 0) cm.set("epsilon", eps);
    if (delta > 0) cm.set("delta", delta);
    try {
      hh::CountMinHeavyHitters::validate(cm);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("nexmark.width/depth/epsilon/delta: ") + e.what());
    }
    return TopologyBuilder()
        .source("source", "nexmark", source_params_)
        .parallelism(sources)
        .stage("hh", "count-min-hh", cm)
        .parallelism(par)
        .key_by()
        .from("source")
        .stage("sink", "hh-merge", Params())
        .forward()
        .from("hh")
        .build();
  }

  std::uint64_t total_items() const override { return bids_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    const Generator gen(nexmark_params(source_params_));
    const auto exact = gen.exact_bid_counts(events_);
    auto* merge = dynamic_cast<hh::HeavyHitterMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("nexmark-hot-items: the sink did not finish");
    const auto reported = merge->results();
    const auto s = hh::score_heavy_hitters(reported, exact, phi_);
    if (!out_dir.empty()) {
      // Most bids first (then by auction id): the same file whatever order the sink's table holds them in.
      std::vector<std::pair<std::uint64_t, std::int64_t>> rows(reported.begin(), reported.end());
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
      std::ofstream f(out_dir + "/hot_items.csv");
      f << "auction,estimate,exact\n";
      for (const auto& [auction, estimate] : rows) {
        const auto it = exact.find(auction);
        f << auction << ',' << estimate << ',' << (it == exact.end() ? 0 : it->second) << '\n';
      }
      close_checked(f, out_dir + "/hot_items.csv");
    }
    return {{"precision", s.precision},
            {"recall", s.recall},
            {"are", s.are},
            {"reported", static_cast<double>(s.reported)},
            {"true_heavy", static_cast<double>(s.true_heavy)},
            {"phi", phi_}};
  }

  std::vector<std::string> score_names() const override {
    return {"precision", "recall", "are", "reported", "true_heavy", "phi"};
  }

 private:
  std::uint64_t events_ = 0, bids_ = 0;
  double phi_ = 0;
  Params source_params_;
};

}  // namespace

std::unique_ptr<Job> make_hot_items_job() { return std::make_unique<HotItemsJob>(); }

}  // namespace afs::nexmark
