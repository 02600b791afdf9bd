// Random-access datasets (issue 5): every source of examples -- a file loaded by a reader, a seeded generator -- is
// indexed by example number, so that a stream can carry example indices in 32-byte afstream Items and a learner
// operator fetches example n itself. Example n must depend only on the dataset and n: replaying a range after a
// failure sees the same examples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ml/example.h"

namespace afs::ml {

// What kind of labels a dataset holds.
enum class LabelKind : std::uint8_t {
  kBinary = 1,  // +1 / -1 (readers also accept 0/1 and store -1/+1)
  kReal = 2,    // regression targets
  kClass = 3,   // class ids 0 .. K-1
};

// Shape of a dataset's examples, enough to configure a learner for it.
struct DatasetInfo {
  std::size_t num_features = 0;  // dense dimension, or the sparse index space (2^b when hashed)
  bool sparse = false;
  LabelKind labels = LabelKind::kBinary;
  int num_classes = 2;  // K for kClass (one more than the largest class id seen); 2 for binary; 0 for real
};

// A random-access dataset of size() examples. Implementations are immutable after construction, so example() may be
// called from several threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::uint64_t size() const = 0;
  virtual DatasetInfo info() const = 0;
  // Writes example n (n < size(), else std::out_of_range) into out, reusing its storage.
  virtual void example(std::uint64_t n, Example& out) const = 0;
  Example example(std::uint64_t n) const {
    Example e;
    example(n, e);
    return e;
  }
};

// Examples held in memory (what the file readers return).
class InMemoryDataset final : public Dataset {
 public:
  InMemoryDataset(DatasetInfo info, std::vector<Example> examples) : info_(info), examples_(std::move(examples)) {}
  std::uint64_t size() const override { return examples_.size(); }
  DatasetInfo info() const override { return info_; }
  void example(std::uint64_t n, Example& out) const override;
  using Dataset::example;
  const std::vector<Example>& examples() const { return examples_; }

 private:
  DatasetInfo info_;
  std::vector<Example> examples_;
};

}  // namespace afs::ml
