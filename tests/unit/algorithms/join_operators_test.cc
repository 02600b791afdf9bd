// Unit tests of the online-join operators (algorithms/join/join_operators.h): the conformance kit on ripple-join and
// join-merge, the operator equal to the engine-free RippleJoin, keyed copies merging in the sink to the estimate of
// one sketch over the whole stream, and the Theorem 3 ledger kept by on_recovered.
#include "algorithms/join/join_operators.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "afstream/testing/conformance.h"
#include "algorithms/join/join_generator.h"

namespace afs::join {
namespace {

struct Collect final : Emitter {
  std::vector<Item> items;
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    items.push_back({.key = key, .value = value, .time = time});
  }
};

std::vector<Item> stream(std::uint64_t seed, std::uint64_t r, std::uint64_t s, std::uint64_t keys) {
  const JoinGenerator g({.r_items = r, .s_items = s, .keys = keys, .skew = 1.0, .seed = seed, .max_value = 20});
  std::vector<Item> v(g.total_items());
  g.fill(0, v.data(), v.size());
  return v;
}

Params rj_params(double rate) { return Params().set("rate", rate).set("seed", 3); }

TEST(JoinOperators, RippleJoinConforms) {
  const auto items = stream(1, 1800, 1200, 300);
  for (const double rate : {0.3, 1.0}) {
    auto make = [&] { return std::make_unique<RippleJoinOperator>(rj_params(rate), InstanceInfo{0, 1}); };
    EXPECT_TRUE(testing::OperatorConforms(make, items)) << "rate " << rate;
    testing::ConformanceOptions by_distance;
    by_distance.canonical_snapshots = false;
    by_distance.seed = 2;
    EXPECT_TRUE(testing::OperatorConforms(make, items, by_distance)) << "rate " << rate;
  }
}

TEST(JoinOperators, JoinMergeConforms) {
  // Fields of 3 copies, each value new (a field never returns to a value it held).
  std::vector<Item> items(600);
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].key = (i % 3) * kFieldStride + (i * 7) % kFieldCount;
    items[i].value = std::bit_cast<std::int64_t>(static_cast<double>(i) + 0.5);
  }
  const Params p = Params().set("rate", 0.1).set("parallelism", 3);
  EXPECT_TRUE(testing::OperatorConforms([&] { return std::make_unique<JoinMerge>(p); }, items));
}

TEST(JoinOperators, OperatorEqualsTheCoreAndKeyedCopiesMergeToOne) {
  const auto items = stream(5, 30000, 20000, 2000);
  const double rate = 0.1;
  RippleJoin core(rate, 3);
  const int par = 3;
  std::vector<std::unique_ptr<RippleJoinOperator>> copies;
  for (int i = 0; i < par; ++i)
    copies.push_back(std::make_unique<RippleJoinOperator>(rj_params(rate), InstanceInfo{i, par}));
  Collect discard;
  for (const auto& it : items) {
    core.update(side_of(it), it.key, it.value, static_cast<std::uint64_t>(it.time));
    copies[key_partition(it.key, par)]->process(it, discard);
  }
  EXPECT_TRUE(discard.items.empty());  // beta = 0 before finish
  JoinMerge sink(Params().set("rate", rate).set("parallelism", static_cast<std::int64_t>(par)).set("confidence", 0.9));
  RippleJoin merged(rate, 3);
  for (auto& c : copies) {
    merged.merge(c->to_core());
    Collect out;
    c->finish(out);
    EXPECT_EQ(out.items.size(), static_cast<std::size_t>(kFieldCount));
    EXPECT_FALSE(sink.complete());
    for (const auto& e : out.items) sink.process(e, discard);
  }
  EXPECT_EQ(merged, core);
  ASSERT_TRUE(sink.complete());
  EXPECT_EQ(sink.moments(), core.moments());
  EXPECT_EQ(sink.estimate().estimate, core.get_estimate());
  EXPECT_EQ(sink.estimate(Aggregate::Sum).variance, core.get_variance(Aggregate::Sum));
  EXPECT_EQ(sink.interval().lower, core.get_lower_bound(0.9));
  EXPECT_EQ(sink.interval().upper, core.get_upper_bound(0.9));
  EXPECT_EQ(sink.lost_sample_bound(), 0);
  JoinMerge charged(Params().set("rate", rate).set("parallelism", static_cast<std::int64_t>(par)).set("gamma", 9));
  EXPECT_EQ(charged.lost_sample_bound(), 0);  // no copy failed: Gamma is not charged
  EXPECT_GT(core.get_estimate(), 0);
}

// on_recovered adds theta_j + l_j * alpha for each failure not yet counted (a repeated call for the same failure
// adds nothing); the sink subtracts the copies' bounds plus Gamma from n (Theorem 3).
TEST(JoinOperators, RecoveryLedgerWidensTheIntervalPerTheorem3) {
  const auto items = stream(9, 6000, 4000, 500);
  RippleJoinOperator op(rj_params(0.2), InstanceInfo{0, 1});
  Collect discard;
  for (const auto& it : items) op.process(it, discard);
  RecoveryInfo info;
  info.theta_by_failure = {25, 12.5};
  info.l_by_failure = {10, 5};
  info.missing_by_failure = {std::uint64_t{3}, std::nullopt};
  info.failure_count = 2;
  op.on_recovered(info);
  EXPECT_EQ(op.lost_sample_bound(), 25 + 10 + 12.5 + 5 + 0.5);  // rounded up to whole samples
  EXPECT_EQ(op.missing_items(), 3);
  EXPECT_EQ(op.failures(), 2);
  EXPECT_GT(op.divergence(), 0);  // the ledger changed: backed up with the next backup
  op.on_recovered(info);          // the same failures again: nothing more
  EXPECT_EQ(op.lost_sample_bound(), 53);
  info.theta_by_failure.push_back(6.25);
  info.l_by_failure.push_back(2.5);
  op.on_recovered(info);
  EXPECT_EQ(op.lost_sample_bound(), 53 + 9);
  EXPECT_EQ(op.failures(), 3);

  JoinMerge sink(Params().set("rate", 0.2).set("gamma", 7));
  Collect out;
  op.finish(out);
  for (const auto& e : out.items) sink.process(e, discard);
  ASSERT_TRUE(sink.complete());
  EXPECT_EQ(sink.lost_sample_bound(), 62 + 7);
  EXPECT_EQ(sink.failures(), 3);
  const double n = sink.moments().samples;
  const auto plain = sink.unwidened_interval(Aggregate::Sum), wide = sink.interval(Aggregate::Sum);
  EXPECT_NEAR((wide.upper - wide.lower) / (plain.upper - plain.lower), std::sqrt(n / (n - 69)), 1e-9);
}

TEST(JoinOperators, RejectBadParametersAndItems) {
  EXPECT_THROW(RippleJoinOperator(Params().set("rate", 0), InstanceInfo{}), ConfigError);
  EXPECT_THROW(JoinMerge(Params().set("rate", 2)), ConfigError);
  EXPECT_THROW(JoinMerge(Params().set("confidence", 1)), ConfigError);
  EXPECT_THROW(JoinMerge(Params().set("parallelism", 0)), ConfigError);
  JoinMerge sink(Params().set("parallelism", 2));
  Collect discard;
  EXPECT_THROW(sink.process({.key = 2 * kFieldStride}, discard), FormatError);
  EXPECT_THROW(sink.process({.key = kFieldCount}, discard), FormatError);
}

}  // namespace
}  // namespace afs::join
