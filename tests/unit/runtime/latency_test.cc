// Latency histogram (afstream/runtime/metrics.h): buckets of a quarter octave of microseconds, quantiles as the
// bucket's upper bound; and a run on the in-process cluster records one latency per received batch.
#include <gtest/gtest.h>

#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"
#include "afstream/runtime/metrics.h"
#include "algorithms/heavy_hitters/hh_operators.h"

namespace afs {
namespace {

TEST(Latency, BucketsAndQuantiles) {
  EXPECT_EQ(latency_bucket(0.5), 0u);
  EXPECT_EQ(latency_bucket(1000), 39u);  // 4 * log2(1000) = 39.9
  EXPECT_EQ(latency_bucket(1e12), kLatencyBuckets - 1);
  std::vector<std::uint64_t> h(kLatencyBuckets, 0);
  EXPECT_EQ(latency_quantile_ms(h, 0.5), 0);
  h[latency_bucket(1000)] = 98;   // 1 ms
  h[latency_bucket(100000)] = 2;  // 100 ms
  const double p50 = latency_quantile_ms(h, 0.5), p99 = latency_quantile_ms(h, 0.99);
  EXPECT_GE(p50, 1.0);
  EXPECT_LT(p50, 1.0 * 1.19);
  EXPECT_GE(p99, 100.0);
  EXPECT_LT(p99, 100.0 * 1.19);
}

TEST(Latency, EveryReceivedBatchIsMeasured) {
  Registry registry;
  hh::register_heavy_hitters(registry);
  Params src;
  src.set("items", 50000).set("keys", 1000).set("seed", 2);
  Params cm;
  cm.set("width", 500).set("depth", 2).set("phi", 1e9);
  const Topology t =
      TopologyBuilder().source("source", "zipf", src).stage("hh", "count-min-hh", cm).from("source").build();
  for (auto mode : {FtMode::None, FtMode::Approx, FtMode::Ask, FtMode::Checkpoint, FtMode::Ack, FtMode::MicroBatch}) {
    RunConfig config;
    config.mode = mode;
    config.batch_items = 1000;
    LocalCluster cluster(t, registry, config);
    const auto r = cluster.run();
    std::uint64_t batches = 0;
    for (auto c : r.latency_buckets) batches += c;
    EXPECT_GE(batches, 50u) << to_string(mode);  // 50 batches of 1000 items
    // More when a busy machine makes the sender flush part of a batch, or a batch wraps around the send ring; never
    // more than one per item.
    EXPECT_LE(batches, 50000u) << to_string(mode);
    EXPECT_GT(latency_quantile_ms(r.latency_buckets, 0.99), 0) << to_string(mode);
  }
}

}  // namespace
}  // namespace afs
