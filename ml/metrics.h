// Learning metrics (issue 5, item 4): progressive validation printed at doubling counts like Vowpal Wabbit (the
// caller prints; this formats), the prediction rate on a held-out range, the L1 norm of the model change between
// iterations (the convergence measure of [J], PAPER.md "Workloads") and convergence detection.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "ml/dataset.h"
#include "ml/learner.h"

namespace afs::ml {

// Progressive validation: each example is predicted before it is learned, so the running loss is an honest
// estimate of the generalization loss. Lines are due at counts 1, 2, 4, 8, ... (first_due, then times `factor`).
class ProgressiveValidator {
 public:
  // classification: whether accuracy columns are kept. first_due >= 1, factor > 1 (else ConfigError).
  explicit ProgressiveValidator(bool classification, double first_due = 1, double factor = 2);

  // Records one example's outcome (learn()'s return value).
  void add(const Outcome& o) { add(o.loss, o.correct); }
  void add(double loss, bool correct);
  // Whether a line is due (the count just reached the next print point). Stays true until line() is called.
  bool due() const { return count_ >= next_due_ && line_pending_; }
  // The column titles, one line without a trailing newline.
  std::string header() const;
  // Formats the current line (average loss, since-last loss, examples, and for classification accuracy and
  // since-last accuracy), then starts a new since-last window and moves the next print point.
  std::string line();

  std::uint64_t count() const { return count_; }
  double average_loss() const { return count_ ? loss_sum_ / static_cast<double>(count_) : 0; }
  double accuracy() const { return count_ ? static_cast<double>(correct_) / static_cast<double>(count_) : 0; }
  double since_last_loss() const;
  double since_last_accuracy() const;

 private:
  bool classification_;
  double factor_;
  double next_due_;
  bool line_pending_ = false;
  std::uint64_t count_ = 0, correct_ = 0;
  double loss_sum_ = 0;
  std::uint64_t last_count_ = 0, last_correct_ = 0;
  double last_loss_sum_ = 0;
};

// The prediction rate of `correct` right predictions out of `count` (0 when count is 0); NaN for regression, which
// has none (every accuracy the learn and ps jobs and afstream eval write: they read 0 in the jobs, nan in eval).
inline double prediction_rate(Task t, double correct, double count) {
  if (!is_classification(t)) return std::numeric_limits<double>::quiet_NaN();
  return count > 0 ? correct / count : 0;
}

// Evaluation of fixed weights on examples [begin, end) of a dataset (no learning).
struct HoldoutResult {
  std::uint64_t examples = 0;
  double average_loss = 0;
  double accuracy = 0;  // the prediction rate (classification; NaN for regression, which has none)
};
HoldoutResult evaluate(const LearnerConfig& c, const Eigen::VectorXd& w, const Dataset& data, std::uint64_t begin,
                       std::uint64_t end);

// ||a - b||_1 (same sizes, else std::invalid_argument).
double l1_change(const Eigen::VectorXd& a, const Eigen::VectorXd& b);

// Keeps the weights of the previous iteration; observe() returns the L1 norm of the change since then.
class ModelChangeTracker {
 public:
  // The first call returns the L1 norm of w (the change from the all-zero start).
  double observe(const Eigen::VectorXd& w);

 private:
  Eigen::VectorXd previous_;
};

// Convergence: the model has converged once the per-iteration L1 change has stayed below `tolerance` for `window`
// consecutive observations; the convergence point is the first observation of that run. A later change at or above
// the tolerance (a failure that perturbs the model) withdraws it, so after a run converged() and the point describe
// the final, stable convergence.
class ConvergenceDetector {
 public:
  // tolerance > 0, window >= 1 (else ConfigError).
  ConvergenceDetector(double tolerance, std::uint64_t window);
  // One observation: items processed and seconds elapsed so far, and the L1 change of this iteration. Returns
  // converged().
  bool observe(std::uint64_t items, double seconds, double l1);
  bool converged() const { return run_ >= window_; }
  // The point where the current below-tolerance run started (meaningful when converged()).
  std::uint64_t items_at_convergence() const { return run_items_; }
  double seconds_at_convergence() const { return run_seconds_; }

 private:
  double tolerance_;
  std::uint64_t window_;
  std::uint64_t run_ = 0;
  std::uint64_t run_items_ = 0;
  double run_seconds_ = 0;
};

}  // namespace afs::ml
