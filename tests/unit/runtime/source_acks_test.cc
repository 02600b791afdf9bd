// A worker fed by a source in approximate mode acknowledges it in steps of an eighth of the flow window, not every
// time it runs dry: a worker faster than its source waits after nearly every batch, and an ack per wait (what it
// sent until 2026-12-05: HyperLogLog's workers, one per 1,100 items) cost the source, the slowest thread there, a
// receive and a decode each (afstream/runtime/README.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "afstream/core/operator.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"

namespace afs {
namespace {

// 0..n-1, each item a little work to make (the worker that counts them is the faster of the two).
class SlowRange final : public Source {
 public:
  explicit SlowRange(std::uint64_t n) : n_(n) {}
  std::uint64_t size() const override { return n_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override {
    std::size_t k = 0;
    for (; k < n && offset + k < n_; ++k) {
      std::uint64_t x = offset + k;
      for (int r = 0; r < 64; ++r) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      out[k] = Item{x % 1000, 1, 0, 0};
    }
    return k;
  }

 private:
  std::uint64_t n_;
};

constexpr std::uint64_t kItems = 1'000'000;

class Count final : public StatelessOperator {
 public:
  void process(const Item&, Emitter&) override { ++count_; }
  std::uint64_t count_ = 0;
};

TEST(SourceAcks, AWorkerFasterThanItsSourceAcknowledgesItInStepsNotAtEveryWait) {
  Registry r;
  r.add_source("slow-range", "0..n, slowly",
               [](const Params&, const InstanceInfo&) { return std::make_unique<SlowRange>(kItems); });
  r.add_operator("count", "counts", [](const Params&, const InstanceInfo&) { return std::make_unique<Count>(); });
  const Topology t =
      TopologyBuilder().source("src", "slow-range", Params()).stage("count", "count", Params()).from("src").build();
  RunConfig config;
  config.mode = FtMode::Approx;
  LocalCluster cluster(t, r, config);
  cluster.run();
  const int w = t.first_worker(t.stage_index("count"));
  auto* c = dynamic_cast<Count*>(cluster.final_operator(w));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->count_, kItems);
  // Steps of flow_window / 8 (8,192 items: 122 of them), the first ack, the end of stream's, and at most one after each
  // wait that brought nothing (1 ms each: few, unless the host takes the source's core away). One per wait would be
  // about one per batch, 977.
  const std::uint64_t acks = cluster.counters(w).acks_sent.load();
  const std::uint64_t empty_waits = cluster.counters(w).empty_waits.load();
  EXPECT_GE(acks, kItems / (config.flow_window / 8) / 2);  // steps of 8,192 items each, give or take a batch
  EXPECT_LE(acks, kItems / (config.flow_window / 8) + 4 + empty_waits)
      << "acks sent to the source; " << empty_waits << " waits brought nothing";
}

}  // namespace
}  // namespace afs
