// Unit tests of the dataset writers (ml/writers.h): what they write, the readers give back (dense examples bit for
// bit, sparse ones with their collided entries summed), for every kind of label; the refusals.
#include "ml/writers.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "afstream/core/errors.h"
#include "ml/generators.h"
#include "ml/readers.h"

namespace afs::ml {
namespace {

std::string written(const Dataset& d, TextFormat f, std::uint64_t begin = 0, std::uint64_t end = ~0ULL) {
  std::ostringstream out;
  write_examples(d, begin, std::min(end, d.size()), f, out, "test");
  return out.str();
}

ReadResult read_back(const std::string& text, TextFormat f, LabelKind labels) {
  std::istringstream in(text);
  return f == TextFormat::kCsv ? parse_csv(in, "test", {.labels = labels})
                               : parse_libsvm(in, "test", {.labels = labels});
}

// A sparse example as the learner sees it: the sum of its entries per index (collided hashed features add up).
std::map<std::uint32_t, double> summed(const Example& x) {
  std::map<std::uint32_t, double> m;
  for (std::size_t k = 0; k < x.indices.size(); ++k) m[x.indices[k]] += x.values[k];
  std::erase_if(m, [](const auto& e) { return e.second == 0; });
  return m;
}

TEST(Writers, DenseExamplesReadBackBitForBitInBothFormats) {
  const SyntheticParams kinds[] = {
      higgs_like(300, 7),
      {.model = SyntheticModel::kLinear, .num_examples = 300, .num_features = 5, .noise = 0.2, .seed = 2},
      {.model = SyntheticModel::kMulticlass,
       .num_examples = 300,
       .num_features = 6,
       .noise = 0.3,
       .num_classes = 5,
       .seed = 3},
  };
  for (const SyntheticParams& p : kinds) {
    const SyntheticDataset d(p);
    const LabelKind labels = d.info().labels;
    const ReadResult csv = read_back(written(d, TextFormat::kCsv), TextFormat::kCsv, labels);
    ASSERT_EQ(csv.data.size(), d.size());
    EXPECT_EQ(csv.data.info().num_features, d.info().num_features);
    for (std::uint64_t n = 0; n < d.size(); ++n) {
      ASSERT_EQ(csv.data.example(n), d.example(n)) << "example " << n;
    }
    const ReadResult svm = read_back(written(d, TextFormat::kLibsvm), TextFormat::kLibsvm, labels);
    ASSERT_EQ(svm.data.size(), d.size());
    for (std::uint64_t n = 0; n < d.size(); ++n) {
      const Example a = d.example(n), b = svm.data.example(n);
      EXPECT_EQ(b.label, a.label);
      std::map<std::uint32_t, double> dense;
      for (Eigen::Index j = 0; j < a.dense.size(); ++j) {
        if (a.dense[j] != 0) dense[static_cast<std::uint32_t>(j)] = a.dense[j];
      }
      ASSERT_EQ(summed(b), dense) << "example " << n;
    }
  }
}

TEST(Writers, SparseExamplesReadBackWithCollidedEntriesSummed) {
  // KDD-like: 11 hashed features per example over 2^b slots; with few bits many collide.
  for (const int bits : {18, 4}) {
    SyntheticParams p = kdd_like(400, 9);
    p.hash_bits = bits;
    const SyntheticDataset d(p);
    const std::string text = written(d, TextFormat::kLibsvm);
    const ReadResult r = read_back(text, TextFormat::kLibsvm, LabelKind::kBinary);
    ASSERT_EQ(r.data.size(), d.size());
    EXPECT_LE(r.data.info().num_features, d.info().num_features);
    bool collided = false;
    for (std::uint64_t n = 0; n < d.size(); ++n) {
      const Example a = d.example(n), b = r.data.example(n);
      EXPECT_EQ(b.label, a.label);
      EXPECT_EQ(summed(b), summed(a)) << "example " << n;
      EXPECT_EQ(b.indices.size(), summed(a).size());  // each index once
      collided |= summed(a).size() < a.indices.size();
    }
    if (bits == 4) {
      EXPECT_TRUE(collided);
    }
  }
}

TEST(Writers, ARangeIsWrittenInOrderAndProgressIsReported) {
  const SyntheticDataset d(higgs_like(200'000, 1));
  std::ostringstream out;
  std::vector<std::uint64_t> seen;
  EXPECT_EQ(write_examples(d, 100, 140'100, TextFormat::kCsv, out, "test", [&](std::uint64_t n) { seen.push_back(n); }),
            140'000u);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{65536, 131072, 140000}));
  const ReadResult r = read_back(out.str(), TextFormat::kCsv, LabelKind::kBinary);
  ASSERT_EQ(r.data.size(), 140'000u);
  EXPECT_EQ(r.data.example(0), d.example(100));
  EXPECT_EQ(r.data.example(139'999), d.example(140'099));
}

TEST(Writers, RefuseWhatCannotBeWritten) {
  const SyntheticDataset sparse(kdd_like(10, 1));
  std::ostringstream out;
  EXPECT_THROW(write_examples(sparse, 0, 10, TextFormat::kCsv, out, "x"), ConfigError);
  EXPECT_THROW(write_examples(sparse, 0, 11, TextFormat::kLibsvm, out, "x"), ConfigError);
  EXPECT_THROW(write_examples(sparse, 5, 4, TextFormat::kLibsvm, out, "x"), ConfigError);
  EXPECT_THROW((void)parse_text_format("vw"), ConfigError);
  EXPECT_EQ(parse_text_format("libsvm"), TextFormat::kLibsvm);
  EXPECT_EQ(natural_format(sparse.info()), TextFormat::kLibsvm);
  std::ostringstream broken;
  broken.setstate(std::ios::badbit);
  try {
    write_examples(sparse, 0, 10, TextFormat::kLibsvm, broken, "/full/disk.svm");
    FAIL() << "a failed stream must be an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/full/disk.svm"), std::string::npos);
  }
}

}  // namespace
}  // namespace afs::ml
