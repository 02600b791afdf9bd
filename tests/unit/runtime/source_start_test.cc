// A replayable source that starts before its receivers (the controller builds the workers one after another, and a
// receiver's operator may take a while to build: a KDD-like learner zeroes 4 MB) produces every item once. Until the
// fix, an approximate-mode source took its receivers' first incarnations for restarts and rewound to its committed
// position, producing again everything it had buffered for them (Worker::refresh_peers).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "afstream/core/operator.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"

namespace afs {
namespace {

// 0..n-1, counting every item read (a rewound source reads some again).
class CountingRange final : public Source {
 public:
  CountingRange(std::uint64_t n, std::atomic<std::uint64_t>& read) : n_(n), read_(read) {}
  std::uint64_t size() const override { return n_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override {
    std::size_t k = 0;
    for (; k < n && offset + k < n_; ++k) out[k] = Item{offset + k, 1, 0, 0};
    read_ += k;
    return k;
  }

 private:
  std::uint64_t n_;
  std::atomic<std::uint64_t>& read_;
};

// Counts its items; takes `build_ms` to build.
class SlowCount final : public StatelessOperator {
 public:
  explicit SlowCount(int build_ms) { std::this_thread::sleep_for(std::chrono::milliseconds(build_ms)); }
  void process(const Item&, Emitter&) override { ++count_; }
  std::uint64_t count_ = 0;
};

constexpr std::uint64_t kItems = 200'000;

TEST(SourceStart, AReplayableSourceProducesEachItemOnceWhenItsReceiversComeUpLate) {
  for (const auto mode : {FtMode::None, FtMode::Approx}) {
    std::atomic<std::uint64_t> read{0};
    Registry r;
    r.add_source("counting-range", "0..n, counting reads",
                 [&read](const Params&, const InstanceInfo&) { return std::make_unique<CountingRange>(kItems, read); });
    r.add_operator("slow-count", "counts; slow to build",
                   [](const Params&, const InstanceInfo&) { return std::make_unique<SlowCount>(100); });
    const Topology t = TopologyBuilder()
                           .source("src", "counting-range", Params())
                           .stage("count", "slow-count", Params())
                           .parallelism(2)
                           .key_by()
                           .from("src")
                           .build();
    RunConfig config;
    config.mode = mode;
    LocalCluster cluster(t, r, config);
    cluster.run();
    std::uint64_t counted = 0;
    for (int i = 0; i < 2; ++i) {
      auto* c = dynamic_cast<SlowCount*>(cluster.final_operator(t.first_worker(t.stage_index("count")) + i));
      ASSERT_NE(c, nullptr);
      counted += c->count_;
    }
    EXPECT_EQ(counted, kItems) << to_string(mode);
    EXPECT_EQ(read.load(), kItems) << to_string(mode) << ": items the source read";
  }
}

}  // namespace
}  // namespace afs
