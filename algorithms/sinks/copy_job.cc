// `afstream run --job copy`: zipf source -> pass-through x copy.relays (keyed) -> exactly-once-sink (or count-sink)
// x copy.sink-parallelism (keyed); its options, topology, and the check of the database against the stream.
#include "algorithms/sinks/copy_job.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/topology.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/zipf.h"
#include "algorithms/sinks/effect_db.h"
#include "algorithms/sinks/sink_operators.h"

namespace afs::sinks {

namespace po = boost::program_options;

namespace {

class CopyJob final : public Job {
 public:
  std::string name() const override { return "copy"; }
  std::string description() const override {
    return "copies a Zipf stream into a RocksDB table through the exactly-once sink, and checks every item is there "
           "once";
  }

  void add_options(po::options_description& o) const override {
    o.add_options()("copy.db", path_value("DIR"),
                    "directory of the effects database (required with copy.sink exactly-once; use a new one per "
                    "run: effects already there count as wrong or duplicate)")(
        "copy.sink", po::value<std::string>()->default_value("exactly-once"),
        "exactly-once (write to copy.db) | count (count only: what the database costs)")(
        "copy.relays", po::value<int>()->default_value(2), "pass-through workers between source and sink (0: none)")(
        "copy.sink-parallelism", po::value<int>()->default_value(1), "sink workers (each writes copy.db/part-I)")(
        "copy.flush-every", po::value<std::uint64_t>()->default_value(4096),
        "items a sink buffers at most before a write (it always writes before a state backup)")(
        "copy.sync", po::value<bool>()->default_value(false)->implicit_value(true),
        "fsync every write (survives a machine crash)")(
        "copy.verify", po::value<bool>()->default_value(true)->implicit_value(true),
        "read the database back and check every source item's effect is there exactly once")(
        "copy.keys", po::value<std::uint64_t>()->default_value(100000), "key space of the Zipf stream")(
        "copy.skew", real_value(0.9), "Zipf skew s");
  }

  Topology topology(const po::variables_map& vm, const RunConfig&) override {
    items_ = vm["items"].as<std::uint64_t>();
    const auto kind = vm["copy.sink"].as<std::string>();
    if (kind != "exactly-once" && kind != "count") {
      throw ConfigError("copy.sink: expected exactly-once or count, got '" + kind + "'");
    }
    writes_ = kind == "exactly-once";
    const int relays = vm["copy.relays"].as<int>();
    if (relays < 0 || relays > 64) throw ConfigError("copy.relays: expected 0..64, got " + std::to_string(relays));
    sinks_ = vm["copy.sink-parallelism"].as<int>();
    if (sinks_ < 1 || sinks_ > 64) {
      throw ConfigError("copy.sink-parallelism: expected 1..64, got " + std::to_string(sinks_));
    }
    verify_ = vm["copy.verify"].as<bool>() && writes_;
    const auto flush_every = vm["copy.flush-every"].as<std::uint64_t>();
    if (flush_every < 1 || flush_every > (std::uint64_t{1} << 24)) {
      throw ConfigError("copy.flush-every: expected 1..16777216 items, got " + std::to_string(flush_every));
    }
    Params sink;
    sink.set("flush-every", flush_every);
    if (writes_) {
      const auto db = vm["copy.db"].as<std::string>();
      if (db.empty()) throw ConfigError("copy.db: missing: the directory of the effects database (--copy.db DIR)");
      // Worker processes get the same options: an absolute path means the same directory for all of them.
      db_ = std::filesystem::absolute(db).string();
      sink.set("path", db_).set("sync", vm["copy.sync"].as<bool>() ? "true" : "false");
    }
    hh::check_zipf_options("copy.keys", vm["copy.keys"].as<std::uint64_t>(), "copy.skew", vm["copy.skew"].as<double>());
    source_params_ = Params()
                         .set("items", items_)
                         .set("keys", vm["copy.keys"].as<std::uint64_t>())
                         .set("skew", vm["copy.skew"].as<double>())
                         .set("seed", vm["seed"].as<std::uint64_t>())
                         .set("weights", "unit");
    (void)hh::zipf_params(source_params_);  // ConfigError naming a bad key space or skew before anything starts
    TopologyBuilder b;
    b.source("source", "zipf", source_params_);
    if (relays > 0) b.stage("relay", "pass-through", Params()).parallelism(relays).key_by().from("source");
    b.stage("sink", writes_ ? "exactly-once-sink" : "count-sink", sink)
        .parallelism(sinks_)
        .key_by()
        .from(relays > 0 ? "relay" : "source");
    return b.build();
  }

  std::uint64_t total_items() const override { return items_; }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    double sink_items = 0;
    std::uint64_t state_digest = 0;
    const int first = t.first_worker(t.stage_index("sink"));
    for (int w = first; w < first + sinks_; ++w) {
      auto* s = dynamic_cast<EffectSink*>(cluster.final_operator(w));
      if (!s) throw RuntimeError("copy: sink worker " + std::to_string(w) + " did not finish");
      sink_items += static_cast<double>(s->items());
      state_digest += s->digest();
    }
    Scores scores{{"sink_items", sink_items}};
    EffectCheck c;
    if (verify_) {
      const hh::ZipfGenerator gen(hh::zipf_params(source_params_));
      c = check_effects([&](const auto& fn) { read_effect_parts(db_, fn); }, items_,
                        [&](std::uint64_t p) { return gen.item_at(p); });
    }
    auto v = [&](std::uint64_t x) { return verify_ ? static_cast<double>(x) : -1.0; };
    const bool exactly_once = c.exactly_once() && c.records == items_;
    scores.insert(scores.end(), {{"effects", v(c.records)},
                                 {"missing", v(c.missing)},
                                 {"duplicates", v(c.duplicates)},
                                 {"wrong", v(c.wrong)},
                                 {"seq_gaps", v(c.seq_gaps)},
                                 {"exactly_once", verify_ ? (exactly_once ? 1.0 : 0.0) : -1.0},
                                 {"state_matches_db", verify_ ? (c.digest == state_digest ? 1.0 : 0.0) : -1.0}});
    if (!out_dir.empty()) {
      std::ofstream f(out_dir + "/copy.csv");
      for (std::size_t i = 0; i < scores.size(); ++i) f << (i ? "," : "") << scores[i].first;
      f << '\n';
      for (std::size_t i = 0; i < scores.size(); ++i)
        f << (i ? "," : "") << static_cast<std::int64_t>(scores[i].second);
      f << '\n';
      close_checked(f, out_dir + "/copy.csv");
    }
    return scores;
  }

  std::vector<std::string> score_names() const override {
    return {"sink_items", "effects", "missing", "duplicates", "wrong", "seq_gaps", "exactly_once", "state_matches_db"};
  }

 private:
  std::uint64_t items_ = 0;
  int sinks_ = 1;
  bool writes_ = true;
  bool verify_ = true;
  std::string db_;
  Params source_params_;
};

}  // namespace

std::unique_ptr<Job> make_copy_job() { return std::make_unique<CopyJob>(); }

}  // namespace afs::sinks
