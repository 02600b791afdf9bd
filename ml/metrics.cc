// Progressive validation lines, held-out evaluation, L1 model change and convergence detection.
#include "ml/metrics.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "afstream/core/errors.h"

namespace afs::ml {

ProgressiveValidator::ProgressiveValidator(bool classification, double first_due, double factor)
    : classification_(classification), factor_(factor), next_due_(first_due) {
  if (!(first_due >= 1) || !std::isfinite(first_due)) {
    throw ConfigError("progressive validation: first_due must be >= 1 (got " + std::to_string(first_due) + ")");
  }
  if (!(factor > 1) || !std::isfinite(factor)) {
    throw ConfigError("progressive validation: factor must be > 1 (got " + std::to_string(factor) + ")");
  }
}

void ProgressiveValidator::add(double loss, bool correct) {
  ++count_;
  loss_sum_ += loss;
  correct_ += correct;
  if (static_cast<double>(count_) >= next_due_) line_pending_ = true;
}

double ProgressiveValidator::since_last_loss() const {
  const std::uint64_t n = count_ - last_count_;
  return n ? (loss_sum_ - last_loss_sum_) / static_cast<double>(n) : 0;
}

double ProgressiveValidator::since_last_accuracy() const {
  const std::uint64_t n = count_ - last_count_;
  return n ? static_cast<double>(correct_ - last_correct_) / static_cast<double>(n) : 0;
}

std::string ProgressiveValidator::header() const {
  char buf[160];
  if (classification_) {
    std::snprintf(buf, sizeof buf, "%-12s %-12s %12s %10s %10s", "average", "since", "example", "average", "since");
    std::string h = buf;
    std::snprintf(buf, sizeof buf, "%-12s %-12s %12s %10s %10s", "loss", "last", "counter", "accuracy", "last");
    return h + "\n" + buf;
  }
  std::snprintf(buf, sizeof buf, "%-12s %-12s %12s", "average", "since", "example");
  std::string h = buf;
  std::snprintf(buf, sizeof buf, "%-12s %-12s %12s", "loss", "last", "counter");
  return h + "\n" + buf;
}

std::string ProgressiveValidator::line() {
  char buf[160];
  if (classification_) {
    std::snprintf(buf, sizeof buf, "%-12.6f %-12.6f %12llu %10.4f %10.4f", average_loss(), since_last_loss(),
                  static_cast<unsigned long long>(count_), accuracy(), since_last_accuracy());
  } else {
    std::snprintf(buf, sizeof buf, "%-12.6f %-12.6f %12llu", average_loss(), since_last_loss(),
                  static_cast<unsigned long long>(count_));
  }
  last_count_ = count_;
  last_correct_ = correct_;
  last_loss_sum_ = loss_sum_;
  while (next_due_ <= static_cast<double>(count_)) next_due_ *= factor_;
  line_pending_ = false;
  return buf;
}

HoldoutResult evaluate(const LearnerConfig& c, const Eigen::VectorXd& w, const Dataset& data, std::uint64_t begin,
                       std::uint64_t end) {
  if (begin > end || end > data.size()) {
    throw std::out_of_range("evaluate: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") is not within the dataset's " + std::to_string(data.size()) + " examples");
  }
  HoldoutResult r;
  Example x;
  double loss_sum = 0;
  std::uint64_t right = 0;
  for (std::uint64_t n = begin; n < end; ++n) {
    data.example(n, x);
    const Prediction p = predict(c, w, x);
    loss_sum += loss(c, w, x);
    right += correct(c, p, x);
  }
  r.examples = end - begin;
  if (r.examples) {
    r.average_loss = loss_sum / static_cast<double>(r.examples);
  }
  r.accuracy = prediction_rate(c.task, static_cast<double>(right), static_cast<double>(r.examples));
  return r;
}

double l1_change(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  if (a.size() != b.size()) {
    throw std::invalid_argument("l1_change: sizes differ (" + std::to_string(a.size()) + " vs " +
                                std::to_string(b.size()) + ")");
  }
  return (a - b).lpNorm<1>();
}

double ModelChangeTracker::observe(const Eigen::VectorXd& w) {
  const double d = previous_.size() == 0 ? w.lpNorm<1>() : l1_change(w, previous_);
  previous_ = w;
  return d;
}

ConvergenceDetector::ConvergenceDetector(double tolerance, std::uint64_t window)
    : tolerance_(tolerance), window_(window) {
  if (!(tolerance > 0) || !std::isfinite(tolerance)) {
    throw ConfigError("convergence tolerance must be finite and > 0 (got " + std::to_string(tolerance) + ")");
  }
  if (window < 1) throw ConfigError("convergence window must be >= 1");
}

bool ConvergenceDetector::observe(std::uint64_t items, double seconds, double l1) {
  if (l1 < tolerance_) {
    if (run_ == 0) {
      run_items_ = items;
      run_seconds_ = seconds;
    }
    ++run_;
  } else {
    run_ = 0;
  }
  return converged();
}

}  // namespace afs::ml
