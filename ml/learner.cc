// Online linear learners: scores, losses and their gradients, the SGD and AdaGrad steps, and the checksummed
// binary form of a Learner.
#include "ml/learner.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "afstream/core/errors.h"

namespace afs::ml {

std::string to_string(Task t) {
  switch (t) {
    case Task::kLogistic:
      return "logistic";
    case Task::kLinear:
      return "linear";
    case Task::kHinge:
      return "hinge";
    case Task::kSoftmax:
      return "softmax";
  }
  return "unknown";
}

std::string to_string(OptimizerKind o) { return o == OptimizerKind::kSgd ? "sgd" : "adagrad"; }

Task parse_task(const std::string& s) {
  if (s == "logistic") return Task::kLogistic;
  if (s == "linear") return Task::kLinear;
  if (s == "hinge") return Task::kHinge;
  if (s == "softmax") return Task::kSoftmax;
  throw ConfigError("learner task '" + s + "' is not one of logistic, linear, hinge, softmax");
}

OptimizerKind parse_optimizer(const std::string& s) {
  if (s == "sgd") return OptimizerKind::kSgd;
  if (s == "adagrad") return OptimizerKind::kAdaGrad;
  throw ConfigError("optimizer '" + s + "' is not one of sgd, adagrad");
}

void validate(const LearnerConfig& c) {
  if (c.task != Task::kLogistic && c.task != Task::kLinear && c.task != Task::kHinge && c.task != Task::kSoftmax) {
    throw ConfigError("learner task " + std::to_string(static_cast<int>(c.task)) + " is unknown");
  }
  if (c.num_features < 1 || c.num_features > (std::size_t{1} << 31)) {
    throw ConfigError("learner num_features " + std::to_string(c.num_features) + " is outside [1, 2^31]");
  }
  if (c.task == Task::kSoftmax && (c.num_classes < 2 || c.num_classes > 65536)) {
    throw ConfigError("learner num_classes " + std::to_string(c.num_classes) + " is outside [2, 65536]");
  }
  if (weight_count(c) > (std::size_t{1} << 32) - 1) {
    throw ConfigError("learner: num_classes * (num_features + 1) = " + std::to_string(weight_count(c)) +
                      " weights exceed 2^32 - 1");
  }
  if (!(c.l2 >= 0) || !std::isfinite(c.l2)) throw ConfigError("learner l2 must be finite and >= 0");
  if (c.optimizer != OptimizerKind::kSgd && c.optimizer != OptimizerKind::kAdaGrad) {
    throw ConfigError("learner optimizer " + std::to_string(static_cast<int>(c.optimizer)) + " is unknown");
  }
  if (!(c.eta0 > 0) || !std::isfinite(c.eta0)) {
    throw ConfigError("learner eta0 must be finite and > 0 (got " + std::to_string(c.eta0) + ")");
  }
  if (!(c.adagrad_init > 0) || !std::isfinite(c.adagrad_init)) {
    throw ConfigError("learner adagrad_init must be finite and > 0 (got " + std::to_string(c.adagrad_init) + ")");
  }
}

namespace {

constexpr int kSmallOutputs = 16;

// Scores m_k = w_k . x + b_k, into m[0 .. outputs). Checks the example's shape on the way.
void scores(const LearnerConfig& c, const WeightsView& w, const Example& x, double* m) {
  const int K = outputs(c);
  const std::size_t d = c.num_features;
  if (static_cast<std::size_t>(w.size()) != weight_count(c)) {
    throw std::invalid_argument("learner: weight vector has " + std::to_string(w.size()) + " entries, expected " +
                                std::to_string(weight_count(c)));
  }
  if (!x.is_sparse()) {
    if (static_cast<std::size_t>(x.dense.size()) != d) {
      throw InputError("example has " + std::to_string(x.dense.size()) + " dense features, the learner expects " +
                       std::to_string(d));
    }
    for (int k = 0; k < K; ++k) {
      const Eigen::Index base = static_cast<Eigen::Index>(k) * static_cast<Eigen::Index>(d + 1);
      m[k] = w.segment(base, static_cast<Eigen::Index>(d)).dot(x.dense) + w[base + static_cast<Eigen::Index>(d)];
    }
  } else {
    if (x.indices.size() != x.values.size()) throw InputError("sparse example: indices and values differ in length");
    for (int k = 0; k < K; ++k) {
      const std::size_t base = static_cast<std::size_t>(k) * (d + 1);
      double s = w[static_cast<Eigen::Index>(base + d)];
      for (std::size_t f = 0; f < x.indices.size(); ++f) {
        if (x.indices[f] >= d) {
          throw InputError("sparse example: feature index " + std::to_string(x.indices[f]) +
                           " is not below the learner's num_features " + std::to_string(d));
        }
        s += w[static_cast<Eigen::Index>(base + x.indices[f])] * x.values[f];
      }
      m[k] = s;
    }
  }
  for (int k = 0; k < K; ++k) {
    if (!std::isfinite(m[k])) throw InputError("example gives a non-finite score (a non-finite feature value?)");
  }
}

double binary_y(double label) { return label > 0 ? 1.0 : -1.0; }

int class_of(const LearnerConfig& c, double label) {
  if (!(label >= 0) || label >= c.num_classes || label != std::floor(label)) {
    throw InputError("class label " + std::to_string(label) + " is not an integer in [0, " +
                     std::to_string(c.num_classes) + ")");
  }
  return static_cast<int>(label);
}

void check_label(const Example& x) {
  if (!std::isfinite(x.label)) throw InputError("example label is not finite");
}

// log(1 + exp(z)) without overflow.
double log1pexp(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }
double sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

// Softmax of m in place into p; returns log-sum-exp of m.
double softmax(const double* m, double* p, int K) {
  const double mx = *std::max_element(m, m + K);
  double sum = 0;
  for (int k = 0; k < K; ++k) sum += (p[k] = std::exp(m[k] - mx));
  for (int k = 0; k < K; ++k) p[k] /= sum;
  return mx + std::log(sum);
}

// A small buffer of per-output doubles (no allocation for K <= kSmallOutputs).
class OutputBuffer {
 public:
  explicit OutputBuffer(int K) {
    if (K > kSmallOutputs) big_.resize(static_cast<std::size_t>(K));
  }
  double* data() { return big_.empty() ? small_ : big_.data(); }

 private:
  double small_[kSmallOutputs];
  std::vector<double> big_;
};

// Loss and dloss/dm_k at the scores m (written to s when non-null).
double loss_at(const LearnerConfig& c, const double* m, const Example& x, double* s) {
  check_label(x);
  switch (c.task) {
    case Task::kLogistic: {
      const double y = binary_y(x.label);
      if (s) s[0] = -y * sigmoid(-y * m[0]);
      return log1pexp(-y * m[0]);
    }
    case Task::kLinear: {
      const double r = m[0] - x.label;
      if (s) s[0] = r;
      return 0.5 * r * r;
    }
    case Task::kHinge: {
      const double y = binary_y(x.label);
      const double margin = y * m[0];
      if (s) s[0] = margin < 1 ? -y : 0.0;
      return std::max(0.0, 1 - margin);
    }
    case Task::kSoftmax: {
      const int y = class_of(c, x.label);
      OutputBuffer pb(c.num_classes);
      double* p = pb.data();
      const double lse = softmax(m, p, c.num_classes);
      if (s) {
        for (int k = 0; k < c.num_classes; ++k) s[k] = p[k] - (k == y ? 1.0 : 0.0);
      }
      return lse - m[y];
    }
  }
  return 0;
}

// The prediction at the scores m.
Prediction prediction_at(const LearnerConfig& c, const double* m) {
  switch (c.task) {
    case Task::kLogistic:
      return {sigmoid(m[0]), m[0] >= 0 ? 1.0 : -1.0};
    case Task::kLinear:
      return {m[0], m[0]};
    case Task::kHinge:
      return {m[0], m[0] >= 0 ? 1.0 : -1.0};
    case Task::kSoftmax: {
      OutputBuffer pb(c.num_classes);
      double* p = pb.data();
      softmax(m, p, c.num_classes);
      const int best = static_cast<int>(std::max_element(p, p + c.num_classes) - p);
      return {p[best], static_cast<double>(best)};
    }
  }
  return {};
}

// The gradient given dloss/dm_k = s[k] (see gradient()).
void gradient_at(const LearnerConfig& c, const WeightsView& w, const Example& x, const double* s, SparseVector& g) {
  g.clear();
  const std::size_t d = c.num_features;
  const double l2 = c.l2;
  for (int k = 0; k < outputs(c); ++k) {
    if (s[k] == 0 && l2 == 0) continue;  // nothing moves (a satisfied hinge margin)
    const std::size_t base = static_cast<std::size_t>(k) * (d + 1);
    if (x.is_sparse()) {
      for (std::size_t f = 0; f < x.indices.size(); ++f) {
        const std::size_t i = base + x.indices[f];
        g.push(static_cast<std::uint32_t>(i), s[k] * x.values[f] + l2 * w[static_cast<Eigen::Index>(i)]);
      }
    } else {
      for (std::size_t j = 0; j < d; ++j) {
        const std::size_t i = base + j;
        g.push(static_cast<std::uint32_t>(i),
               s[k] * x.dense[static_cast<Eigen::Index>(j)] + l2 * w[static_cast<Eigen::Index>(i)]);
      }
    }
    g.push(static_cast<std::uint32_t>(base + d), s[k]);
  }
}

}  // namespace

OptimizerState make_optimizer_state(const LearnerConfig& c) {
  OptimizerState o;
  if (c.optimizer == OptimizerKind::kAdaGrad) {
    o.sum_sq = Eigen::VectorXd::Constant(static_cast<Eigen::Index>(weight_count(c)), c.adagrad_init);
  }
  return o;
}

Prediction predict(const LearnerConfig& c, const WeightsView& w, const Example& x) {
  OutputBuffer mb(outputs(c));
  double* m = mb.data();
  scores(c, w, x, m);
  return prediction_at(c, m);
}

double loss(const LearnerConfig& c, const WeightsView& w, const Example& x) {
  OutputBuffer mb(outputs(c));
  double* m = mb.data();
  scores(c, w, x, m);
  return loss_at(c, m, x, nullptr);
}

double objective(const LearnerConfig& c, const WeightsView& w, const Example& x) {
  double f = loss(c, w, x);
  if (c.l2 == 0) return f;
  const std::size_t d = c.num_features;
  double sq = 0;
  for (int k = 0; k < outputs(c); ++k) {
    const Eigen::Index base = static_cast<Eigen::Index>(k) * static_cast<Eigen::Index>(d + 1);
    if (x.is_sparse()) {
      for (const std::uint32_t i : x.indices) sq += w[base + i] * w[base + i];
    } else {
      sq += w.segment(base, static_cast<Eigen::Index>(d)).squaredNorm();
    }
  }
  return f + 0.5 * c.l2 * sq;
}

bool correct(const LearnerConfig& c, const Prediction& p, const Example& x) {
  switch (c.task) {
    case Task::kLogistic:
    case Task::kHinge:
      return p.label == binary_y(x.label);
    case Task::kSoftmax:
      return p.label == x.label;
    case Task::kLinear:
      return false;
  }
  return false;
}

void gradient(const LearnerConfig& c, const WeightsView& w, const Example& x, SparseVector& g) {
  const int K = outputs(c);
  OutputBuffer mb(K), sb(K);
  double* m = mb.data();
  double* s = sb.data();
  scores(c, w, x, m);
  loss_at(c, m, x, s);
  gradient_at(c, w, x, s, g);
}

void make_step(const LearnerConfig& c, OptimizerState& opt, SparseVector& g) {
  ++opt.t;
  if (c.optimizer == OptimizerKind::kSgd) {
    const double eta = c.eta0 / std::sqrt(static_cast<double>(opt.t));
    for (double& v : g.value) v *= -eta;
    return;
  }
  if (static_cast<std::size_t>(opt.sum_sq.size()) != weight_count(c)) {
    throw std::invalid_argument("make_step: AdaGrad state has " + std::to_string(opt.sum_sq.size()) +
                                " sums, expected " + std::to_string(weight_count(c)));
  }
  for (std::size_t k = 0; k < g.size(); ++k) {
    double& acc = opt.sum_sq[static_cast<Eigen::Index>(g.index[k])];
    acc += g.value[k] * g.value[k];
    g.value[k] *= -c.eta0 / std::sqrt(acc);
  }
}

Learner make_learner(const LearnerConfig& c) {
  validate(c);
  Learner l;
  l.config = c;
  l.weights = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(weight_count(c)));
  l.optimizer = make_optimizer_state(c);
  return l;
}

Outcome learn(Learner& l, const Example& x) {
  const LearnerConfig& c = l.config;
  const int K = outputs(c);
  OutputBuffer mb(K), sb(K);
  double* m = mb.data();
  double* s = sb.data();
  scores(c, l.weights, x, m);  // once: the prediction, the loss and the gradient all start from the scores
  Outcome o;
  o.prediction = prediction_at(c, m);
  o.loss = loss_at(c, m, x, s);
  o.correct = correct(c, o.prediction, x);
  gradient_at(c, l.weights, x, s, l.scratch);
  make_step(c, l.optimizer, l.scratch);
  apply_step(l.scratch, l.weights);
  return o;
}

namespace {
constexpr std::uint32_t kTag = 0x4C4D4641;  // "AFML"
constexpr std::uint16_t kVersion = 1;
}  // namespace

void serialize(const Learner& l, ByteWriter& out) {
  const std::size_t start = out.size();
  const LearnerConfig& c = l.config;
  out.put<std::uint32_t>(kTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint16_t>(0);  // flags, reserved
  out.put<std::uint8_t>(static_cast<std::uint8_t>(c.task));
  out.put<std::uint8_t>(static_cast<std::uint8_t>(c.optimizer));
  out.put<std::uint64_t>(c.num_features);
  out.put<std::int32_t>(c.num_classes);
  out.put<double>(c.l2);
  out.put<double>(c.eta0);
  out.put<double>(c.adagrad_init);
  out.put<std::uint64_t>(l.optimizer.t);
  out.put_array<double>(std::span<const double>(l.weights.data(), static_cast<std::size_t>(l.weights.size())));
  out.put_array<double>(
      std::span<const double>(l.optimizer.sum_sq.data(), static_cast<std::size_t>(l.optimizer.sum_sq.size())));
  out.put<std::uint64_t>(XXH3_64bits(out.buffer().data() + start, out.size() - start));
}

Learner deserialize_learner(ByteReader& in) {
  const std::span<const std::uint8_t> record = in.rest();
  const std::size_t start = in.position();
  const auto tag = in.get<std::uint32_t>("learner tag");
  if (tag != kTag) throw FormatError("learner snapshot: wrong tag " + std::to_string(tag) + " (not a learner)");
  const auto version = in.get<std::uint16_t>("learner format version");
  if (version != kVersion) {
    throw FormatError("learner snapshot: unsupported format version " + std::to_string(version) + " (expected " +
                      std::to_string(kVersion) + ")");
  }
  if (const auto flags = in.get<std::uint16_t>("learner flags"); flags != 0) {
    throw FormatError("learner snapshot: unknown flags " + std::to_string(flags));
  }
  LearnerConfig c;
  c.task = static_cast<Task>(in.get<std::uint8_t>("learner task"));
  c.optimizer = static_cast<OptimizerKind>(in.get<std::uint8_t>("learner optimizer"));
  c.num_features = in.get<std::uint64_t>("learner num_features");
  c.num_classes = in.get<std::int32_t>("learner num_classes");
  c.l2 = in.get<double>("learner l2");
  c.eta0 = in.get<double>("learner eta0");
  c.adagrad_init = in.get<double>("learner adagrad_init");
  try {
    validate(c);
  } catch (const ConfigError& e) {
    throw FormatError(std::string("learner snapshot: bad configuration: ") + e.what());
  }
  const auto t = in.get<std::uint64_t>("learner update count");
  auto weights = in.get_array<double>("learner weights");
  if (weights.size() != weight_count(c)) {
    throw FormatError("learner snapshot: " + std::to_string(weights.size()) + " weights, the configuration needs " +
                      std::to_string(weight_count(c)));
  }
  auto sums = in.get_array<double>("learner AdaGrad sums");
  const std::size_t want_sums = c.optimizer == OptimizerKind::kAdaGrad ? weight_count(c) : 0;
  if (sums.size() != want_sums) {
    throw FormatError("learner snapshot: " + std::to_string(sums.size()) + " AdaGrad sums, expected " +
                      std::to_string(want_sums));
  }
  const std::uint64_t computed = XXH3_64bits(record.data(), in.position() - start);
  if (in.get<std::uint64_t>("learner checksum") != computed) {
    throw FormatError("learner snapshot: checksum mismatch (corrupt data)");
  }
  Learner l;
  l.config = c;
  l.weights = Eigen::Map<const Eigen::VectorXd>(weights.data(), static_cast<Eigen::Index>(weights.size()));
  l.optimizer.t = t;
  l.optimizer.sum_sq = Eigen::Map<const Eigen::VectorXd>(sums.data(), static_cast<Eigen::Index>(sums.size()));
  return l;
}

}  // namespace afs::ml
