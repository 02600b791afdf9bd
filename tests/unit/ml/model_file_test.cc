// Unit tests of the model file (ml/learn_options.h: write_model, read_model), a run's model.csv: what write_model
// writes read_model gives back bit for bit, with the model's size even when its last weights are 0.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "afstream/core/errors.h"
#include "ml/learn_options.h"
#include "tests/temp_dir.h"

namespace afs::ml {
namespace {

TEST(ModelFile, WhatIsWrittenReadsBackBitForBitWithItsSize) {
  afs::testing::TempDir dir;
  const std::string path = (dir.path() / "model.csv").string();
  Eigen::VectorXd w = Eigen::VectorXd::Zero(10);
  w[0] = 0.1;
  w[3] = -1.0 / 3;
  w[7] = std::numeric_limits<double>::denorm_min();
  // The last weight (a bias) 0: written anyway, so that the size is known.
  write_model(path, w);
  ModelFile m = read_model(path);
  EXPECT_EQ(m.size, 10u);
  ASSERT_EQ(m.weights.size(), 4u);
  for (const auto& [i, v] : m.weights) EXPECT_EQ(v, w[static_cast<Eigen::Index>(i)]) << i;
  EXPECT_EQ(m.weights.back().first, 9u);
  w[9] = 2.5;
  write_model(path, w);
  m = read_model(path);
  EXPECT_EQ(m.size, 10u);
  EXPECT_EQ(m.weights.size(), 4u);
  // An empty model: the header and the last (zero) weight.
  write_model(path, Eigen::VectorXd::Zero(3));
  m = read_model(path);
  EXPECT_EQ(m.size, 3u);
  EXPECT_EQ(m.weights.size(), 1u);
}

TEST(ModelFile, CrlfLinesAreRead) {
  afs::testing::TempDir dir;
  const std::string path = (dir.path() / "model.csv").string();
  std::ofstream(path) << "index,weight\r\n0,1.5\r\n4,-2\r\n";
  const ModelFile m = read_model(path);
  EXPECT_EQ(m.size, 5u);
  ASSERT_EQ(m.weights.size(), 2u);
  EXPECT_EQ(m.weights[1].second, -2);
}

TEST(ModelFile, MalformedRowsAreRefusedNamingFileAndLine) {
  afs::testing::TempDir dir;
  const std::string path = (dir.path() / "m.csv").string();
  const auto refused = [&](const std::string& text, const std::string& expected) {
    std::ofstream(path) << text;
    try {
      (void)read_model(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + expected), std::string::npos) << e.what();
    }
  };
  refused("", ": empty");
  refused("index;weight\n", ":1: expected the header");
  refused("index,weight\n1,2\n1,3\n", ":3: index 1 after 1");
  refused("index,weight\n2,2\n1,3\n", ":3: index 1 after 2");
  refused("index,weight\nx,2\n", ":2: index 'x'");
  refused("index,weight\n1.5,2\n", ":2: index '1.5'");
  refused("index,weight\n,2\n", ":2: index ''");
  refused("index,weight\n1,\n", ":2: weight ''");
  refused("index,weight\n1, 2\n", ":2: weight ' 2'");
  refused("index,weight\n1,nan\n", ":2: weight 'nan'");
  refused("index,weight\n1,1e999\n", ":2: weight '1e999'");
  refused("index,weight\n1\n", ":2: expected 'index,weight'");
  refused("index,weight\n1,2,3\n", ":2: expected 'index,weight'");
  try {
    (void)read_model((dir.path() / "missing.csv").string());
    ADD_FAILURE() << "a missing file was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.model: cannot read the model file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace afs::ml
