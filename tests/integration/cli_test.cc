// Integration tests of the afstream program as a user runs it: whole jobs in a child process, their files, and
// one clear error line with a non-zero exit for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs the afstream binary with args (a shell word list), capturing stdout and stderr; bounded by `timeout`.
Result run(const std::string& args) {
  const auto dir = fs::temp_directory_path() / ("afs-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto out = dir / "out.txt", err = dir / "err.txt";
  const std::string cmd =
      "timeout 120 " + std::string(AFS_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  Result r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream fo(out), fe(err);
  std::stringstream so, se;
  so << fo.rdbuf();
  se << fe.rdbuf();
  r.out = so.str();
  r.err = se.str();
  fs::remove_all(dir);
  return r;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

using afs::testing::TempDir;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Sorted lines without the header: results compared regardless of order.
std::vector<std::string> sorted_rows(const fs::path& p) {
  std::istringstream in(read(p));
  std::vector<std::string> v;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) v.push_back(line);
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Cli, BadInputGivesOneClearLineAndNonZeroExit) {
  struct Case {
    std::string args, expect;
  };
  const std::array<Case, 9> cases{{
      {"run --job heavy-hitters --ft.theta -1", "theta"},
      {"run --job heavy-hitters --ft.l -5", "unbacked-items-max"},
      {"run --job heavy-hitters --bogus 3", "bogus"},
      {"run --job heavy-hitters --hh.width 0", "hh.width"},
      {"run --job heavy-hitters --ft.mode sometimes", "ft.mode"},
      {"run --job no-such-job", "no-such-job"},
      {"run --job heavy-hitters --hh.input /nonexistent/input.txt", "/nonexistent/input.txt"},
      {"run --job heavy-hitters --config /nonexistent/job.ini", "/nonexistent/job.ini"},
      {"run --job heavy-hitters --fail.count 1 --fail.target 99", "99"},
  }};
  for (const auto& c : cases) {
    const auto r = run(c.args + " --quiet");
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("afstream: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(Cli, MalformedInputLineIsNamedOrSkipped) {
  TempDir d;
  std::ofstream(d.path() / "in.txt") << "a,3\nb\nc,notanumber\na\n";
  auto r = run("run --job heavy-hitters --quiet --hh.input " + (d.path() / "in.txt").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("in.txt:3"), std::string::npos) << r.err;
  r = run("run --job heavy-hitters --quiet --hh.phi 2 --hh.on-error skip --hh.input " + (d.path() / "in.txt").string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("true_heavy 1"), std::string::npos) << r.out;  // a: 3 + 1 = 4 > 2
}

TEST(Cli, RunWritesConfigMetricsAndSummary) {
  TempDir d;
  const auto r =
      run("run --job heavy-hitters --items 300000 --quiet --ft.mode approx --fail.count 2 --out " + d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  for (auto f : {"config.ini", "meta.json", "metrics.jsonl", "summary.csv", "failures.csv", "heavy_hitters.csv"}) {
    EXPECT_TRUE(fs::exists(d.path() / f)) << f;
  }
  const auto summary = read(d.path() / "summary.csv");
  const std::string header = summary.substr(0, summary.find('\n'));
  for (auto col : {"job", "mode", "theta", "l", "gamma", "failures", "items", "seconds", "items_per_s", "state_backups",
                   "item_backups", "backup_bytes", "recovery_ms_median", "precision", "recall", "are"}) {
    EXPECT_NE(("," + header + ",").find(std::string(",") + col + ","), std::string::npos) << col;
  }
  EXPECT_EQ(lines(summary), 2);
  EXPECT_NE(read(d.path() / "config.ini").find("ft.mode = approx"), std::string::npos);
  EXPECT_GE(lines(read(d.path() / "failures.csv")), 2);  // header + at least one recovery
}

// Exact fault tolerance: with failures of all workers, the job's results equal the failure-free run's.
TEST(Cli, ExactModeWithFailuresEqualsNoFailures) {
  TempDir a, b;
  auto r = run("run --job heavy-hitters --items 1000000 --quiet --ft.mode none --out " + a.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run --job heavy-hitters --items 1000000 --quiet --ft.mode exact --fail.count 4 --fail.target all --out " +
          b.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(sorted_rows(a.path() / "heavy_hitters.csv"), sorted_rows(b.path() / "heavy_hitters.csv"));
  EXPECT_GE(lines(read(b.path() / "failures.csv")), 5);
}

// The distinct-counting job on worker processes: without and with SIGKILLs of all workers, the HyperLogLog estimate
// stays within three standard errors of the exact number of distinct keys (distinct.csv).
TEST(Cli, DistinctJobStaysAccurateWithFailures) {
  for (const std::string fail : {"", " --fail.count 2 --fail.target all"}) {
    TempDir d;
    const auto r = run("run --job distinct --items 300000 --distinct.keys 100000 --ft.theta 8 --quiet" + fail +
                       " --out " + d.path().string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::stringstream csv(read(d.path() / "distinct.csv"));
    std::string header, row;
    std::getline(csv, header);
    std::getline(csv, row);
    ASSERT_EQ(header, "estimate,exact,relative_error,standard_error");
    std::vector<double> v;
    std::stringstream rs(row);
    for (std::string c; std::getline(rs, c, ',');) v.push_back(std::stod(c));
    ASSERT_EQ(v.size(), 4u) << row;
    EXPECT_GT(v[1], 1000) << row;                                 // the exact count is not trivial
    EXPECT_LE(std::fabs(v[2]), 3 * v[3]) << fail << ": " << row;  // within 3 standard errors
  }
}

// Theta is in register ranks for the distinct job: one at or above the largest rank protects nothing and is refused.
TEST(Cli, DistinctJobRefusesAThetaThatProtectsNothing) {
  const auto r = run("run --job distinct --items 1000 --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ft.state-divergence-max (Theta): 100000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ft.theta 8"), std::string::npos) << r.err;
}

// The heavy-hitters job with Space-Saving (--hh.algorithm space-saving) on worker processes, with SIGKILLs of all
// workers: recall 1, and every reported count at or above the key's exact weight (proofs/space-saving.md, Theorem
// SS). Bad choices name their option.
TEST(Cli, SpaceSavingJobReportsEveryHeavyHitterWithFailures) {
  TempDir d;
  const auto r =
      run("run --job heavy-hitters --hh.algorithm space-saving --items 200000 --quiet --fail.count 2 "
          "--fail.target all --out " +
          d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" recall 1 "), std::string::npos) << r.out;
  EXPECT_NE(read(d.path() / "config.ini").find("hh.algorithm = space-saving"), std::string::npos);
  std::istringstream csv(read(d.path() / "heavy_hitters.csv"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line, "key,estimate,exact");
  int rows = 0;
  while (std::getline(csv, line)) {
    std::istringstream cells(line);
    std::string key, estimate, exact;
    std::getline(cells, key, ',');
    std::getline(cells, estimate, ',');
    std::getline(cells, exact, ',');
    EXPECT_GE(std::stoll(estimate), std::stoll(exact)) << line;
    ++rows;
  }
  EXPECT_GT(rows, 10);
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--hh.algorithm top-k", "hh.algorithm"},
           {"--hh.algorithm space-saving --hh.capacity 0", "hh.capacity"},
       }) {
    const auto bad = run("run --job heavy-hitters --quiet " + args);
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_EQ(lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(expect), std::string::npos) << args << ": " << bad.err;
  }
}

TEST(Cli, ListAndHelp) {
  auto r = run("list");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("heavy-hitters"), std::string::npos);
  EXPECT_NE(r.out.find("count-min-hh"), std::string::npos);
  EXPECT_NE(r.out.find("distinct-hll"), std::string::npos);
  EXPECT_NE(r.out.find("space-saving-hh"), std::string::npos);
  r = run("run --job heavy-hitters --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--ft.state-divergence-max"), std::string::npos);
  EXPECT_NE(r.out.find("--hh.phi"), std::string::npos);
}

}  // namespace
