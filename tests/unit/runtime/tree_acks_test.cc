// Ack mode (Storm style): a worker acknowledges an item's edge once a state backup that reflects it is confirmed;
// a StatelessOperator has no state, so its acknowledgements go out as soon as it has processed the items, with no
// backup at all but the end of stream's. (They waited for one every ft.ack-state-every items: word count's
// tokenizers, which see a few hundred chunks each, held every tree of the run open until it went idle, and a
// restarted source produced nearly its whole input again.)
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "afstream/core/operator.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"

namespace afs {
namespace {

class Range final : public Source {
 public:
  explicit Range(std::uint64_t n) : n_(n) {}
  std::uint64_t size() const override { return n_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override {
    std::size_t k = 0;
    for (; k < n && offset + k < n_; ++k) out[k] = Item{(offset + k) % 1000, 1, 0, 0};
    return k;
  }

 private:
  std::uint64_t n_;
};

class Relay final : public StatelessOperator {
 public:
  void process(const Item& item, Emitter& out) override { out.emit(item.key, item.value, item.time); }
};

class Count final : public StatelessOperator {
 public:
  double beta() const override { return 0; }
  void process(const Item&, Emitter&) override { ++count_; }
  std::uint64_t count_ = 0;
};

// A state with alpha 0 (as a parameter server whose step size is 0 reports): not stateless (Operator::stateless).
class AlphaZeroCount final : public Operator {
 public:
  void process(const Item&, Emitter&) override { ++count_; }
  double alpha() const override { return 0; }
  double beta() const override { return 0; }
  double divergence() const override { return 0; }
  void snapshot_full(ByteWriter& out) const override { out.put(count_); }
  void snapshot_delta(ByteWriter& out) const override { out.put(count_); }
  void mark_backed_up() override {}
  void restore_full(ByteReader& in) override { count_ = in.get<std::uint64_t>("count"); }
  void apply_delta(ByteReader& in) override { count_ = in.get<std::uint64_t>("count"); }
  double distance(const Operator& other) const override {
    const auto o = dynamic_cast<const AlphaZeroCount&>(other).count_;
    return o > count_ ? static_cast<double>(o - count_) : static_cast<double>(count_ - o);
  }
  std::uint64_t count_ = 0;
};

constexpr std::uint64_t kItems = 200'000;

TEST(TreeAcks, StatelessOperatorsAcknowledgeWithoutAStateBackup) {
  Registry r;
  r.add_source("range", "0..n", [](const Params&, const InstanceInfo&) { return std::make_unique<Range>(kItems); });
  r.add_operator("relay", "relay", [](const Params&, const InstanceInfo&) { return std::make_unique<Relay>(); });
  r.add_operator("count", "counts", [](const Params&, const InstanceInfo&) { return std::make_unique<Count>(); });
  const Topology t = TopologyBuilder()
                         .source("src", "range", Params())
                         .stage("relay", "relay", Params())
                         .from("src")
                         .stage("count", "count", Params())
                         .from("relay")
                         .build();
  RunConfig config;
  config.mode = FtMode::Ack;
  config.ack_state_every = 4096;
  LocalCluster cluster(t, r, config);
  const auto result = cluster.run();
  auto* c = dynamic_cast<Count*>(cluster.final_operator(t.first_worker(t.stage_index("count"))));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->count_, kItems);
  EXPECT_EQ(result.trees_replayed, 0u);
  for (const char* stage : {"relay", "count"}) {
    // The end of stream's backup only (was kItems / ack_state_every = 48 each).
    EXPECT_LE(cluster.counters(t.first_worker(t.stage_index(stage))).state_backups.load(), 1u) << stage;
  }
}

// Statelessness is declared (StatelessOperator), not read from alpha() == 0: a state whose alpha is 0 is still
// checkpointed every ft.ack-state-every items in ack mode (it was skipped as stateless, and a restart lost it).
TEST(TreeAcks, AStateWithAlphaZeroIsCheckpointed) {
  Registry r;
  r.add_source("range", "0..n", [](const Params&, const InstanceInfo&) { return std::make_unique<Range>(kItems); });
  r.add_operator("count", "counts",
                 [](const Params&, const InstanceInfo&) { return std::make_unique<AlphaZeroCount>(); });
  const Topology t =
      TopologyBuilder().source("src", "range", Params()).stage("count", "count", Params()).from("src").build();
  RunConfig config;
  config.mode = FtMode::Ack;
  config.ack_state_every = 4096;
  LocalCluster cluster(t, r, config);
  cluster.run();
  const int worker = t.first_worker(t.stage_index("count"));
  auto* c = dynamic_cast<AlphaZeroCount*>(cluster.final_operator(worker));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->count_, kItems);
  EXPECT_FALSE(c->stateless());
  EXPECT_GE(cluster.counters(worker).state_backups.load(), kItems / 4096 / 2);
}

}  // namespace
}  // namespace afs
