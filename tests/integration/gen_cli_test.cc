// Integration tests of `afstream gen` as a user runs it (the real binary in a child process): the input a run would
// generate, written to a file and read back by the job, gives that run's results (heavy hitters: the same report;
// distinct: the same estimate, and a file of words counted under failures; learn: the same progressive and held-out
// figures, dense data as CSV and sparse as LIBSVM); a run's config.ini
// names its input; standard output; bad input is one line naming the option, and leaves no file behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::slurp;
using afs::testing::summary;
using afs::testing::TempDir;
using Result = afs::testing::ProgramResult;

Result run(const std::string& args, const fs::path& scratch) {
  return afs::testing::run_program(AFS_BINARY, args, scratch);
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// The named columns of a run's summary.csv, as written.
std::map<std::string, std::string> scores(const fs::path& dir, const std::vector<std::string>& names) {
  const auto all = summary(dir);
  std::map<std::string, std::string> m;
  for (const auto& n : names) {
    const auto it = all.find(n);
    if (it == all.end()) ADD_FAILURE() << dir << ": summary.csv has no column " << n;
    m[n] = it == all.end() ? "(missing)" : it->second;
  }
  return m;
}

// A heavy-hitters run repeated from its config.ini with its input generated into a file: the same report.
TEST(GenCli, HeavyHittersInputReadBackGivesTheSameReport) {
  TempDir scratch, a, b, dir;
  // An absolute phi: a relative one is taken of the expected total weight for a generated stream, of the actual one
  // for a file.
  const std::string job =
      "--job heavy-hitters --items 200000 --seed 3 --hh.phi 150000 --ft.mode none "
      "--runtime threads --quiet";
  auto r = run("run " + job + " --out " + a.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path input = dir.path() / "items.csv";
  r = run("gen --config " + (a.path() / "config.ini").string() + " --out " + input.string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("wrote 200000 records (items)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("afstream run --job heavy-hitters --hh.input " + input.string()), std::string::npos) << r.err;
  EXPECT_EQ(lines(slurp(input)), 200000u);
  r = run("run " + job + " --hh.input " + input.string() + " --out " + b.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> names{"precision", "recall", "are", "reported", "true_heavy"};
  EXPECT_EQ(scores(a.path(), names), scores(b.path(), names));
  EXPECT_GT(std::stod(summary(a.path())["reported"]), 10);
  EXPECT_EQ(slurp(a.path() / "heavy_hitters.csv"), slurp(b.path() / "heavy_hitters.csv"));
}

// The distinct job on a Zipf stream and on the file gen wrote of it: the same estimate and exact count; and on a
// file of words and addresses (hashed keys), under failures of all workers.
TEST(GenCli, DistinctInputReadBackCountsTheSame) {
  TempDir scratch, a, b, c, dir;
  const std::string job =
      "--job distinct --items 300000 --distinct.keys 100000 --seed 4 --ft.theta 8 "
      "--runtime threads --quiet";
  const fs::path input = dir.path() / "keys.csv";
  auto r = run("gen " + job + " --out " + input.string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("--distinct.input " + input.string()), std::string::npos) << r.err;
  r = run("run " + job + " --out " + a.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run " + job + " --distinct.input " + input.string() + " --out " + b.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(a.path() / "distinct.csv"), slurp(b.path() / "distinct.csv"));
  EXPECT_GT(std::stod(summary(a.path())["exact"]), 50000);
  // 20,000 distinct words and addresses, each three times, in a scrambled order.
  const fs::path words = dir.path() / "words.txt";
  {
    std::ofstream f(words);
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 20000; ++i) {
        const int k = (i * 7919 + round * 4099) % 20000;
        if (k % 2) {
          f << "word" << k << "\n";
        } else {
          f << "10." << k / 256 << '.' << k % 256 << ".1,5\n";
        }
      }
    }
  }
  r = run("run --job distinct --ft.theta 8 --quiet --fail.count 3 --distinct.input " + words.string() + " --out " +
              c.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto s = summary(c.path());
  EXPECT_EQ(s.at("exact"), "20000");
  EXPECT_EQ(s.at("items"), "60000");
  EXPECT_EQ(s.at("failures_fired"), "3");
  EXPECT_LT(std::abs(std::stod(s.at("relative_error"))), 3 * std::stod(s.at("standard_error")));
}

// The learn job on generated data and on the file gen wrote of it: the same figures (HIGGS-like dense data as CSV,
// bit for bit; KDD-like sparse data as LIBSVM), and the options gen prints run it.
TEST(GenCli, LearnDataReadBackTrainsTheSame) {
  TempDir scratch, dir;
  const std::string common =
      "--job learn --items 20000 --learn.holdout 2000 --seed 2 --ft.mode none --runtime threads "
      "--quiet";
  const std::vector<std::string> names{"progressive_loss", "progressive_accuracy", "holdout_accuracy", "holdout_loss"};
  for (const auto& [data, file, format] : {std::tuple{"higgs", "higgs.csv", "csv"}, {"kdd", "kdd.svm", "libsvm"}}) {
    SCOPED_TRACE(data);
    TempDir a, b;
    const fs::path input = dir.path() / file;
    auto r = run("gen " + common + " --learn.data " + data + " --out " + input.string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("wrote 22000 records (" + std::string(format) + ")"), std::string::npos) << r.err;
    EXPECT_EQ(lines(slurp(input)), 22000u);
    // The command gen prints, with the rest of the run's options.
    const auto at = r.err.find("afstream run --job learn ");
    ASSERT_NE(at, std::string::npos) << r.err;
    std::string read_back = r.err.substr(at + 25, r.err.find(" [its other options]", at) - at - 25);
    EXPECT_NE(read_back.find("--learn.format " + std::string(format)), std::string::npos) << read_back;
    r = run("run " + common + " --learn.data " + data + " --out " + a.path().string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string without_holdout = "--job learn --items 20000 --seed 2 --ft.mode none --runtime threads --quiet ";
    r = run("run " + without_holdout + read_back + " --out " + b.path().string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(scores(a.path(), names), scores(b.path(), names));
    EXPECT_GT(std::stod(summary(a.path())["holdout_accuracy"]), 0.55);
  }
}

TEST(GenCli, WritesToStandardOutput) {
  TempDir scratch;
  const auto r = run("gen --job learn --items 90 --learn.holdout 10 --learn.data kdd --quiet --out -", scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines(r.out), 100u);
  EXPECT_TRUE(r.out.rfind("1 ", 0) == 0 || r.out.rfind("-1 ", 0) == 0) << r.out.substr(0, 80);
  EXPECT_NE(r.err.find("to standard output"), std::string::npos) << r.err;
}

TEST(GenCli, BadInputIsOneLineNamingTheOptionAndLeavesNoFile) {
  TempDir scratch, dir;
  const std::string out = (dir.path() / "out.txt").string();
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"gen --job join --out " + out, "join reads no input file"},
      {"gen --out " + out, "job: missing --job"},
      {"gen --job heavy-hitters", "out: missing --out"},
      {"gen --job heavy-hitters --out " + dir.path().string(), "is a directory"},
      {"gen --job heavy-hitters --gen.format csv --out " + out, "gen.format"},
      {"gen --job heavy-hitters --hh.input " + out + " --out " + out, "hh.input: the input is already a file"},
      {"gen --job heavy-hitters --hh.skew -1 --out " + out, "skew"},
      {"gen --job distinct --distinct.input " + out + " --out " + out, "distinct.input: the input is already a file"},
      {"gen --job learn --learn.data kdd --gen.format csv --out " + out, "gen.format: csv"},
      {"gen --job learn --gen.format vw --out " + out, "gen.format: expected csv or libsvm"},
      {"gen --job learn --learn.eta0 -1 --out " + out, "learn.eta0"},
      {"gen --job learn --learn.data file --learn.file x.csv --out " + out, "learn.data: the data is already a file"},
      {"gen --job learn --out /nonexistent/dir/data.csv", "out: cannot write '/nonexistent/dir/data.csv'"},
      {"gen --job no-such-job --out " + out, "no-such-job"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args, scratch.path());
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << ": " << r.err;
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no out.txt, no out.txt.part-*
}

}  // namespace
