// Integration tests of `afstream run --job ps` on users' files (the real binary in a child process): a LIBSVM and a
// CSV file drawn from a known logistic model are learned under BSP above 90% held-out accuracy, and two BSP runs
// give the same model and scores; a malformed line fails naming file:line, and `--learn.on-error skip` skips it and
// counts it (learn.csv, the summary, skipped.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::slurp;
using afs::testing::TempDir;

constexpr int kLines = 2000;
constexpr int kHoldout = 500;
// The known model: score = w . x + b over 4 N(0,1) features (the last irrelevant), y = 1 with probability
// sigmoid(score). ||w|| = 10.8, so the Bayes rate is about 95%.
constexpr double kTrue[4] = {8, -6, 4, 0};
constexpr double kBias = 1;

struct Example {
  int label = 0;  // 0 / 1
  double x[4] = {};
};

std::vector<Example> draw(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  std::uniform_real_distribution<double> u01;
  std::vector<Example> v(kLines);
  for (auto& e : v) {
    double m = kBias;
    for (int j = 0; j < 4; ++j) m += kTrue[j] * (e.x[j] = n01(rng));
    e.label = u01(rng) < 1 / (1 + std::exp(-m)) ? 1 : 0;
  }
  return v;
}

// The examples as CSV (label first, 0/1) or LIBSVM (+1/-1, 1-based indices); `bad_line` (1-based, 0 = none)
// is written malformed instead.
void write_csv(const fs::path& path, const std::vector<Example>& v, int bad_line = 0) {
  std::ofstream f(path);
  for (int i = 0; i < static_cast<int>(v.size()); ++i) {
    if (i + 1 == bad_line) {
      f << "1,0.5,abc,0.25,0.125\n";
      continue;
    }
    f << v[i].label;
    for (const double x : v[i].x) f << ',' << x;
    f << '\n';
  }
}
void write_libsvm(const fs::path& path, const std::vector<Example>& v, int bad_line = 0) {
  std::ofstream f(path);
  for (int i = 0; i < static_cast<int>(v.size()); ++i) {
    if (i + 1 == bad_line) {
      f << "+1 1:0.5 2=0.25 3:0.125\n";
      continue;
    }
    f << (v[i].label ? "+1" : "-1");
    for (int j = 0; j < 4; ++j) f << ' ' << j + 1 << ':' << v[i].x[j];
    f << '\n';
  }
}

afs::testing::ProgramResult run(const std::string& args, const fs::path& scratch) {
  return afs::testing::run_program(AFS_BINARY, args, scratch);
}

// learn.csv's row as column -> value (text).
std::map<std::string, std::string> learn_row(const fs::path& dir) {
  std::istringstream in(slurp(dir / "learn.csv"));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const auto h = afs::testing::split_csv(header), v = afs::testing::split_csv(row);
  std::map<std::string, std::string> m;
  for (std::size_t i = 0; i < h.size() && i < v.size(); ++i) m[h[i]] = v[i];
  return m;
}

// model.csv (index,weight) as index -> weight.
std::map<long, double> model(const fs::path& dir) {
  std::istringstream in(slurp(dir / "model.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "index,weight");
  std::map<long, double> w;
  while (std::getline(in, line)) {
    const auto c = afs::testing::split_csv(line);
    if (c.size() == 2) w[std::stol(c[0])] = std::stod(c[1]);
  }
  return w;
}

std::string ps_args(const fs::path& file, const std::string& format, const fs::path& out) {
  return "run --job ps --runtime threads --learn.consistency bsp --learn.workers 2 --learn.servers 2 "
         "--learn.batch 8 --learn.data file --learn.file " +
         file.string() + " --learn.format " + format + " --learn.holdout " + std::to_string(kHoldout) +
         " --quiet --out " + out.string();
}

// A LIBSVM file (hashed into 2^18 weights, the default) and a CSV file (dense: 4 features and the bias) of the same
// 2,000 examples: BSP learns each above 90% on the last 500, and a second run gives byte-identical learn.csv and
// model.csv. On the CSV file the learned weights point the true model's way (cosine > 0.95).
TEST(PsFileCli, BspLearnsLibsvmAndCsvFilesTheSameTwice) {
  TempDir scratch;
  const auto examples = draw(11);
  const auto csv = scratch.path() / "data.csv", svm = scratch.path() / "data.svm";
  write_csv(csv, examples);
  write_libsvm(svm, examples);
  for (const auto& [file, format] : {std::pair{svm, "libsvm"}, std::pair{csv, "csv"}}) {
    TempDir a, b;
    for (const auto* d : {&a, &b}) {
      const auto r = run(ps_args(file, format, d->path()), scratch.path());
      ASSERT_EQ(r.status, 0) << format << ": " << r.err;
    }
    const auto row = learn_row(a.path());
    EXPECT_EQ(std::stod(row.at("examples")), kLines - kHoldout) << format;
    EXPECT_EQ(std::stod(row.at("holdout_examples")), kHoldout) << format;
    EXPECT_GT(std::stod(row.at("holdout_accuracy")), 0.9) << format;
    EXPECT_GT(std::stod(row.at("progressive_accuracy")), 0.85) << format;
    EXPECT_EQ(row.at("consistency"), "bsp");
    EXPECT_EQ(std::stod(row.at("max_staleness")), 0) << format;
    EXPECT_EQ(std::stod(row.at("skipped_lines")), 0) << format;
    EXPECT_EQ(row.at("l1_to_true"), "nan") << format;  // unknown for a file
    // BSP is deterministic: the same scores and the same weights, bit for bit.
    EXPECT_EQ(slurp(a.path() / "learn.csv"), slurp(b.path() / "learn.csv")) << format;
    EXPECT_EQ(slurp(a.path() / "model.csv"), slurp(b.path() / "model.csv")) << format;
    const auto w = model(a.path());
    if (std::string(format) == "libsvm") {
      EXPECT_LE(w.size(), 5u);  // 4 hashed features and the bias
      EXPECT_GE(w.size(), 4u);
      for (const auto& [i, v] : w) EXPECT_LE(i, 1L << 18);  // the bias is weight 2^18
    } else {
      ASSERT_GE(w.size(), 4u);
      double dot = 0, nw = 0, nt = 0;
      for (int j = 0; j < 4; ++j) {
        const double v = w.count(j) ? w.at(j) : 0;
        dot += v * kTrue[j], nw += v * v, nt += kTrue[j] * kTrue[j];
      }
      EXPECT_GT(dot / std::sqrt(nw * nt), 0.95);
      EXPECT_GT(w.at(0), 0);
      EXPECT_LT(w.at(1), 0);
    }
  }
}

// Line 7 malformed: under the default policy the run fails naming file:line; with --learn.on-error skip it
// trains on the other lines and counts the skipped one in learn.csv, the summary and skipped.txt.
TEST(PsFileCli, MalformedLineFailsNamingFileAndLineOrIsSkippedAndCounted) {
  TempDir scratch;
  const auto examples = draw(12);
  const auto csv = scratch.path() / "bad.csv", svm = scratch.path() / "bad.svm";
  write_csv(csv, examples, 7);
  write_libsvm(svm, examples, 7);
  for (const auto& [file, format] : {std::pair{csv, "csv"}, std::pair{svm, "libsvm"}}) {
    TempDir d, s;
    auto r = run(ps_args(file, format, d.path()), scratch.path());
    EXPECT_NE(r.status, 0) << format;
    EXPECT_NE(r.err.find(file.filename().string() + ":7:"), std::string::npos) << format << ": " << r.err;
    r = run(ps_args(file, format, s.path()) + " --learn.on-error skip", scratch.path());
    ASSERT_EQ(r.status, 0) << format << ": " << r.err;
    const auto row = learn_row(s.path());
    EXPECT_EQ(std::stod(row.at("skipped_lines")), 1) << format;
    EXPECT_EQ(std::stod(row.at("examples")), kLines - 1 - kHoldout) << format;
    EXPECT_GT(std::stod(row.at("holdout_accuracy")), 0.9) << format;
    EXPECT_EQ(std::stod(afs::testing::summary(s.path()).at("skipped_lines")), 1) << format;
    EXPECT_NE(r.out.find("skipped_lines 1"), std::string::npos) << r.out;
    const auto note = slurp(s.path() / "skipped.txt");
    EXPECT_NE(note.find("1 malformed lines skipped"), std::string::npos) << note;
    EXPECT_NE(note.find(file.filename().string() + ":7:"), std::string::npos) << note;
  }
}

// Bad data options of the ps job name the option or the file.
TEST(PsFileCli, BadDataOptionsNameTheOptionOrFile) {
  TempDir scratch;
  const auto csv = scratch.path() / "small.csv";
  write_csv(csv, draw(13));
  const std::string base = "run --job ps --runtime threads --quiet --learn.data file ";
  for (const auto& [args, name] :
       {std::pair{std::string(""), std::string("learn.file")},
        std::pair{"--learn.file " + (scratch.path() / "missing.csv").string(), std::string("missing.csv")},
        std::pair{"--learn.file " + csv.string() + " --learn.format arff", std::string("learn.format")},
        std::pair{"--learn.file " + csv.string() + " --learn.on-error ignore", std::string("learn.on-error")},
        std::pair{"--learn.file " + csv.string() + " --learn.holdout 2000", std::string("learn.holdout")}}) {
    const auto r = run(base + args, scratch.path());
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find(name), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
