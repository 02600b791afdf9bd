// Unit tests of the job topology (afstream/core/topology.h): the fluent builder, worker numbering, the channels
// made by key / forward / broadcast edges, stages_to_end (the m - i of DESIGN.md section 3) and validation errors.
#include "afstream/core/topology.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

// (from_worker, to_worker) of every channel, in channel order.
std::vector<std::pair<int, int>> edges(const Topology& t) {
  std::vector<std::pair<int, int>> v;
  for (const auto& c : t.channels()) v.emplace_back(c.from_worker, c.to_worker);
  return v;
}

Topology heavy_hitters(int sources, int hh, int sinks) {
  return TopologyBuilder()
      .source("gen", "zipf", Params{{"items", "1000"}})
      .parallelism(sources)
      .stage("hh", "count-min-hh", Params{{"phi", "10"}})
      .parallelism(hh)
      .key_by()
      .from("gen")
      .stage("merge", "hh-merge")
      .parallelism(sinks)
      .forward()
      .from("hh")
      .build();
}

TEST(Topology, BuilderRecordsStagesInOrder) {
  const Topology t = heavy_hitters(2, 3, 1);
  ASSERT_EQ(t.stages().size(), 3u);
  const auto& gen = t.stages()[0];
  EXPECT_EQ(gen.name, "gen");
  EXPECT_EQ(gen.kind, "zipf");
  EXPECT_TRUE(gen.is_source);
  EXPECT_EQ(gen.parallelism, 2);
  EXPECT_TRUE(gen.inputs.empty());
  EXPECT_EQ(gen.params.get_uint("items", 0), 1000u);
  const auto& hh = t.stages()[1];
  EXPECT_FALSE(hh.is_source);
  EXPECT_EQ(hh.kind, "count-min-hh");
  EXPECT_EQ(hh.params.get_double("phi", 0), 10);
  ASSERT_EQ(hh.inputs.size(), 1u);
  EXPECT_EQ(hh.inputs[0].from_stage, 0);
  EXPECT_EQ(hh.inputs[0].partition, Partition::Key);
  ASSERT_EQ(t.stages()[2].inputs.size(), 1u);
  EXPECT_EQ(t.stages()[2].inputs[0].from_stage, 1);
  EXPECT_EQ(t.stages()[2].inputs[0].partition, Partition::Forward);
  EXPECT_EQ(t.stage_index("hh"), 1);
  EXPECT_EQ(t.stage_index("merge"), 2);
  EXPECT_EQ(t.stage_index("nope"), -1);
}

TEST(Topology, WorkersAreNumberedInStageOrder) {
  const Topology t = heavy_hitters(2, 3, 1);
  ASSERT_EQ(t.worker_count(), 6);
  EXPECT_EQ(t.first_worker(0), 0);
  EXPECT_EQ(t.first_worker(1), 2);
  EXPECT_EQ(t.first_worker(2), 5);
  const std::vector<std::pair<int, int>> stage_index = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {2, 0}};
  for (int w = 0; w < t.worker_count(); ++w) {
    EXPECT_EQ(t.workers()[w].id, w);
    EXPECT_EQ(t.workers()[w].stage, stage_index[w].first);
    EXPECT_EQ(t.workers()[w].index, stage_index[w].second);
  }
}

TEST(Topology, KeyEdgesConnectEveryPair) {
  const Topology t = heavy_hitters(2, 3, 1);
  // gen 0,1 -> hh 2,3,4 (key: all pairs), then hh 2,3,4 -> merge 5 (forward: i -> i % 1).
  const std::vector<std::pair<int, int>> want = {{0, 2}, {0, 3}, {0, 4}, {1, 2}, {1, 3},
                                                 {1, 4}, {2, 5}, {3, 5}, {4, 5}};
  EXPECT_EQ(edges(t), want);
  for (std::size_t c = 0; c < t.channels().size(); ++c) {
    EXPECT_EQ(t.channels()[c].id, static_cast<int>(c));
    EXPECT_EQ(t.channels()[c].partition, c < 6 ? Partition::Key : Partition::Forward);
  }
  EXPECT_EQ(t.inputs_of(3), (std::vector<int>{1, 4}));
  EXPECT_EQ(t.outputs_of(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(t.inputs_of(5), (std::vector<int>{6, 7, 8}));
  EXPECT_TRUE(t.inputs_of(0).empty());
  EXPECT_TRUE(t.outputs_of(5).empty());
}

TEST(Topology, ForwardEdgesSendInstanceIToIModDownstream) {
  const Topology t =
      TopologyBuilder().source("s", "zipf").parallelism(4).stage("a", "x").parallelism(2).forward().from("s").build();
  // s0 -> a0, s1 -> a1, s2 -> a0, s3 -> a1 (workers 4 and 5 are a0, a1).
  EXPECT_EQ(edges(t), (std::vector<std::pair<int, int>>{{0, 4}, {1, 5}, {2, 4}, {3, 5}}));
  EXPECT_EQ(t.inputs_of(4), (std::vector<int>{0, 2}));
}

TEST(Topology, BroadcastEdgesReachEveryInstance) {
  const Topology t = TopologyBuilder()
                         .source("s", "zipf")
                         .parallelism(2)
                         .stage("model", "x")
                         .parallelism(3)
                         .broadcast()
                         .from("s")
                         .build();
  EXPECT_EQ(edges(t), (std::vector<std::pair<int, int>>{{0, 2}, {0, 3}, {0, 4}, {1, 2}, {1, 3}, {1, 4}}));
  for (const auto& c : t.channels()) EXPECT_EQ(c.partition, Partition::Broadcast);
}

TEST(Topology, PartitionAppliesToTheNextFromAndResetsPerStage) {
  const Topology t = TopologyBuilder()
                         .source("a", "zipf")
                         .source("b", "zipf")
                         .stage("join", "x")
                         .broadcast()
                         .from("a")
                         .key_by()
                         .from("b")
                         .stage("sink", "y")  // a new stage starts with key partitioning
                         .from("join")
                         .build();
  const auto& join = t.stages()[2];
  ASSERT_EQ(join.inputs.size(), 2u);
  EXPECT_EQ(join.inputs[0].partition, Partition::Broadcast);
  EXPECT_EQ(join.inputs[1].partition, Partition::Key);
  EXPECT_EQ(t.stages()[3].inputs[0].partition, Partition::Key);
  // Channels are ordered by upstream worker: a -> join, b -> join, join -> sink.
  ASSERT_EQ(t.channels().size(), 3u);
  EXPECT_EQ(t.channels()[0].partition, Partition::Broadcast);
  EXPECT_EQ(t.channels()[1].partition, Partition::Key);
  EXPECT_EQ(t.inputs_of(2), (std::vector<int>{0, 1}));
}

TEST(Topology, StagesToEndCountsTheLongestPathToASink) {
  const Topology line = heavy_hitters(1, 2, 1);
  EXPECT_EQ(line.stages_to_end(0), 3);
  EXPECT_EQ(line.stages_to_end(1), 2);
  EXPECT_EQ(line.stages_to_end(2), 1);
  // A diamond with a shortcut: s -> a -> b -> c and s -> c; a side sink d reads from s only.
  const Topology dag = TopologyBuilder()
                           .source("s", "zipf")
                           .stage("a", "x")
                           .from("s")
                           .stage("b", "x")
                           .from("a")
                           .stage("c", "x")
                           .from("b")
                           .from("s")
                           .stage("d", "x")
                           .from("s")
                           .build();
  EXPECT_EQ(dag.stages_to_end(0), 4);  // the longest path s, a, b, c
  EXPECT_EQ(dag.stages_to_end(1), 3);
  EXPECT_EQ(dag.stages_to_end(3), 1);
  EXPECT_EQ(dag.stages_to_end(4), 1);
}

TEST(Topology, ValidationErrorsNameTheStage) {
  EXPECT_EQ(testing::error_message<ConfigError>([] { Topology(std::vector<StageSpec>{}); }), "topology has no stages");
  EXPECT_EQ(testing::error_message<ConfigError>([] { TopologyBuilder().build(); }), "topology has no stages");
  EXPECT_EQ(testing::error_message<ConfigError>(
                [] { TopologyBuilder().source("s", "zipf").stage("s", "x").from("s").build(); }),
            "topology: stage name 's' used twice");
  EXPECT_EQ(testing::error_message<ConfigError>([] { TopologyBuilder().source("s", "zipf").parallelism(0).build(); }),
            "topology: stage 's' has parallelism 0 (expected >= 1)");
  EXPECT_EQ(testing::error_message<ConfigError>(
                [] { TopologyBuilder().source("s", "zipf").stage("a", "x").parallelism(-2).from("s").build(); }),
            "topology: stage 'a' has parallelism -2 (expected >= 1)");
  EXPECT_EQ(testing::error_message<ConfigError>([] { TopologyBuilder().source("s", "zipf").stage("a", "x").build(); }),
            "topology: stage 'a' has no inputs");
  EXPECT_EQ(
      testing::error_message<ConfigError>([] { TopologyBuilder().source("s", "zipf").stage("a", "x").from("nope"); }),
      "topology builder: stage 'a' reads from unknown stage 'nope'");
  EXPECT_EQ(
      testing::error_message<ConfigError>([] { TopologyBuilder().source("s", "zipf").stage("a", "x").from("a"); }),
      "topology builder: stage 'a' reads from unknown stage 'a'");
  EXPECT_EQ(testing::error_message<ConfigError>([] { TopologyBuilder().parallelism(2); }),
            "topology builder: declare a source or stage first");
  EXPECT_EQ(testing::error_message<ConfigError>([] { TopologyBuilder().from("x"); }),
            "topology builder: declare a source or stage first");
  // A source with inputs, and an edge to a later stage, can only be written as StageSpecs.
  StageSpec s{"s", "zipf", {}, 1, true, {}};
  StageSpec a{"a", "x", {}, 1, false, {{0, Partition::Key}}};
  StageSpec fed_source{"t", "zipf", {}, 1, true, {{0, Partition::Key}}};
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              Topology({s, a, fed_source});
            }),
            "topology: source 't' has inputs");
  StageSpec forward_ref{"b", "x", {}, 1, false, {{2, Partition::Key}}};
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              Topology({s, forward_ref, a});
            }),
            "topology: stage 'b' reads from a stage that is not before it");
  StageSpec self_ref{"b", "x", {}, 1, false, {{1, Partition::Key}}};
  EXPECT_EQ(testing::error_message<ConfigError>([&] {
              Topology({s, self_ref});
            }),
            "topology: stage 'b' reads from a stage that is not before it");
  StageSpec negative{"b", "x", {}, 1, false, {{-1, Partition::Key}}};
  EXPECT_TRUE(testing::error_message<ConfigError>([&] { Topology({s, negative}); }).find("'b'") != std::string::npos);
  EXPECT_EQ(testing::error_message<ConfigError>([&] { Topology({s, a}); }), "");
}

}  // namespace
}  // namespace afs
