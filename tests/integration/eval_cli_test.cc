// Integration tests of `afstream eval` as a user runs it (the real binary in a child process): a learn or ps run's
// model scored again on the run's held-out examples gives the run's own held-out scores; a test file is scored on
// every example; a model and data of different shapes, a malformed model file and a job without a model are refused
// with one line naming what was wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::slurp;
using afs::testing::TempDir;
using Result = afs::testing::ProgramResult;

Result run(const std::string& args, const fs::path& scratch) {
  return afs::testing::run_program(AFS_BINARY, args, scratch);
}

using afs::testing::csv_numbers;

// The program run from directory cwd (quoted: it may hold spaces and '#'), its output and errors into log; the exit
// status.
int run_in(const fs::path& cwd, const std::string& args, const fs::path& log) {
  const std::string cmd = "cd '" + cwd.string() + "' && timeout " + std::to_string(afs::testing::scaled_seconds(120)) +
                          " " + AFS_BINARY + " " + args + " >" + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// learn.csv writes 6 significant digits.
void expect_close(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 5e-6 * std::max(1.0, std::abs(b))) << what;
}

// The held-out scores eval gives a run's model on the run's own options are the run's (learn and ps jobs).
TEST(EvalCli, ARunsModelScoresItsHeldOutExamplesAsTheRunDid) {
  for (const std::string job : {"learn", "ps"}) {
    TempDir scratch, dir;
    auto r = run("run --job " + job + " --items 20000 --seed 5 --runtime threads --quiet --out " + dir.path().string(),
                 scratch.path());
    ASSERT_EQ(r.status, 0) << job << ": " << r.err;
    r = run("eval --eval.run " + dir.path().string(), scratch.path());
    ASSERT_EQ(r.status, 0) << job << ": " << r.err;
    const auto got = csv_numbers(r.out), want = csv_numbers(slurp(dir.path() / "learn.csv"));
    ASSERT_EQ(got.size(), 4u) << r.out;
    EXPECT_EQ(got.at("examples"), want.at("holdout_examples")) << job;
    expect_close(got.at("loss"), want.at("holdout_loss"), job + " loss");
    expect_close(got.at("accuracy"), want.at("holdout_accuracy"), job + " accuracy");
    expect_close(got.at("l1_to_true"), want.at("l1_to_true"), job + " l1_to_true");
  }
}

// A run on a file named relative to where it was started is scored from anywhere: its config.ini says where it
// was started, and the relative paths read back from it are taken from there (afs::path_value). From another
// directory eval could not open the run's learn.file ("h.csv: cannot open for reading"); `run --config` of the
// config.ini neither.
TEST(EvalCli, ARunOnARelativeFileIsScoredFromAnotherDirectory) {
  TempDir scratch, dir, data;
  const auto log = scratch.path() / "log";
  ASSERT_EQ(run_in(data.path(),
                   "gen --job learn --learn.data higgs --items 6000 --learn.holdout 2000 --quiet --out h.csv", log),
            0)
      << slurp(log);
  const std::string options =
      "--job learn --learn.data file --learn.file h.csv --learn.format csv --learn.holdout 2000 --learn.task logistic";
  ASSERT_EQ(run_in(data.path(), "run " + options + " --runtime threads --quiet --out " + dir.path().string(), log), 0)
      << slurp(log);
  const auto config = slurp(dir.path() / "config.ini");
  EXPECT_EQ(config.rfind("# started in: " + fs::canonical(data.path()).string() + "\n", 0), 0u) << config;
  EXPECT_NE(config.find("learn.file = h.csv\n"), std::string::npos) << config;  // as given
  ASSERT_EQ(run_in(scratch.path(), "eval --eval.run " + dir.path().string(), log), 0) << slurp(log);
  const auto got = csv_numbers(slurp(log).substr(slurp(log).find("examples,"))),
             want = csv_numbers(slurp(dir.path() / "learn.csv"));
  EXPECT_EQ(got.at("examples"), want.at("holdout_examples"));
  expect_close(got.at("accuracy"), want.at("holdout_accuracy"), "accuracy");
  const auto again = scratch.path() / "again";
  EXPECT_EQ(run_in(scratch.path(),
                   "run --config " + (dir.path() / "config.ini").string() + " --quiet --out " + again.string(), log),
            0)
      << slurp(log);
}

// Repeated from where it was started, a run's relative paths stay as given: made absolute, a start directory with
// '#' in its name made the repeat's config.ini unable to hold them ("could not hold hh.input's value"), and a
// repeat of the repeat was refused.
TEST(EvalCli, ARunRepeatedWhereItWasStartedKeepsItsRelativePaths) {
  TempDir scratch, outer;
  const fs::path data = outer.path() / "d#1 sp";
  fs::create_directories(data);
  const auto log = scratch.path() / "log";
  ASSERT_EQ(run_in(data, "gen --job heavy-hitters --items 5000 --quiet --out in.txt", log), 0) << slurp(log);
  const std::string common = " --runtime threads --quiet --out ";
  ASSERT_EQ(run_in(data, "run --job heavy-hitters --hh.input in.txt --items 5000" + common + "r1", log), 0)
      << slurp(log);
  ASSERT_EQ(run_in(data, "run --config r1/config.ini" + common + "r2", log), 0) << slurp(log);
  const auto config = slurp(data / "r2" / "config.ini");
  EXPECT_NE(config.find("\nhh.input = in.txt\n"), std::string::npos) << config;
  EXPECT_EQ(run_in(data, "run --config r2/config.ini" + common + "r3", log), 0) << slurp(log);
}

// A model trained on a LIBSVM file, scored on a test file of some of its lines: every example with eval.split all
// (the test file's features are fewer than the model's), the held-out split refused with the hint.
TEST(EvalCli, ATestFileIsScoredOnEveryExample) {
  TempDir scratch, dir, data;
  const fs::path file = data.path() / "kdd.svm", test = data.path() / "test.svm";
  auto r =
      run("gen --job learn --learn.data kdd --items 6000 --learn.holdout 2000 --seed 2 --quiet --out " + file.string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run --job learn --learn.data file --learn.file " + file.string() +
              " --learn.format libsvm --learn.holdout 2000 --learn.hash-bits 0 --runtime threads --quiet --out " +
              dir.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  {
    std::istringstream in(slurp(file));
    std::ofstream out(test);
    std::string line;
    for (int n = 0; n < 1500 && std::getline(in, line); ++n) out << line << '\n';
  }
  r = run("eval --eval.run " + dir.path().string() + " --learn.file " + test.string() + " --eval.split all",
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto got = csv_numbers(r.out);
  EXPECT_EQ(got.at("examples"), 1500);
  EXPECT_GT(got.at("accuracy"), 0.5);
  EXPECT_TRUE(std::isfinite(got.at("loss")));
  EXPECT_NE(r.err.find("on all 1500 examples of " + test.string()), std::string::npos) << r.err;
  // The whole file as test data: the training lines' scores beside the held-out ones (2000 of 8000).
  r = run("eval --eval.run " + dir.path().string() + " --eval.split all", scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(csv_numbers(r.out).at("examples"), 8000);
  r = run("eval --eval.run " + dir.path().string() + " --learn.file " + test.string(), scratch.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("learn.holdout:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--eval.split all"), std::string::npos) << r.err;
}

// A softmax model trained on a LIBSVM file with its own indices and its classes from the file (learn.classes 0),
// scored on a test file that lacks its last class: 3 classes x (9 features + a bias) = 30 weights are not read as
// 2 classes x (14 features + a bias), which gave another model's scores; with --learn.classes 3 they are scored.
TEST(EvalCli, ATestFileWithFewerClassesIsNotReadAsMoreFeatures) {
  TempDir scratch, dir, data;
  const fs::path file = data.path() / "mc.svm", test = data.path() / "test.svm";
  auto r =
      run("gen --job learn --learn.data multiclass --learn.task softmax --learn.features 9 --learn.classes 3 "
          "--items 3000 --learn.holdout 1000 --gen.format libsvm --quiet --out " +
              file.string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run --job learn --learn.data file --learn.file " + file.string() +
              " --learn.format libsvm --learn.hash-bits 0 --learn.task softmax --learn.holdout 1000 --runtime threads"
              " --quiet --out " +
              dir.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  {
    std::istringstream in(slurp(file));
    std::ofstream out(test);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("0 ") || line.starts_with("1 ")) out << line << '\n';
    }
  }
  r = run("eval --eval.run " + dir.path().string() + " --learn.file " + test.string() + " --eval.split all",
          scratch.path());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.err.find("learn.classes: "), std::string::npos) << r.err;
  r = run("eval --eval.run " + dir.path().string() + " --learn.file " + test.string() +
              " --eval.split all --learn.classes 3",
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(csv_numbers(r.out).at("accuracy"), 0.85) << r.out;
}

TEST(EvalCli, ModelsThatDoNotFitAndBadModelFilesAreRefusedNamingWhy) {
  TempDir scratch, dir;
  auto r =
      run("run --job learn --learn.data multiclass --learn.task softmax --items 3000 --runtime threads --quiet "
          "--out " +
              dir.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto refused = [&](const std::string& args, const std::string& expected) {
    const auto res = run(args, scratch.path());
    EXPECT_EQ(res.status, 2) << args;
    EXPECT_NE(res.err.find(expected), std::string::npos) << args << ": " << res.err;
    EXPECT_EQ(res.out, "") << args;
  };
  // An option's name shortened as Boost takes it (--eval.ru); a data option that changes nothing is noted.
  {
    const auto res = run("eval --eval.ru " + dir.path().string() + " --learn.format libsvm", scratch.path());
    EXPECT_EQ(res.status, 0) << res.err;
    EXPECT_NE(res.err.find("note: --learn.format has no effect"), std::string::npos) << res.err;
  }
  // Another shape: more classes, other features.
  refused("eval --eval.run " + dir.path().string() + " --learn.classes 5", "eval.model: ");
  refused("eval --eval.run " + dir.path().string() + " --learn.features 20",
          "4 outputs x (28 features + a bias) = 116 weights, the data give 4 outputs x (20 features + a bias)");
  refused("eval --job heavy-hitters", "job: heavy-hitters writes no model");
  refused("eval --job learn", "eval.model: missing");
  refused("eval --eval.run " + (dir.path() / "nothing").string(), "is not a run directory");
  refused("eval --eval.run " + dir.path().string() + " --eval.split some", "eval.split: expected holdout or all");
  refused("eval --eval.run " + dir.path().string() + " --config " + (dir.path() / "config.ini").string(),
          "give --eval.run or --config, not both");
  const fs::path model = dir.path() / "model.csv";
  const auto with_model = [&](const std::string& text, const std::string& expected) {
    std::ofstream(model) << text;
    refused("eval --eval.run " + dir.path().string(), expected);
  };
  with_model("", "model.csv: empty");
  with_model("weight,index\n", "model.csv:1: expected the header 'index,weight'");
  with_model("index,weight\n0,1\n0,2\n", "model.csv:3: index 0 after 0: expected indices increasing");
  with_model("index,weight\n0,1\n-1,2\n", "model.csv:3: index '-1' is not a whole number");
  with_model("index,weight\n0,1\n2,inf\n", "model.csv:3: weight 'inf' is not a finite number");
  with_model("index,weight\n0,1,2\n", "model.csv:2: expected 'index,weight'");
}

}  // namespace
