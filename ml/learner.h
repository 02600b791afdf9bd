// Online linear learners (issue 5): logistic regression (binary), linear regression (squared loss), linear SVM
// (hinge) and softmax regression (K classes), with L2 regularization and two optimizers, SGD with the step
// eta_t = eta0 / sqrt(t) of Theorem 1 (PAPER.md) and AdaGrad. Vowpal Wabbit style: a small plain state struct
// (Learner) plus free functions, and a versioned, checksummed binary form so that "train, save, load, train more"
// equals "train once", bit for bit.
//
// The weight update is split so that a caller can keep the weights anywhere (an Eigen vector here, an
// afs::TrackedVector in an operator, a parameter-server shard):
//   gradient(config, weights, x, g)   -> sparse gradient g (indices + values) at the current weights;
//   make_step(config, optimizer, g)   -> turns g into the step (indices + deltas) and advances t / AdaGrad sums;
//   apply_step(step, store)           -> store.add(i, delta) for each entry (any WeightStore).
// learn() chains the three on a Learner.
#pragma once

#include <Eigen/Core>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "afstream/core/bytes.h"
#include "ml/example.h"

namespace afs::ml {

enum class Task : std::uint8_t {
  kLogistic = 1,  // binary, log loss log(1 + exp(-y m)), y in {-1, +1}
  kLinear = 2,    // regression, squared loss (m - y)^2 / 2
  kHinge = 3,     // binary linear SVM, hinge loss max(0, 1 - y m) (subgradient)
  kSoftmax = 4,   // K classes, cross-entropy -log softmax(m)_y
};
enum class OptimizerKind : std::uint8_t {
  kSgd = 1,      // eta_t = eta0 / sqrt(t), t = 1, 2, ... counts updates (Theorem 1)
  kAdaGrad = 2,  // per weight: eta0 / sqrt(adagrad_init + sum of squared gradients)
};
std::string to_string(Task t);
std::string to_string(OptimizerKind o);
// Parse "logistic" / "linear" / "hinge" / "softmax" and "sgd" / "adagrad"; ConfigError naming the choices otherwise.
Task parse_task(const std::string& s);
OptimizerKind parse_optimizer(const std::string& s);

// What a learner is: its task, dimensions and hyper-parameters. Options live next to the learner that owns them.
struct LearnerConfig {
  Task task = Task::kLogistic;
  std::size_t num_features = 0;  // d: dense dimension, or 2^b for hashed sparse features; in [1, 2^31]
  int num_classes = 2;           // K for softmax, in [2, 65536]; ignored otherwise
  double l2 = 0;                 // lambda >= 0: objective adds lambda/2 * w_i^2 for every touched non-bias weight
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double eta0 = 0.5;           // > 0
  double adagrad_init = 1e-6;  // > 0: initial AdaGrad sum (keeps the first step finite)
  friend bool operator==(const LearnerConfig&, const LearnerConfig&) = default;
};
// Throws ConfigError naming the option and its expected range.
void validate(const LearnerConfig& c);
// Number of score outputs (K for softmax, else 1).
inline int outputs(const LearnerConfig& c) { return c.task == Task::kSoftmax ? c.num_classes : 1; }
// Weights: outputs blocks of (num_features + 1); the last entry of a block is that output's bias.
// Weight of feature j for output k: k * (d + 1) + j; bias of output k: k * (d + 1) + d.
inline std::size_t weight_count(const LearnerConfig& c) {
  return static_cast<std::size_t>(outputs(c)) * (c.num_features + 1);
}
inline bool is_classification(Task t) { return t != Task::kLinear; }

// Parallel index/value arrays: a sparse gradient, or a step (indices + deltas) to apply to the weights.
struct SparseVector {
  std::vector<std::uint32_t> index;
  std::vector<double> value;
  void clear() {
    index.clear();
    value.clear();
  }
  std::size_t size() const { return index.size(); }
  void push(std::uint32_t i, double v) {
    index.push_back(i);
    value.push_back(v);
  }
};

// Where weights are kept: anything with add(i, delta) (afs::TrackedVector, an adapter over a shard, ...).
template <typename S>
concept WeightStore = requires(S& s, std::size_t i, double d) {
  s.add(i, d);
};

// Optimizer state beside the weights: the update counter t and, for AdaGrad, the per-weight sums of squared
// gradients (empty for SGD).
struct OptimizerState {
  std::uint64_t t = 0;
  Eigen::VectorXd sum_sq;
};
OptimizerState make_optimizer_state(const LearnerConfig& c);

// The result of predicting one example: the score (logistic: P(y = +1); linear and hinge: the margin w.x + b;
// softmax: the probability of the predicted class) and the predicted label (+1/-1, the regression value rounded
// to nothing: for kLinear it equals the score, or the class id).
struct Prediction {
  double score = 0;
  double label = 0;
};

// A read-only view of weights: an Eigen vector, or TrackedVector::values() (stored with stride 2 while tracked). Binds
// to either without copying.
using WeightsView = Eigen::Ref<const Eigen::VectorXd, 0, Eigen::InnerStride<>>;

// All functions below take the weights as a view of weight_count(c) entries. They throw InputError for an example that
// does not fit: a dense size other than num_features, a sparse index >= num_features, a class id outside [0, K), a
// non-finite label or value.
Prediction predict(const LearnerConfig& c, const WeightsView& w, const Example& x);
// The data loss at w (no regularization).
double loss(const LearnerConfig& c, const WeightsView& w, const Example& x);
// The per-example objective whose gradient gradient() returns: loss + lambda/2 * sum of w_i^2 over the non-bias
// weights the example touches (exact L2 for dense examples; the usual sparse approximation for sparse ones).
double objective(const LearnerConfig& c, const WeightsView& w, const Example& x);
// Whether the prediction is right (classification); always false for regression.
bool correct(const LearnerConfig& c, const Prediction& p, const Example& x);
// The (sub)gradient of objective() at w, written to g (cleared first). Entries: the touched weights of every output,
// in example order, then the biases. O(outputs * features of x).
void gradient(const LearnerConfig& c, const WeightsView& w, const Example& x, SparseVector& g);
// Turns the gradient g into a step in place (value_i = -eta_i * g_i) and advances the optimizer: t += 1, and for
// AdaGrad sum_sq_i += g_i^2 before eta_i is taken.
void make_step(const LearnerConfig& c, OptimizerState& opt, SparseVector& g);

// Adds each entry of the step to the store.
template <WeightStore S>
void apply_step(const SparseVector& step, S& store) {
  if constexpr (requires { store.add_all(std::span(step.index), std::span(step.value)); }) {
    store.add_all(std::span(step.index), std::span(step.value));  // a TrackedVector: one divergence update
  } else {
    for (std::size_t k = 0; k < step.size(); ++k) store.add(step.index[k], step.value[k]);
  }
}
inline void apply_step(const SparseVector& step, Eigen::VectorXd& w) {
  for (std::size_t k = 0; k < step.size(); ++k) w[static_cast<Eigen::Index>(step.index[k])] += step.value[k];
}

// A self-contained learner: configuration, weights (all 0 at the start), optimizer state and a scratch gradient.
struct Learner {
  LearnerConfig config;
  Eigen::VectorXd weights;
  OptimizerState optimizer;
  SparseVector scratch;  // reused by learn(); not part of the state
};
// Validates the configuration (ConfigError).
Learner make_learner(const LearnerConfig& c);

// What progressive validation needs: the loss and correctness of the prediction made before the update.
struct Outcome {
  Prediction prediction;
  double loss = 0;
  bool correct = false;
};
// Predict, then learn: the outcome before the update, then one optimizer step on x.
Outcome learn(Learner& l, const Example& x);
inline Prediction predict(const Learner& l, const Example& x) { return predict(l.config, l.weights, x); }

// Versioned binary form: tag, version, config, t, weights, AdaGrad sums, XXH3-64 checksum of all of it.
void serialize(const Learner& l, ByteWriter& out);
// Throws FormatError (naming what is wrong) on a truncated, corrupt or mismatched buffer.
Learner deserialize_learner(ByteReader& in);

}  // namespace afs::ml
