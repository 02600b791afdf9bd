// The Theta rule's check schedule (DESIGN 3, Operator::divergence_bounded_by_alpha): an operator that declares its
// divergence moves by at most alpha per item is compared with theta only when the items since the last comparison
// could have used up the room left, and it is still backed up at exactly the items where per-item checking would
// back it up: just past the trigger, never more than alpha beyond it.
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"
#include "afstream/runtime/worker.h"
#include "afstream/state/tracked_array.h"
#include "algorithms/heavy_hitters/hh_operators.h"
#include "algorithms/heavy_hitters/space_saving_hh.h"
#include "algorithms/text/text_operators.h"

namespace afs {
namespace {

constexpr double kAlpha = 3;  // the zipf source's unit weights are 1; each item adds 1..3 to one counter

// 16 counters with max-abs divergence, fed 1 + (key % 3) per item: alpha = 3. Records the divergence at every
// backup it writes and how often the runtime asked for it.
class Stepper final : public Operator {
 public:
  explicit Stepper(bool bounded) : bounded_(bounded), counters_(16, Metric::MaxAbs) {}
  void process(const Item& item, Emitter&) override {
    ++items;
    counters_.add(item.key % 16, 1 + static_cast<std::int64_t>(item.key % 3));
  }
  double alpha() const override { return kAlpha; }
  double beta() const override { return 0; }
  bool divergence_bounded_by_alpha() const override { return bounded_; }
  double divergence() const override {
    ++divergence_calls;
    return counters_.divergence();
  }
  void snapshot_full(ByteWriter& out) const override {
    at_backup.push_back({items, counters_.divergence()});
    counters_.write_full(out);
  }
  void snapshot_delta(ByteWriter& out) const override {
    at_backup.push_back({items, counters_.divergence()});
    counters_.write_delta(out);
  }
  void mark_backed_up() override { counters_.mark_backed_up(); }
  void stop_tracking() override {
    ++stop_tracking_calls;
    counters_.stop_tracking();
  }
  void restore_full(ByteReader& in) override { counters_.read_full(in); }
  void apply_delta(ByteReader& in) override { counters_.apply_delta(in); }
  double distance(const Operator& other) const override {
    return counters_.distance(dynamic_cast<const Stepper&>(other).counters_);
  }

  struct Backup {
    std::uint64_t items;  // items processed when it was taken
    double divergence;
  };
  std::uint64_t items = 0;
  std::uint64_t stop_tracking_calls = 0;
  mutable std::uint64_t divergence_calls = 0;
  mutable std::vector<Backup> at_backup;

 private:
  bool bounded_;
  TrackedArray<std::int64_t> counters_;
};

struct Outcome {
  std::vector<Stepper::Backup> backups;
  std::uint64_t items = 0;
  std::uint64_t divergence_calls = 0;
  std::uint64_t stop_tracking_calls = 0;
};

Outcome run(bool bounded, double theta, FtMode mode = FtMode::Approx) {
  Registry registry;
  hh::register_heavy_hitters(registry);  // the zipf source
  registry.add_operator("stepper", "tests",
                        [bounded](const Params&, const InstanceInfo&) { return std::make_unique<Stepper>(bounded); });
  Params src;
  src.set("items", 20000).set("keys", 1000).set("skew", 1.0).set("seed", 5);
  const Topology t =
      TopologyBuilder().source("source", "zipf", src).stage("op", "stepper", Params()).from("source").build();
  RunConfig config;
  config.mode = mode;
  config.bounds = {theta, 1e9, 1e3};  // L out of the way: only the Theta rule backs up the state
  config.batch_items = 256;
  LocalCluster cluster(t, registry, config);
  cluster.run();
  auto* op = dynamic_cast<Stepper*>(cluster.final_operator(t.first_worker(t.stage_index("op"))));
  if (!op) throw std::runtime_error("no stepper");
  return {op->at_backup, op->items, op->divergence_calls, op->stop_tracking_calls};
}

TEST(ThetaCheck, BoundedOperatorsAreComparedRarelyAndBackedUpAtTheSameItems) {
  const double theta = 400;
  const double trigger = theta / 2;  // one copy starts at Theta / 2 (headroom 0)
  const Outcome every = run(false, theta);
  const Outcome skipping = run(true, theta);
  ASSERT_EQ(every.items, 20000u);
  ASSERT_EQ(skipping.items, 20000u);
  // Per-item checking asks once per item; with room for trigger / alpha items after each backup it asks far less.
  EXPECT_GE(every.divergence_calls, every.items);
  EXPECT_LT(skipping.divergence_calls, skipping.items / 4);
  // The Theta rule fires at the same items either way, each time just past the trigger.
  ASSERT_GT(every.backups.size(), 20u);
  ASSERT_EQ(skipping.backups.size(), every.backups.size());
  for (std::size_t i = 0; i < every.backups.size(); ++i) {
    EXPECT_EQ(skipping.backups[i].items, every.backups[i].items) << "backup " << i;
    EXPECT_EQ(skipping.backups[i].divergence, every.backups[i].divergence) << "backup " << i;
    const auto at = skipping.backups[i].items;
    if (at == 0 || at == skipping.items) continue;  // a backup at the start or at the end of the stream
    EXPECT_GT(skipping.backups[i].divergence, trigger) << "backup " << i;
    EXPECT_LE(skipping.backups[i].divergence, trigger + kAlpha) << "backup " << i;
  }
}

// Mode none costs nothing for backups (DESIGN 3): the runtime tells the operator to stop tracking before the first
// item, and never asks for its divergence or a backup. Every other mode leaves the tracking on.
TEST(ThetaCheck, ModeNoneStopsTheTrackingAndNeverAsks) {
  const Outcome none = run(true, 400, FtMode::None);
  EXPECT_EQ(none.items, 20000u);
  EXPECT_EQ(none.stop_tracking_calls, 1u);
  EXPECT_EQ(none.divergence_calls, 0u);
  EXPECT_TRUE(none.backups.empty());
  for (const FtMode mode : {FtMode::Approx, FtMode::Exact}) EXPECT_EQ(run(true, 400, mode).stop_tracking_calls, 0u);
  EXPECT_FALSE(run(true, 400, FtMode::Approx).backups.empty());
}

// Corollary P' (proofs/general-bounds.md): copies of an operator whose divergence combines by max, fed by key on
// every input, each start at Theta / 2; any other operator, or the same ones fed otherwise, at Theta / (2n).
TEST(ThetaCheck, CopiesCombiningByMaxStartAtHalfTheTheta) {
  Params src;
  src.set("items", 1000).set("keys", 100).set("skew", 1.0).set("seed", 5);
  RunConfig config;
  config.bounds = {1e4, 1e3, 1e3};
  const auto first_theta = [&](const Operator& op, bool keyed) {
    auto b = TopologyBuilder().source("source", "zipf", src).stage("op", "any", Params()).parallelism(4);
    const Topology t = (keyed ? b.key_by() : b.forward()).from("source").build();
    return threshold_schedule_of(t, config, t.first_worker(t.stage_index("op")), &op).current().theta;
  };
  Params cm;
  cm.set("width", 64).set("depth", 2).set("phi", 10).set("max-weight", 1);
  Params ss;
  ss.set("capacity", 16).set("phi", 10).set("max-weight", 1);
  const hh::CountMinHeavyHitters count_min(cm);
  const hh::SpaceSavingHeavyHitters space_saving(ss);
  const text::WordCount word_count(Params().set("max-weight", std::int64_t{1}));
  const text::WordCountMerge merge(Params().set("max-count", std::int64_t{100}));
  for (const Operator* op : std::initializer_list<const Operator*>{&count_min, &space_saving, &word_count}) {
    EXPECT_DOUBLE_EQ(first_theta(*op, true), 1e4 / 2);
    EXPECT_DOUBLE_EQ(first_theta(*op, false), 1e4 / 8);
  }
  EXPECT_DOUBLE_EQ(first_theta(merge, true), 1e4 / 8);  // wc-merge's max-abs: but it does not claim it
}

}  // namespace
}  // namespace afs
