// Unit tests of the learning metrics (ml/metrics.h): progressive-validation lines at doubling counts with the right
// averages, held-out evaluation, the L1 model change and convergence detection.
#include "ml/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "ml/generators.h"

namespace afs::ml {
namespace {

TEST(ProgressiveValidator, LinesAreDueAtDoublingCounts) {
  ProgressiveValidator v(true);
  std::vector<std::uint64_t> due_at;
  for (int i = 1; i <= 40; ++i) {
    v.add(1.0, true);
    if (v.due()) {
      due_at.push_back(v.count());
      v.line();
    }
  }
  EXPECT_EQ(due_at, (std::vector<std::uint64_t>{1, 2, 4, 8, 16, 32}));
}

TEST(ProgressiveValidator, AveragesAndSinceLastWindows) {
  ProgressiveValidator v(true);
  v.add(4.0, true);  // count 1
  ASSERT_TRUE(v.due());
  const std::string first = v.line();
  EXPECT_EQ(first.find("4.000000"), 0u) << first;
  v.add(2.0, false);  // count 2
  ASSERT_TRUE(v.due());
  EXPECT_DOUBLE_EQ(v.average_loss(), 3.0);
  EXPECT_DOUBLE_EQ(v.since_last_loss(), 2.0);
  EXPECT_DOUBLE_EQ(v.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(v.since_last_accuracy(), 0.0);
  const std::string line = v.line();
  EXPECT_NE(line.find("3.000000"), std::string::npos) << line;
  EXPECT_NE(line.find("2.000000"), std::string::npos) << line;
  EXPECT_NE(line.find(" 2 "), std::string::npos) << line;
  EXPECT_NE(line.find("0.5000"), std::string::npos) << line;
  v.add(0.0, true);  // count 3: not due
  EXPECT_FALSE(v.due());
  EXPECT_DOUBLE_EQ(v.since_last_loss(), 0.0);
  EXPECT_NE(v.header().find("since"), std::string::npos);
  ProgressiveValidator r(false, 10, 10);
  for (int i = 0; i < 9; ++i) r.add(1, false);
  EXPECT_FALSE(r.due());
  r.add(1, false);
  EXPECT_TRUE(r.due());
  EXPECT_EQ(r.line().find("accuracy"), std::string::npos);
  EXPECT_THROW(ProgressiveValidator(true, 0.5), ConfigError);
  EXPECT_THROW(ProgressiveValidator(true, 1, 1), ConfigError);
}

TEST(ProgressiveValidator, TracksALearnersProgressiveLoss) {
  SyntheticDataset d(
      {.model = SyntheticModel::kLogistic, .num_examples = 4096, .num_features = 8, .noise = 0.1, .seed = 3});
  Learner l = make_learner({.task = Task::kLogistic, .num_features = 8});
  ProgressiveValidator v(true);
  std::vector<double> since_last;
  for (std::uint64_t n = 0; n < d.size(); ++n) {
    v.add(learn(l, d.example(n)));
    if (v.due()) {
      since_last.push_back(v.since_last_loss());
      v.line();
    }
  }
  ASSERT_EQ(since_last.size(), 13u);                // 1, 2, ..., 4096
  EXPECT_LT(since_last.back(), since_last[6] / 2);  // the loss falls as it learns
  EXPECT_GT(v.accuracy(), 0.9);
}

TEST(Metrics, EvaluateCountsThePredictionRate) {
  const LearnerConfig c{.task = Task::kLogistic, .num_features = 4};
  SyntheticDataset d({.model = SyntheticModel::kLogistic, .num_examples = 500, .num_features = 4, .seed = 4});
  // The true model predicts noiseless labels perfectly; its negation gets every one wrong.
  const Eigen::VectorXd w = d.true_weights();
  EXPECT_DOUBLE_EQ(evaluate(c, w, d, 0, 500).accuracy, 1.0);
  EXPECT_DOUBLE_EQ(evaluate(c, -w, d, 100, 200).accuracy, 0.0);
  EXPECT_EQ(evaluate(c, w, d, 100, 200).examples, 100u);
  EXPECT_THROW(evaluate(c, w, d, 400, 501), std::out_of_range);
}

TEST(Metrics, L1ChangeAndTracker) {
  Eigen::VectorXd a(3), b(3);
  a << 1, -2, 3;
  b << 0, 1, 3;
  EXPECT_DOUBLE_EQ(l1_change(a, b), 4.0);
  EXPECT_THROW(l1_change(a, Eigen::VectorXd(2)), std::invalid_argument);
  ModelChangeTracker t;
  EXPECT_DOUBLE_EQ(t.observe(a), 6.0);
  EXPECT_DOUBLE_EQ(t.observe(b), 4.0);
  EXPECT_DOUBLE_EQ(t.observe(b), 0.0);
}

TEST(Metrics, ConvergenceNeedsAWindowBelowToleranceAndResetsOnAJump) {
  ConvergenceDetector c(0.1, 3);
  const double l1[] = {1.0, 0.5, 0.05, 0.04, 0.2, 0.05, 0.01, 0.02, 0.03};
  std::vector<bool> out;
  for (int i = 0; i < 9; ++i) out.push_back(c.observe(100 * (i + 1), 0.5 * (i + 1), l1[i]));
  EXPECT_EQ(out, (std::vector<bool>{false, false, false, false, false, false, false, true, true}));
  EXPECT_EQ(c.items_at_convergence(), 600u);  // the run that started at the 6th observation
  EXPECT_DOUBLE_EQ(c.seconds_at_convergence(), 3.0);
  EXPECT_FALSE(c.observe(1000, 5, 0.5));  // a failure perturbs the model: no longer converged
  EXPECT_THROW(ConvergenceDetector(0, 3), ConfigError);
  EXPECT_THROW(ConvergenceDetector(0.1, 0), ConfigError);
}

}  // namespace
}  // namespace afs::ml
