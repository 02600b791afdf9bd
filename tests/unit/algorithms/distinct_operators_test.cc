// Unit tests of the distinct-counting operators (algorithms/distinct/distinct_operators.h): the conformance kit on
// distinct-hll and hll-merge, the operator's estimate equal to the engine-free HyperLogLog's, and the merge of
// parallel copies partitioned by key equal to one sketch over the whole stream.
#include "algorithms/distinct/distinct_operators.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/testing/conformance.h"
#include "algorithms/distinct/hyperloglog.h"

namespace afs::distinct {
namespace {

struct Collect final : Emitter {
  std::vector<Item> items;
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    items.push_back({.key = key, .value = value, .time = time});
  }
};

std::vector<Item> random_keys(std::uint64_t seed, std::size_t n, std::uint64_t space) {
  std::mt19937_64 rng(seed);
  std::vector<Item> v(n);
  for (auto& it : v) it.key = rng() % space;
  return v;
}

Params hll_params(int precision) {
  Params p;
  p.set("precision", static_cast<std::int64_t>(precision)).set("seed", 5);
  return p;
}

TEST(DistinctOperators, HllOperatorConforms) {
  const auto items = random_keys(1, 3000, 100000);
  for (const int precision : {4, 8}) {
    EXPECT_TRUE(testing::OperatorConforms([&] { return std::make_unique<HllOperator>(hll_params(precision)); }, items))
        << "precision " << precision;
  }
}

TEST(DistinctOperators, HllMergeConforms) {
  // Register items of a precision-6 sketch: (index, rank), ranks up to 59.
  std::mt19937_64 rng(3);
  std::vector<Item> items(2000);
  for (auto& it : items) {
    it.key = rng() % 64;
    it.value = static_cast<std::int64_t>(rng() % 20);
  }
  EXPECT_TRUE(testing::OperatorConforms([] { return std::make_unique<HllMerge>(hll_params(6)); }, items));
}

TEST(DistinctOperators, EstimateEqualsTheCoreSketchAndParallelCopiesMergeToOne) {
  const auto items = random_keys(7, 50000, 30000);
  HyperLogLog core(10, 5);
  HllOperator whole(hll_params(10));
  std::vector<HllOperator> copies(3, HllOperator(hll_params(10)));
  Collect none;
  for (const auto& it : items) {
    core.update(it.key);
    whole.process(it, none);
    copies[it.key % copies.size()].process(it, none);
  }
  EXPECT_DOUBLE_EQ(whole.estimate(), core.estimate());
  HllMerge sink(hll_params(10));
  for (auto& c : copies) {
    Collect out;
    c.finish(out);
    for (const auto& it : out.items) sink.process(it, none);
  }
  EXPECT_DOUBLE_EQ(sink.estimate(), core.estimate());
}

TEST(DistinctOperators, BadParametersAndItemsAreErrors) {
  EXPECT_THROW(HllOperator(hll_params(3)), ConfigError);
  Params eps;
  eps.set("epsilon", 0.02);
  EXPECT_EQ(HllOperator(eps).precision(), HyperLogLog::precision_for_error(0.02));
  HllMerge sink(hll_params(6));
  Collect none;
  EXPECT_THROW(sink.process({.key = 64, .value = 1}, none), FormatError);
  EXPECT_THROW(sink.process({.key = 0, .value = 60}, none), FormatError);
}

}  // namespace
}  // namespace afs::distinct
