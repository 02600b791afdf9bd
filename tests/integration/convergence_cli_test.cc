// Integration test of the learn job's convergence trace (issue 5, items 4 and 5) as a user runs it: the real
// binary with four failures of every worker writes a well-formed trace.csv (items increasing, a point per 1% of the
// input) and reports converged_items / converged_seconds at one of its points; an unreachable tolerance reports nan;
// bad convergence options are named.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::slurp;
using afs::testing::split_csv;
using afs::testing::TempDir;

using Result = afs::testing::ProgramResult;

// Runs the afstream binary with args, capturing stdout and stderr into `scratch`; bounded by a timeout.
Result run(const std::string& args, const fs::path& scratch) {
  return afs::testing::run_program(AFS_BINARY, args, scratch);
}

struct Point {
  double items, seconds, l1, relative, norm, loss, accuracy;
};

std::vector<Point> read_trace(const fs::path& dir) {
  std::istringstream in(slurp(dir / "trace.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "items,seconds,l1_change,relative_change,model_l1,progressive_loss,progressive_accuracy");
  std::vector<Point> v;
  while (std::getline(in, line)) {
    const auto f = split_csv(line);
    EXPECT_EQ(f.size(), 7u) << line;
    if (f.size() != 7) continue;
    v.push_back({std::stod(f[0]), std::stod(f[1]), std::stod(f[2]), std::stod(f[3]), std::stod(f[4]), std::stod(f[5]),
                 std::stod(f[6])});
  }
  return v;
}

const std::string kLearn = "run --job learn --items 100000 --learn.holdout 2000 --runtime threads --quiet ";

TEST(ConvergenceCli, TraceAndConvergencePointWithFailures) {
  TempDir scratch, d;
  const auto r = run(
      kLearn + "--ft.mode approx --ft.theta 10 --ft.l 1000 --fail.count 4 --fail.target all --out " + d.path().string(),
      scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto t = read_trace(d.path());
  ASSERT_EQ(t.size(), 100u);  // a point per 1% of the input (500 examples of each of the 2 copies)
  for (std::size_t k = 0; k < t.size(); ++k) {
    EXPECT_EQ(t[k].items, 1000.0 * static_cast<double>(k + 1)) << k;
    EXPECT_GE(t[k].seconds, 0) << k;
    EXPECT_TRUE(std::isfinite(t[k].l1) && t[k].l1 >= 0) << k;
    EXPECT_GT(t[k].norm, 0) << k;
    EXPECT_NEAR(t[k].relative, t[k].l1 / t[k].norm, 1e-8 * (1 + t[k].relative)) << k;
    EXPECT_GT(t[k].loss, 0) << k;
    EXPECT_TRUE(t[k].accuracy > 0.4 && t[k].accuracy <= 1) << k;
    if (k > 0) {
      EXPECT_GE(t[k].seconds, t[k - 1].seconds) << k;  // the later copy's time at each point
    }
  }
  EXPECT_GT(t.back().accuracy, 0.6);
  EXPECT_LT(t.back().l1, t.front().l1);
  const auto s = afs::testing::summary(d.path());
  EXPECT_EQ(s.at("failures"), "4");
  EXPECT_EQ(std::stod(s.at("trace_points")), 100);
  EXPECT_EQ(std::stod(s.at("tolerance")), 0.2);  // the default for dense data
  // converged_items: the first point of the final run of at least 5 points below the tolerance.
  const double items = std::stod(s.at("converged_items")), seconds = std::stod(s.at("converged_seconds"));
  ASSERT_TRUE(std::isfinite(items)) << slurp(d.path() / "trace.csv");
  bool found = false;
  for (const auto& p : t) {
    if (p.items == items) {
      found = true;
      EXPECT_NEAR(p.seconds, seconds, 1e-3 + 1e-5 * seconds);
    }
  }
  EXPECT_TRUE(found) << "converged_items " << items << " is a trace point";
  std::size_t k = 0;
  while (k < t.size() && t[k].items != items) ++k;
  ASSERT_LE(k + 5, t.size());
  for (std::size_t j = k; j < t.size(); ++j) EXPECT_LT(t[j].relative, 0.2 * (1 + 1e-9)) << j;
  if (k > 0) {
    EXPECT_GE(t[k - 1].relative, 0.2 * (1 - 1e-9));
  }
  // A tolerance below every change: never converged, reported as nan.
  TempDir e;
  ASSERT_EQ(run(kLearn + "--learn.tolerance 1e-12 --out " + e.path().string(), scratch.path()).status, 0);
  EXPECT_TRUE(std::isnan(std::stod(afs::testing::summary(e.path()).at("converged_items"))));
}

TEST(ConvergenceCli, BadOptionsNameTheOption) {
  TempDir scratch;
  for (const auto& [args, option] :
       {std::pair{"--learn.tolerance -1", "learn.tolerance"}, std::pair{"--learn.window 0", "learn.window"},
        std::pair{"--learn.trace-every 200000", "learn.trace-every"}}) {
    const auto r = run(kLearn + args, scratch.path());
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find(option), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
