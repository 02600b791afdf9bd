// Runs the heavy-hitter topology (zipf -> count-min-hh or space-saving-hh x n -> hh-merge) on the in-process cluster
// for property and integration tests, and exposes what they check: failure records, final operators, exact ground
// truth.
#pragma once

#include <memory>
#include <random>
#include <unordered_map>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/file_source.h"
#include "afstream/runtime/local_cluster.h"
#include "algorithms/heavy_hitters/evaluation.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/space_saving_hh.h"

namespace afs::testing {

struct HhSetup {
  std::uint64_t items = 400000;
  std::uint64_t keys = 20000;
  double skew = 1.1;
  std::uint64_t seed = 1;
  std::string weights = "unit";
  double phi = 2000;  // absolute
  int parallelism = 2;
  std::uint64_t width = 2000;
  std::uint64_t depth = 4;
  bool relay = false;                   // source -> relay -> count-min-hh: the sketches' upstream is not replayable
  std::string algorithm = "count-min";  // or "space-saving" (space-saving-hh with `capacity` keys)
  std::uint64_t capacity = 2000;
  double watch_margin = 0;  // count-min-hh's watch-margin (0: none; the jobs set count_min_watch_margin)
};

// A stateless pass-through operator: put between the source and the sketches, it makes their upstream a worker
// that forgets what its receivers acknowledged (unlike a replayable source).
class Relay final : public StatelessOperator {
 public:
  void process(const Item& item, Emitter& out) override { out.emit(item.key, item.value, item.time); }
};

struct HhRun {
  Topology topology;
  RunResult result;
  std::unordered_map<std::uint64_t, std::int64_t> reported;
  // Per hh worker: the counters, then the reported keys (sorted): the state, in a canonical form.
  // Space-Saving: the counters are replaced by the entries (key, count, error), largest count first.
  std::vector<std::vector<std::int64_t>> states;
  std::vector<hh::SpaceSaving> summaries;  // Space-Saving: per hh worker, its final summary
  std::int64_t min_margin = 0;             // min over keys of (estimate - exact weight); Space-Saving: upper bound
  std::vector<std::int64_t> compensation;  // per hh worker
  std::unordered_map<std::uint64_t, std::int64_t> exact;
  hh::HeavyHitterScore score;
};

inline Params hh_source_params(const HhSetup& s) {
  Params p;
  p.set("items", s.items).set("keys", s.keys).set("skew", s.skew).set("seed", s.seed).set("weights", s.weights);
  return p;
}

inline Topology hh_topology(const HhSetup& s) {
  Params cm;
  cm.set("width", s.width).set("depth", s.depth).set("phi", s.phi).set("seed", s.seed + 11);
  cm.set("max-weight", hh::max_weight(hh::parse_weights(s.weights)));
  if (s.watch_margin > 0) cm.set("watch-margin", s.watch_margin);
  Params ss;
  ss.set("capacity", s.capacity).set("phi", s.phi).set("max-weight", hh::max_weight(hh::parse_weights(s.weights)));
  const bool space_saving = s.algorithm == "space-saving";
  TopologyBuilder b;
  b.source("source", "zipf", hh_source_params(s));
  if (s.relay) b.stage("relay", "relay", Params()).forward().from("source");
  return b.stage("hh", space_saving ? "space-saving-hh" : "count-min-hh", space_saving ? ss : cm)
      .parallelism(s.parallelism)
      .key_by()
      .from(s.relay ? "relay" : "source")
      .stage("sink", "hh-merge", Params())
      .forward()
      .from("hh")
      .build();
}

// Random failure schedule: k events at uniform points of [0.05, 0.95] of the input, each killing a random
// non-empty subset of the workers (or all of them with probability all_prob).
inline std::vector<FailureEvent> random_failures(std::mt19937_64& rng, int k, std::uint64_t items, int workers,
                                                 double all_prob = 0.5) {
  std::vector<FailureEvent> v;
  std::uniform_real_distribution<double> at(0.05, 0.95);
  std::bernoulli_distribution all(all_prob);
  for (int i = 0; i < k; ++i) {
    FailureEvent e;
    e.at_items = static_cast<std::uint64_t>(at(rng) * static_cast<double>(items));
    if (all(rng)) {
      for (int w = 0; w < workers; ++w) e.workers.push_back(w);
    } else {
      std::uniform_int_distribution<int> pick(0, workers - 1);
      e.workers.push_back(pick(rng));
      if (all(rng)) e.workers.push_back(pick(rng));
    }
    v.push_back(e);
  }
  return v;
}

// k failures at uniform points of [0.05, 0.95] of the input, each killing a random non-empty subset of the
// sketch workers only (first .. first + n - 1). Behind a relay, per-worker bounds assume the relay itself does not
// fail: a failed relay's losses are its own (Gamma + L * beta), charged to it, not to the sketches.
inline std::vector<FailureEvent> sketch_failures(std::mt19937_64& rng, int k, std::uint64_t items, int first, int n) {
  std::vector<FailureEvent> v;
  std::uniform_real_distribution<double> at(0.05, 0.95);
  std::uniform_int_distribution<std::uint32_t> subset(1, (1u << n) - 1);
  for (int i = 0; i < k; ++i) {
    FailureEvent e;
    e.at_items = static_cast<std::uint64_t>(at(rng) * static_cast<double>(items));
    const auto mask = subset(rng);
    for (int w = 0; w < n; ++w) {
      if (mask & (1u << w)) e.workers.push_back(first + w);
    }
    v.push_back(e);
  }
  return v;
}

inline HhRun run_hh(const HhSetup& s, RunConfig config, std::shared_ptr<BackupStore> store = nullptr) {
  Registry registry;
  register_builtin_sources(registry);
  hh::register_heavy_hitters(registry);
  registry.add_operator("relay", "pass-through (tests)",
                        [](const Params&, const InstanceInfo&) { return std::make_unique<Relay>(); });
  HhRun out;
  out.topology = hh_topology(s);
  LocalCluster cluster(out.topology, registry, std::move(config), std::move(store));
  out.result = cluster.run();
  const int sink = out.topology.first_worker(out.topology.stage_index("sink"));
  out.reported = dynamic_cast<hh::HeavyHitterMerge&>(*cluster.final_operator(sink)).results();
  const int first = out.topology.first_worker(out.topology.stage_index("hh"));
  out.exact = hh::exact_weights(hh_source_params(s));
  out.score = hh::score_heavy_hitters(out.reported, out.exact, s.phi);
  if (s.algorithm == "space-saving") {
    for (int i = 0; i < s.parallelism; ++i) {
      auto& op = dynamic_cast<hh::SpaceSavingHeavyHitters&>(*cluster.final_operator(first + i));
      std::vector<std::int64_t> state;
      for (const auto& e : op.summary().entries()) {
        state.insert(state.end(), {static_cast<std::int64_t>(e.key), e.count, e.error});
      }
      out.states.push_back(std::move(state));
      out.compensation.push_back(op.compensation());
      out.summaries.push_back(op.summary());
    }
    out.min_margin = INT64_MAX;
    for (const auto& [key, w] : out.exact) {
      const auto& summary = out.summaries[key_partition(key, out.summaries.size())];
      out.min_margin = std::min(out.min_margin, summary.upper_bound(key) - w);
    }
    return out;
  }
  std::vector<hh::CountMinHeavyHitters*> ops;
  for (int i = 0; i < s.parallelism; ++i) {
    auto& op = dynamic_cast<hh::CountMinHeavyHitters&>(*cluster.final_operator(first + i));
    std::vector<std::int64_t> state = op.counters();
    for (auto k : op.reported_keys()) state.push_back(static_cast<std::int64_t>(k));
    out.states.push_back(std::move(state));
    out.compensation.push_back(op.compensation());
    ops.push_back(&op);
  }
  out.min_margin = INT64_MAX;
  for (const auto& [key, w] : out.exact) {
    const auto* op = ops[key_partition(key, ops.size())];
    out.min_margin = std::min(out.min_margin, op->estimate(key) - w);
  }
  return out;
}

}  // namespace afs::testing
