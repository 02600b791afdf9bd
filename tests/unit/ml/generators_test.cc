// Unit tests of the synthetic datasets (ml/generators.h): random access equals sequential generation, determinism
// per seed, labels that follow the true model, drift, the presets, and parameter checks.
#include "ml/generators.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "afstream/core/errors.h"

namespace afs::ml {
namespace {

std::vector<SyntheticParams> some_params() {
  return {
      {.model = SyntheticModel::kLogistic, .num_examples = 500, .num_features = 12, .noise = 0.5, .seed = 1},
      {.model = SyntheticModel::kLinear,
       .num_examples = 500,
       .num_features = 5,
       .noise = 0.2,
       .drift = 1e-3,
       .seed = 2},
      {.model = SyntheticModel::kMulticlass,
       .num_examples = 500,
       .num_features = 6,
       .noise = 0.3,
       .num_classes = 5,
       .seed = 3},
      kdd_like(500, 4),
      higgs_like(500, 5),
  };
}

TEST(SyntheticDataset, RandomAccessEqualsSequentialAndIsDeterministic) {
  for (const SyntheticParams& p : some_params()) {
    SyntheticDataset a(p), b(p);
    std::vector<Example> seq;
    for (std::uint64_t n = 0; n < a.size(); ++n) seq.push_back(a.example(n));
    Example reused;
    for (std::uint64_t n = a.size(); n-- > 0;) {  // backwards, reusing one Example
      b.example(n, reused);
      EXPECT_EQ(reused, seq[n]) << "example " << n;
    }
    EXPECT_EQ(b.example(317), seq[317]);
  }
}

TEST(SyntheticDataset, SeedsGiveDifferentStreams) {
  SyntheticParams p = some_params()[0];
  SyntheticDataset a(p);
  p.seed = 99;
  SyntheticDataset b(p);
  int same = 0;
  for (std::uint64_t n = 0; n < 100; ++n) same += a.example(n) == b.example(n);
  EXPECT_EQ(same, 0);
  EXPECT_NE(a.true_weights(), b.true_weights());
}

TEST(SyntheticDataset, NoiselessLabelsFollowTheTrueModel) {
  SyntheticDataset d({.model = SyntheticModel::kLogistic, .num_examples = 1000, .num_features = 9, .seed = 7});
  const Eigen::VectorXd w = d.true_weights();
  int pos = 0;
  for (std::uint64_t n = 0; n < d.size(); ++n) {
    const Example x = d.example(n);
    const double m = w.head(9).dot(x.dense) + w[9];
    EXPECT_EQ(x.label, m >= 0 ? 1.0 : -1.0);
    pos += x.label > 0;
  }
  EXPECT_GT(pos, 100);  // both classes occur
  EXPECT_LT(pos, 900);
  SyntheticDataset r({.model = SyntheticModel::kLinear, .num_examples = 100, .num_features = 4, .seed = 7});
  const Eigen::VectorXd v = r.true_weights();
  for (std::uint64_t n = 0; n < r.size(); ++n) {
    const Example x = r.example(n);
    EXPECT_NEAR(x.label, v.head(4).dot(x.dense) + v[4], 1e-12);
  }
}

TEST(SyntheticDataset, NoiseFlipsAboutTheLogisticShareOfLabels) {
  SyntheticDataset d(
      {.model = SyntheticModel::kLogistic, .num_examples = 20000, .num_features = 5, .noise = 1, .seed = 8});
  const Eigen::VectorXd w = d.true_weights();
  double expected_agree = 0, agree = 0;
  for (std::uint64_t n = 0; n < d.size(); ++n) {
    const Example x = d.example(n);
    const double m = w.head(5).dot(x.dense) + w[5];
    expected_agree += 1 / (1 + std::exp(-std::fabs(m)));
    agree += (x.label > 0) == (m >= 0);
  }
  // A sum of 20000 Bernoullis: standard deviation below 71, so 400 is more than 5 sigma.
  EXPECT_NEAR(agree, expected_agree, 400);
  EXPECT_LT(agree, 19000);  // noise does flip labels
}

TEST(SyntheticDataset, DriftRotatesTheTrueModel) {
  SyntheticDataset d(
      {.model = SyntheticModel::kLinear, .num_examples = 10000, .num_features = 3, .drift = 1e-3, .seed = 9});
  const Eigen::VectorXd w0 = d.true_weights(0), w1 = d.true_weights(5000);
  EXPECT_GT((w0 - w1).norm(), 0.1 * w0.norm());
  SyntheticDataset fixed({.model = SyntheticModel::kLinear, .num_examples = 10000, .num_features = 3, .seed = 9});
  EXPECT_EQ(fixed.true_weights(0), fixed.true_weights(5000));
  EXPECT_EQ(fixed.true_weights(0), w0);  // drift starts from the same model
}

TEST(SyntheticDataset, PresetsHaveTheAdvertisedShape) {
  SyntheticDataset higgs(higgs_like(1000, 1));
  EXPECT_EQ(higgs.info().num_features, 28u);
  EXPECT_FALSE(higgs.info().sparse);
  EXPECT_EQ(higgs.example(3).dense.size(), 28);
  SyntheticDataset kdd(kdd_like(1000, 1));
  EXPECT_TRUE(kdd.info().sparse);
  EXPECT_EQ(kdd.info().num_features, std::size_t{1} << 18);
  std::set<std::uint32_t> distinct;
  for (std::uint64_t n = 0; n < kdd.size(); ++n) {
    const Example x = kdd.example(n);
    ASSERT_EQ(x.indices.size(), 11u);
    for (const auto i : x.indices) {
      EXPECT_LT(i, 1u << 18);
      distinct.insert(i);
    }
    for (const double v : x.values) EXPECT_EQ(v, 1.0);
  }
  EXPECT_GT(distinct.size(), 1000u);   // many hashed features
  EXPECT_LT(distinct.size(), 11000u);  // but skewed: popular ids repeat
}

TEST(SyntheticDataset, MulticlassUsesEveryClass) {
  SyntheticDataset d({.model = SyntheticModel::kMulticlass,
                      .num_examples = 2000,
                      .num_features = 6,
                      .noise = 0.5,
                      .num_classes = 4,
                      .seed = 10});
  std::set<double> seen;
  for (std::uint64_t n = 0; n < d.size(); ++n) seen.insert(d.example(n).label);
  EXPECT_EQ(seen, (std::set<double>{0, 1, 2, 3}));
  EXPECT_EQ(d.info().num_classes, 4);
}

void expect_config_error(const SyntheticParams& p, const std::string& needle) {
  try {
    SyntheticDataset d(p);
    ADD_FAILURE() << "no ConfigError for " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SyntheticDataset, BadParametersAreConfigErrorsNamingThem) {
  expect_config_error({.num_examples = 0, .num_features = 3}, "num_examples");
  expect_config_error({.num_examples = 10, .num_features = 0}, "num_features");
  expect_config_error({.num_examples = 10, .num_features = 3, .sparse = true, .active = 4}, "active");
  expect_config_error({.num_examples = 10, .num_features = 3, .noise = -1}, "noise");
  expect_config_error({.num_examples = 10, .num_features = 3, .weight_scale = 0}, "weight_scale");
  expect_config_error({.model = SyntheticModel::kMulticlass, .num_examples = 10, .num_features = 3, .num_classes = 1},
                      "num_classes");
  SyntheticDataset d({.num_examples = 10, .num_features = 3});
  EXPECT_THROW(d.example(10), std::out_of_range);
}

}  // namespace
}  // namespace afs::ml
