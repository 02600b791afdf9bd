// Seeded synthetic datasets with a known true model (issue 5; PAPER.md "Workloads": synthetic logistic/linear data
// standing in for KDD Cup 2012 and HIGGS). Random access: example n depends only on (params, n), computed from a
// counter-based random stream, so any range can be generated, replayed after a failure, or split among workers.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "ml/dataset.h"

namespace afs::ml {

enum class SyntheticModel : std::uint8_t {
  kLogistic = 1,    // y = +1 with probability sigmoid(m / noise) (noise 0: y = sign(m)); labels +1/-1
  kLinear = 2,      // y = m + noise * N(0, 1)
  kMulticlass = 3,  // y = argmax_k (m_k + noise * Gumbel_k), i.e. a draw from softmax(m / noise); ids 0 .. K-1
};

// Parameters; use designated initializers. m = w(n) . x + b is the true score of example n.
struct SyntheticParams {
  SyntheticModel model = SyntheticModel::kLogistic;
  std::uint64_t num_examples = 0;  // examples 0 .. N-1, N in [1, 2^62]
  std::size_t num_features = 0;    // dense dimension, or the raw feature-id space of sparse data; in [1, 2^31]
  bool sparse = false;
  // Sparse: each example has `active` features of value 1, one per field: the id space is cut into `active` equal
  // fields (categorical columns, as in click logs) and field f draws id f*C + floor(C * u^(1 + skew)), C the field
  // size, so skew > 0 makes low ids popular (learnable) and high ids rare.
  std::size_t active = 0;
  double skew = 0;          // >= 0
  int hash_bits = 0;        // sparse: 0 = the raw id is the index; 1..31 = hash_index(id, 0, hash_bits)
  double noise = 0;         // >= 0 (temperature, or the regression noise's standard deviation)
  double drift = 0;         // w(n) = cos(drift * n) a + sin(drift * n) b for independent random a, b (0 = fixed model)
  double weight_scale = 1;  // > 0: true weights and biases are N(0, weight_scale^2)
  int num_classes = 2;      // K for kMulticlass, in [2, 65536]
  std::uint64_t seed = 0;
};

// The HIGGS-like dense set: 28 N(0, 1) features, logistic labels with a weak signal (a linear model reaches about
// two thirds accuracy, as on HIGGS).
SyntheticParams higgs_like(std::uint64_t num_examples, std::uint64_t seed);
// The KDD-like sparse set: 11 categorical fields over 10^6 raw ids (skew 2), hashed into 2^18 weights, logistic.
SyntheticParams kdd_like(std::uint64_t num_examples, std::uint64_t seed);

class SyntheticDataset final : public Dataset {
 public:
  // Throws ConfigError naming the parameter and its range.
  explicit SyntheticDataset(const SyntheticParams& p);

  std::uint64_t size() const override { return p_.num_examples; }
  DatasetInfo info() const override;
  void example(std::uint64_t n, Example& out) const override;
  using Dataset::example;

  const SyntheticParams& params() const { return p_; }
  // The true weight of raw feature j for output k (0 for binary/linear) at example n, and the true bias.
  double true_weight(int k, std::uint64_t j, std::uint64_t n = 0) const;
  double true_bias(int k, std::uint64_t n = 0) const;
  // The true model at example n in a learner's layout (outputs blocks of num_features + 1, bias last), over raw
  // features. Meaningful for a learner when the data is dense or unhashed; std::invalid_argument above 2^24 entries.
  Eigen::VectorXd true_weights(std::uint64_t n = 0) const;

 private:
  int outputs() const { return p_.model == SyntheticModel::kMulticlass ? p_.num_classes : 1; }
  double score(int k, const Example& x, const std::vector<std::uint64_t>& raw, std::uint64_t n) const;

  SyntheticParams p_;
  std::uint64_t example_base_;  // mixed seed of the example streams
  std::uint64_t weight_base_;   // mixed seed of the true weights
  Eigen::VectorXd a_, b_;       // dense: the two true-weight components, learner layout
};

}  // namespace afs::ml
