// Examples for the online learners (issue 5): a label and either dense features (an Eigen vector) or sparse
// features (index/value pairs whose indices are weights, usually hashed into 2^b slots as Vowpal Wabbit does).
// Engine-free: an afstream Item (32 bytes) cannot carry an example, so streams carry example indices and operators
// fetch the example from a random-access Dataset (dataset.h).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string_view>
#include <vector>

namespace afs::ml {

// One training example. Dense when `dense` is non-empty, otherwise sparse (`indices`/`values`, same length;
// an index may repeat, its contributions add up). The label is +1/-1 for binary tasks (any value > 0 counts as +1,
// so 0/1 labels work too), a real number for regression and a class id 0 .. K-1 for multiclass.
struct Example {
  Eigen::VectorXd dense;
  std::vector<std::uint32_t> indices;
  std::vector<double> values;
  double label = 0;

  bool is_sparse() const { return dense.size() == 0; }
  // Number of non-zero feature slots (dense: the dimension).
  std::size_t feature_count() const { return is_sparse() ? indices.size() : static_cast<std::size_t>(dense.size()); }
  void clear() {
    dense.resize(0);
    indices.clear();
    values.clear();
    label = 0;
  }
  void add_feature(std::uint32_t index, double value) {
    indices.push_back(index);
    values.push_back(value);
  }
  friend bool operator==(const Example& a, const Example& b) {
    return a.label == b.label && a.indices == b.indices && a.values == b.values && a.dense.size() == b.dense.size() &&
           (a.dense.size() == 0 || a.dense == b.dense);
  }
};

// Feature hashing as Vowpal Wabbit does it: the namespace name is hashed (XXH3-64, seed 0) and its hash seeds the
// hash of the feature name; the low `bits` bits of the result are the weight index. bits in [1, 32].
std::uint64_t hash_namespace(std::string_view ns);
std::uint32_t hash_feature(std::uint64_t namespace_hash, std::string_view name, int bits);
// A numeric raw feature id (generators, LIBSVM with hashing) hashed into 2^bits slots under a seed.
std::uint32_t hash_index(std::uint64_t raw, std::uint64_t seed, int bits);

}  // namespace afs::ml
