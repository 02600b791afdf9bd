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
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using Result = afs::testing::ProgramResult;

// Runs the afstream binary with args (a shell word list), capturing stdout and stderr; bounded by `timeout`.
Result run(const std::string& args) {
  afs::testing::TempDir scratch;
  return afs::testing::run_program(AFS_BINARY, args, scratch.path());
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
  const std::array<Case, 33> cases{{
      {"run --job heavy-hitters --ft.theta -1", "theta"},
      {"run --job heavy-hitters --ft.l -5", "unbacked-items-max"},
      {"run --job heavy-hitters --bogus 3", "bogus"},
      {"run --job heavy-hitters --hh.width 0", "hh.width"},
      {"run --job heavy-hitters --ft.mode sometimes", "ft.mode"},
      {"run --job no-such-job", "no-such-job"},
      {"run --job heavy-hitters --hh.input /nonexistent/input.txt", "/nonexistent/input.txt"},
      {"run --job heavy-hitters --config /nonexistent/job.ini", "/nonexistent/job.ini"},
      {"run --job heavy-hitters --fail.count 1 --fail.target 99", "99"},
      {"run --job heavy-hitters --ft.mode checkpoint --ft.checkpoint-interval 0ms",
       "ft.checkpoint-interval: expected > 0"},
      {"run --job heavy-hitters --ft.mode checkpoint --ft.checkpoint-timeout 10", "ft.checkpoint-timeout"},
      {"run --job heavy-hitters --ft.mode checkpoint --ft.checkpoint-min-pause soon", "ft.checkpoint-min-pause"},
      {"run --job heavy-hitters --ft.replay-overhead-max 1", "ft.replay-overhead-max: expected a share 0 <= f < 1"},
      {"run --job heavy-hitters --ft.replay-overhead-max -0.1", "ft.replay-overhead-max"},
      // Unsigned options: Boost alone read -5 as 2^64 - 5 (a worker process then failed on it).
      {"run --job heavy-hitters --items -5", "items: expected a whole number in [0, 2^63 - 1], got '-5'"},
      // The Zipf options, checked before the workers start (a worker process stopped on them, and the run's one line
      // was "worker 0 stopped with exit status 2").
      {"run --job heavy-hitters --hh.keys 0", "hh.keys: expected a key count in [1, 4294967295], got 0"},
      // A stray word was "ambiguous" among every option, all of them listed.
      {"run stray --job heavy-hitters", "unexpected argument 'stray': options are written --name value"},
      {"run --job distinct --ft.theta 8 --distinct.skew nan", "distinct.skew: expected a finite skew >= 0, got nan"},
      {"run --job copy --copy.sink count --copy.skew -2", "copy.skew: expected a finite skew >= 0, got -2"},
      {"run --job heavy-hitters --seed=-1", "seed: expected a whole number"},
      {"run --job heavy-hitters --items 2.5", "items: expected a whole number in [0, 2^63 - 1] (not a fraction)"},
      {"run --job heavy-hitters --items 9223372036854775808", "items: expected a whole number"},
      {"run --job heavy-hitters --ft.replay-items-max -1", "ft.replay-items-max: expected a whole number"},
      {"run --job heavy-hitters --fail.at 1.5", "fail.at: '1.5' is neither a fraction"},
      {"run --job heavy-hitters --fail.at 1.0", "fail.at: '1.0' is ambiguous"},  // it was the first item
      {"run --job heavy-hitters --hh.width -100", "hh.width: expected a whole number"},
      // Signed whole-number options name themselves (Boost: "the argument ('1.5') for option ... is invalid").
      {"run --job heavy-hitters --fail.count 1.5", "fail.count: expected a whole number, got '1.5'"},
      {"run --job heavy-hitters --fail.count 1e12", "fail.count: expected a whole number in [-2^31, 2^31 - 1]"},
      {"run --job heavy-hitters --process.heartbeat-timeout-ms 5s",
       "process.heartbeat-timeout-ms: expected a whole number, got '5s'"},
      // Named once, as given (it was "hh.width/depth/epsilon/delta: hh.residual-share: ... -1.000000", and NaN
      // "parameter 'residual-share': expected a number").
      {"run --job heavy-hitters --hh.residual-share -1",
       "error: hh.residual-share: expected a share of phi in (0, 0.25], got -1\n"},
      {"run --job heavy-hitters --hh.residual-share nan",
       "error: hh.residual-share: expected a share of phi in (0, 0.25], got nan"},
      // The operator's own parameter name was the message ("divergence-block: ..."), and the window's option unnamed.
      {"run --job heavy-hitters --hh.divergence-block 3", "hh.divergence-block: expected a power of two >= 1, got 3"},
      {"run --job heavy-hitters --ft.reset sliding", "give --ft.reset-window ITEMS"},
  }};
  for (const auto& c : cases) {
    const auto r = run(c.args + " --quiet");
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("afstream: error:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << ": " << r.err;
  }
}

// A sender may hold at most net.flow-window unacknowledged items and sends whole batches: below one batch nothing
// could ever be sent. The threads runtime refused it (LocalCluster), but worker processes ran on, sending nothing,
// until killed (`--net.flow-window 0` hung in every mode); ask mode named ft.ask-every instead.
TEST(Cli, AFlowWindowBelowABatchIsRefusedOnEveryRuntime) {
  for (const std::string rt : {"processes", "threads"}) {
    for (const std::string mode : {"none", "exact", "ask"}) {
      TempDir scratch;
      const auto r = afs::testing::run_program(
          AFS_BINARY,
          "run --job heavy-hitters --items 1e4 --quiet --net.flow-window 0 --runtime " + rt + " --ft.mode " + mode,
          scratch.path(), 30);
      EXPECT_EQ(r.status, 2) << rt << ", " << mode;
      EXPECT_EQ(lines(r.err), 1) << rt << ", " << mode << "\n" << r.err;
      EXPECT_NE(r.err.find("afstream: error: net.flow-window: expected at least net.batch-items"), std::string::npos)
          << rt << ", " << mode << ": " << r.err;
    }
  }
}

// Counts may be written as 1e4, on the command line and in a job file (Boost alone refused them).
TEST(Cli, CountsTakeScientificNotation) {
  TempDir d;
  // An abbreviated name (--item), a job's own option (--hh.width) and a leading + go through the same check.
  auto r = run("run --job heavy-hitters --runtime threads --quiet --item 2e4 --hh.width +1.5e3 --seed 1e16 --out " +
               (d.path() / "a").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream config(d.path() / "a" / "config.ini");
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("items = 20000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hh.width = 1500\n"), std::string::npos) << text;
  // Signed counts too (--fail.count, --hh.parallelism refused 1e0).
  r = run("run --job heavy-hitters --runtime threads --quiet --items 2e4 --hh.parallelism 3e0 --fail.count 1e0 --out " +
          (d.path() / "s").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream config_s(d.path() / "s" / "config.ini");
  const std::string text_s((std::istreambuf_iterator<char>(config_s)), std::istreambuf_iterator<char>());
  EXPECT_NE(text_s.find("hh.parallelism = 3\n"), std::string::npos) << text_s;
  EXPECT_NE(text_s.find("fail.count = 1\n"), std::string::npos) << text_s;
  std::ofstream(d.path() / "job.ini") << "items = 3e4\n";
  r = run("run --job heavy-hitters --runtime threads --quiet --config " + (d.path() / "job.ini").string() + " --out " +
          (d.path() / "b").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream config_b(d.path() / "b" / "config.ini");
  const std::string text_b((std::istreambuf_iterator<char>(config_b)), std::istreambuf_iterator<char>());
  EXPECT_NE(text_b.find("items = 30000\n"), std::string::npos) << text_b;
  std::ofstream(d.path() / "bad.ini") << "items = -7\n";
  r = run("run --job heavy-hitters --runtime threads --quiet --config " + (d.path() / "bad.ini").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("items: expected a whole number in [0, 2^63 - 1], got '-7'"), std::string::npos) << r.err;
}

// A sketch that finished for good (its end of stream acknowledged by the sink as it arrived) while the sink then
// failed before a backup reflected that end: the restarted sink waited for it forever (4 of 60 runs of this command
// at cc977d7 on threads; 40 runs, about 8 s, meet it with a probability of about 94%). It takes the input as ended,
// as in mode none (Worker::end_inputs_of_finished_senders).
TEST(Cli, ApproxRunsEndWhenASenderFinishedBeforeItsReceiverFailed) {
  TempDir scratch;
  for (int i = 0; i < 40; ++i) {
    const auto r = afs::testing::run_program(
        AFS_BINARY,
        "run --job heavy-hitters --quiet --items 1000 --fail.count 100 --runtime threads --seed " +
            std::to_string(i + 1),
        scratch.path(), 60);
    ASSERT_EQ(r.status, 0) << "run " << i << " (124: it did not end) " << r.err;
  }
}

// 100 points on 1,000 items: most are passed between two polls of the plan. Each fires once its workers are up,
// as a failure of a started incarnation: the process runtime used to kill the same worker up to 48 times in one
// poll, every incarnation but the first before it had started (and said hello: recovery_ms stayed -1).
TEST(Cli, FailurePointsPassedTogetherEachKillAStartedIncarnation) {
  for (const char* runtime : {"threads", "processes"}) {
    TempDir d;
    const auto r = run(std::string("run --job heavy-hitters --quiet --items 1000 --fail.count 100 --runtime ") +
                       runtime + " --out " + d.str());
    ASSERT_EQ(r.status, 0) << r.err;
    unsigned long points = 0, recoveries = 0;
    const auto at = r.out.find("job heavy-hitters, mode approx, ");
    ASSERT_NE(at, std::string::npos) << r.out;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at, "job heavy-hitters, mode approx, %lu failure points", &points), 1);
    EXPECT_EQ(points, 100u);
    unsigned long fired = points;
    if (const auto f = r.out.find("failure points (", at); f != std::string::npos) {
      ASSERT_EQ(std::sscanf(r.out.c_str() + f, "failure points (%lu fired", &fired), 1) << r.out;
    }
    const auto w = r.out.find(" worker recoveries", at);
    ASSERT_NE(w, std::string::npos) << r.out;
    recoveries = std::stoul(r.out.substr(r.out.rfind(' ', w - 1) + 1));
    EXPECT_GE(fired, 1u);
    // A bound by construction (4 workers); the waiting rule itself is checked below on processes and, on threads,
    // by Recovery.FailurePointsReachedTogetherAreEachAFailureOfARestoredIncarnation.
    EXPECT_LE(recoveries, 4 * fired) << runtime << ": a worker killed more than once per failure\n" << r.out;
    // The same count in summary.csv, and a failures.csv row per recovery.
    EXPECT_EQ(afs::testing::summary(d.path()).at("failures_fired"), std::to_string(fired)) << runtime;
    std::ifstream csv(d.path() / "failures.csv");
    std::string header, row;
    std::getline(csv, header);
    const auto cols = afs::testing::split_csv(header);
    const auto col = afs::testing::column_of(cols, "recovery_ms");
    ASSERT_LT(col, cols.size()) << header;
    int rows = 0;
    while (std::getline(csv, row)) {
      ++rows;
      if (std::string(runtime) == "processes") {
        EXPECT_NE(afs::testing::split_csv(row).at(col), "-1") << "an incarnation killed before its hello: " << row;
      }
    }
    EXPECT_EQ(rows, static_cast<int>(recoveries)) << runtime;
  }
}

// A run's config.ini repeats it: `run --config DIR/config.ini` takes the job from the file (it was refused for the
// job's options when --job was not on the command line too), and writes the same configuration.
TEST(Cli, ARunsConfigFileRepeatsIt) {
  TempDir d;
  auto r = run(
      "run --job heavy-hitters --runtime threads --quiet --items 20000 --hh.width 500 --ft.theta 300 --fail.count 1 "
      "--fail.domain r1=1,2 --fail.domain r2=3 --fail.target r1 --ft.delta-residual 0.123456789 --out " +
      (d.path() / "a").string());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run --config " + (d.path() / "a" / "config.ini").string() + " --out " + (d.path() / "b").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto settings = [](const fs::path& p) {
    std::ifstream f(p);
    std::vector<std::string> v;
    for (std::string line; std::getline(f, line);) v.push_back(line);
    return v;
  };
  const auto a = settings(d.path() / "a" / "config.ini");
  // Not where it was written to: a run repeated from the file without --out would write over this one's records.
  EXPECT_EQ(std::find_if(a.begin(), a.end(), [](const std::string& l) { return l.starts_with("out "); }), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "hh.width = 500"), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "fail.domain = r2=3"), a.end());               // a list: a line each
  EXPECT_NE(std::find(a.begin(), a.end(), "ft.delta-residual = 0.123456789"), a.end());  // exact, not 0.123457
  // An alias's value under its primary name (the primary's default showed, and the file then gave both).
  EXPECT_NE(std::find(a.begin(), a.end(), "ft.state-divergence-max = 300"), a.end());
  EXPECT_EQ(std::find_if(a.begin(), a.end(), [](const std::string& l) { return l.starts_with("ft.theta "); }), a.end());
  EXPECT_EQ(settings(d.path() / "b" / "config.ini"), a);
  // The command line wins, also in the alias's spelling and on worker processes (which read the file too, and are
  // given the run's origin of time on their command line).
  r = run("run --config " + (d.path() / "a" / "config.ini").string() +
          " --ft.theta 250 --fail.domain r3=2 --fail.target r3 --runtime processes --out " + (d.path() / "c").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto c = settings(d.path() / "c" / "config.ini");
  EXPECT_NE(std::find(c.begin(), c.end(), "ft.state-divergence-max = 250"), c.end());
  EXPECT_NE(std::find(c.begin(), c.end(), "runtime = processes"), c.end());
  EXPECT_EQ(std::count_if(c.begin(), c.end(), [](const std::string& l) { return l.starts_with("fail.domain "); }), 1)
      << "the command line's list replaces the file's";
  // `afstream controller` from the same file: its workers get the file's empty values (`fail.at = `) as their own
  // word (`--fail.at=` was refused by every worker, which stopped the run).
  r = run("controller --config " + (d.path() / "c" / "config.ini").string() + " --quiet --out " +
          (d.path() / "e").string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ofstream(d.path() / "bad.ini") << "job = no-such-job # a comment\n";
  r = run("run --config " + (d.path() / "bad.ini").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown job 'no-such-job'"), std::string::npos) << r.err;

  // A value the file cannot hold (a corpus directory named with '#'): the repeat asks for it instead of running
  // on the option's default (the synthetic corpus) without a word, and runs the same with it.
  const fs::path corpus = d.path() / "c#1";
  fs::create_directories(corpus);
  std::ofstream(corpus / "a.txt") << "the end\nno\n";
  r = run("run --job grep --runtime threads --quiet --text.dir '" + corpus.string() + "' --out " +
          (d.path() / "g1").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string g1 = (d.path() / "g1" / "config.ini").string();
  r = run("run --config " + g1 + " --out " + (d.path() / "g2").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("could not hold text.dir's value (it has a '#' or spaces at an end): give --text.dir"),
            std::string::npos)
      << r.err;
  r = run("run --config " + g1 + " --text.dir '" + corpus.string() + "' --out " + (d.path() / "g3").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read(d.path() / "g3" / "grep.txt"), read(d.path() / "g1" / "grep.txt"));
  EXPECT_EQ(read(d.path() / "g1" / "grep.txt"), "a.txt:1:the end\n");
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
                   "item_backups", "backup_bytes", "recovery_ms_median", "cpu_s", "failures_fired", "precision",
                   "recall", "are"}) {
    EXPECT_NE(("," + header + ",").find(std::string(",") + col + ","), std::string::npos) << col;
  }
  EXPECT_EQ(lines(summary), 2);
  // The run's CPU time: some work was done, and no more than every core of this machine can do in its wall time
  // (with slack for what the run does around the timed part).
  const auto s = afs::testing::summary(d.path());
  const double cpu = std::stod(s.at("cpu_s")), wall = std::stod(s.at("seconds"));
  EXPECT_GT(cpu, 0);
  EXPECT_LE(cpu, (wall + 0.2) * std::thread::hardware_concurrency()) << "wall " << wall;
  EXPECT_NE(read(d.path() / "config.ini").find("ft.mode = approx"), std::string::npos);
  EXPECT_GE(lines(read(d.path() / "failures.csv")), 2);  // header + at least one recovery
  // --version names the revision meta.json records (what the experiment scripts' "Made by" lines cite).
  const auto v = run("--version");
  ASSERT_EQ(v.status, 0) << v.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(v.out, m, std::regex("afstream ([0-9a-f]+(\\+changes)?|unknown)\n"))) << v.out;
  EXPECT_NE(read(d.path() / "meta.json").find("\"git_revision\": \"" + m[1].str() + "\""), std::string::npos);
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

// distinct.csv holds its numbers in full: with 6 significant digits an exact count of 1554468 was written 1.55447e+06,
// so estimate / exact - 1 computed from the file missed relative_error by 1e-6. A negative epsilon is refused, not
// ignored.
TEST(Cli, DistinctJobWritesItsScoresInFullAndRefusesABadEpsilon) {
  TempDir d;
  auto r =
      run("run --job distinct --runtime threads --items 3000000 --distinct.keys 2000000 --distinct.skew 0 "
          "--quiet --out " +
          d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  std::stringstream csv(read(d.path() / "distinct.csv"));
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  std::vector<double> v;
  std::stringstream rs(row);
  for (std::string c; std::getline(rs, c, ',');) v.push_back(std::stod(c));
  ASSERT_EQ(v.size(), 4u) << row;
  EXPECT_GT(v[1], 1e6) << row;
  EXPECT_NEAR(v[0] / v[1] - 1, v[2], 1e-12) << row;
  r = run("run --job distinct --runtime threads --items 1000 --quiet --distinct.epsilon -1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("relative error must be in (0, 1)"), std::string::npos) << r.err;
}

// Theta is in register ranks for the distinct job: one at or above the largest rank protects nothing and is refused.
// The job's run default is 8 (the general 1e5 would be refused: `afstream run --job distinct` failed as given, and so
// did the command `afstream gen --job distinct` prints).
TEST(Cli, DistinctJobRefusesAThetaThatProtectsNothing) {
  auto r = run("run --job distinct --items 1000 --quiet --ft.theta 1e5");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("ft.state-divergence-max (Theta): 100000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ft.theta 8"), std::string::npos) << r.err;
  TempDir d;
  r = run("run --job distinct --items 1000 --quiet --out " + d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(read(d.path() / "config.ini").find("ft.state-divergence-max = 8"), std::string::npos);
}

// The online join on worker processes (join.csv): without failures the 95% interval covers the exact join COUNT and
// SUM; with SIGKILLs of every worker the Theorem 3 interval (n - M samples, M the charged bound, at most
// Theta + L + Gamma) still covers, and the samples lost against the failure-free run are within M.
TEST(Cli, JoinJobIntervalCoversWithAndWithoutFailures) {
  std::vector<double> no_failure;
  for (const std::string fail : {"", " --fail.count 2 --fail.target all"}) {
    TempDir d;
    const auto r = run("run --job join --items 100000 --join.keys 2000 --ft.theta 100 --ft.l 50 --ft.gamma 50 --quiet" +
                       fail + " --out " + d.path().string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::stringstream csv(read(d.path() / "join.csv"));
    std::string header, row;
    std::getline(csv, header);
    std::getline(csv, row);
    ASSERT_EQ(header,
              "estimate,exact,relative_error,lower,upper,covered,samples,sampled_pairs,lost_sample_bound,"
              "missing_items,sum_estimate,sum_exact,sum_relative_error,sum_covered");
    std::vector<double> v;
    std::stringstream rs(row);
    for (std::string c; std::getline(rs, c, ',');) v.push_back(std::stod(c));
    ASSERT_EQ(v.size(), 14u) << row;
    EXPECT_GT(v[1], 1e6) << row;                 // a non-trivial join
    EXPECT_EQ(v[5], 1) << fail << ": " << row;   // COUNT covered
    EXPECT_EQ(v[13], 1) << fail << ": " << row;  // SUM covered
    EXPECT_LE(v[3], v[1]);
    EXPECT_GE(v[4], v[1]);
    EXPECT_LT(std::fabs(v[2]), 0.2) << row;
    EXPECT_NEAR(v[6], 10000, 500) << row;                     // 10% of the tuples sampled
    EXPECT_NEAR(v[7], v[0] * 0.1 * 0.1, 1e-6 * v[0]) << row;  // the sampled pairs: COUNT = pairs / p^2
    if (fail.empty()) {
      EXPECT_EQ(v[8], 0) << row;
      no_failure = v;
    } else {
      EXPECT_GT(v[8], 50) << row;                    // charged: at least Gamma
      EXPECT_LE(v[8], 100 + 50 + 50 + 2) << row;     // at most Theta + L + Gamma (+ rounding up per copy)
      EXPECT_LE(v[6], no_failure[6]) << row;         // the same coins: a failure can only lose samples
      EXPECT_LE(no_failure[6] - v[6], v[8]) << row;  // ... and at most M of them
      EXPECT_GE(lines(read(d.path() / "failures.csv")), 3);
    }
  }
}

// Theta is in samples for the join job: with failures planned, a Theta + L + Gamma near the sample count would make
// the Theorem 3 interval vacuous, so it is refused with the option named; bad join options are named too.
TEST(Cli, JoinJobRefusesVacuousThresholdsAndBadOptions) {
  auto r = run("run --job join --items 10000 --fail.count 1 --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("Theta + L + Gamma"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ft.theta 100"), std::string::npos) << r.err;
  r = run("run --job join --items 1000 --join.sample-rate 1.5 --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("join.sample-rate"), std::string::npos) << r.err;
  r = run("run --job join --items 1000 --join.keys 0 --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("join.keys"), std::string::npos) << r.err;
}

// hot_items.csv as (auction, estimate, exact) rows.
std::vector<std::array<long long, 3>> hot_items(const fs::path& dir) {
  std::istringstream in(read(dir / "hot_items.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "auction,estimate,exact");
  std::vector<std::array<long long, 3>> rows;
  while (std::getline(in, line)) {
    const auto c = afs::testing::split_csv(line);
    if (c.size() != 3) {
      ADD_FAILURE() << line;
      continue;
    }
    rows.push_back({std::stoll(c[0]), std::stoll(c[1]), std::stoll(c[2])});
  }
  return rows;
}

// NEXMark hot items (query 5) without failures: the 1e5-event stream holds 60 hot auctions (the multiples of the
// hot-auction span, 100), each with ~790 bids against ~8 for the others; the 4 x 65536 Count-Min finds exactly them.
TEST(Cli, NexmarkHotItemsFindsEveryHotAuction) {
  TempDir d;
  const auto r = run("run --job nexmark-hot-items --items 100000 --quiet --out " + d.str());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto s = afs::testing::summary(d.path());
  EXPECT_EQ(s.at("job"), "nexmark-hot-items");
  EXPECT_EQ(std::stod(s.at("recall")), 1.0);
  EXPECT_EQ(std::stod(s.at("precision")), 1.0);
  EXPECT_EQ(std::stod(s.at("true_heavy")), 60);
  EXPECT_LT(std::stod(s.at("are")), 0.01);
  const auto rows = hot_items(d.path());
  ASSERT_EQ(rows.size(), 60u);
  for (const auto& [auction, estimate, exact] : rows) {
    EXPECT_EQ(auction % 100, 0) << auction;
    EXPECT_GE(estimate, exact) << auction;  // Count-Min never underestimates
    EXPECT_GT(exact, 700) << auction;
  }
}

// With SIGKILLs of every worker, Theorem 2's compensation leaves no hot auction out: recall 1 and no estimate below
// the exact count (precision depends on how much was added back: see algorithms/nexmark/README.md).
TEST(Cli, NexmarkHotItemsHasNoFalseNegativesAfterFailures) {
  for (const std::string runtime : {"threads", "processes"}) {
    TempDir d;
    const auto r =
        run("run --job nexmark-hot-items --items 100000 --quiet --fail.count 3 --fail.target all --runtime " + runtime +
            " --out " + d.str());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto s = afs::testing::summary(d.path());
    EXPECT_EQ(std::stod(s.at("recall")), 1.0) << runtime;
    EXPECT_EQ(std::stod(s.at("true_heavy")), 60) << runtime;
    EXPECT_GE(lines(read(d.path() / "failures.csv")), 4) << runtime;  // header + one recovery per worker at least
    int hot = 0;
    for (const auto& [auction, estimate, exact] : hot_items(d.path())) {
      EXPECT_GE(estimate, exact) << runtime << " auction " << auction;
      hot += exact > 383;
    }
    EXPECT_EQ(hot, 60) << runtime;
  }
}

TEST(Cli, NexmarkHotItemsBadOptionsNameTheOption) {
  auto r = run("run --job nexmark-hot-items --items 1000 --quiet --nexmark.hot-auction-ratio 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nexmark.hot-auction-ratio: expected >= 1"), std::string::npos) << r.err;
  r = run("run --job nexmark-hot-items --items 1000 --quiet --nexmark.phi -1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nexmark.phi: expected >= 0"), std::string::npos) << r.err;
  r = run("run --job nexmark-hot-items --items 1000 --quiet --nexmark.hot-auction-ratio 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nexmark.phi: 0 (automatic) needs"), std::string::npos) << r.err;
}

// The heavy-hitters job with Space-Saving (--hh.algorithm space-saving) on worker processes, with SIGKILLs of all
// workers: recall 1, and every reported count at or above the key's exact weight (proofs/space-saving.md, Theorem
// SS). Bad choices name their option.
// A Space-Saving capacity too small for its guarantee at this phi (proofs/space-saving.md (3): keys above N / k) is
// run, with a note naming hh.capacity and the capacity that guarantees the heavy hitters (it ran silently with recall
// 0.34-0.65); the default capacity gets none.
TEST(Cli, ASpaceSavingCapacityTooSmallForPhiIsNoted) {
  auto r =
      run("run --job heavy-hitters --hh.algorithm space-saving --hh.capacity 100 --items 100000 --runtime threads "
          "--quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: hh.capacity: Space-Saving monitors 100 keys per instance"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hh.capacity 1000 (the total weight / phi) or more guarantees them"), std::string::npos)
      << r.err;
  r = run("run --job heavy-hitters --hh.algorithm space-saving --items 100000 --runtime threads --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note: hh.capacity"), std::string::npos) << r.err;
}

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

// Without failures every mode reports the same heavy hitters (Proposition CM0, theorem2-count-min.md §6). Count-Min's
// finish() reports every watched key whose final estimate exceeds phi, and the jobs set the watch margin in approx
// mode only: with a narrow sketch, where collisions lift many estimates past phi after a key's own last item, approx
// reported 23,971 keys against 14,119 for none and exact (NEXMark at phi 50: 11,166 against 10,913).
TEST(Cli, CountMinReportsTheSameKeysInEveryModeWithoutFailures) {
  struct Job {
    std::string args, file;
  };
  for (const Job& job :
       {Job{"--job heavy-hitters --items 100000 --hh.width 256", "heavy_hitters.csv"},
        Job{"--job nexmark-hot-items --items 200000 --nexmark.width 64 --nexmark.phi 50", "hot_items.csv"}}) {
    std::vector<std::vector<std::string>> reports;
    for (const std::string mode : {"none", "approx", "exact"}) {
      TempDir d;
      const auto r = run("run " + job.args + " --runtime threads --quiet --ft.mode " + mode + " --out " + d.str());
      ASSERT_EQ(r.status, 0) << job.args << " " << mode << ": " << r.err;
      reports.push_back(sorted_rows(d.path() / job.file));
    }
    ASSERT_GT(reports[0].size(), 100u) << job.args;  // the narrow sketch does lift many estimates past phi
    EXPECT_EQ(reports[1], reports[0]) << job.args << ": approx " << reports[1].size() << " keys, none "
                                      << reports[0].size();
    EXPECT_EQ(reports[2], reports[0]) << job.args << ": exact " << reports[2].size() << " keys, none "
                                      << reports[0].size();
  }
}

// Sizing and threshold errors name the option that set them, with the value as given (they said
// "CountMin: epsilon 0.000000 needs ...", and phi inf reached the operator: "parameter 'phi': expected a number").
TEST(Cli, HeavyHitterSizingErrorsNameTheirOption) {
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--job heavy-hitters --hh.phi inf", "hh.phi: expected > 0 and finite, got inf"},
           {"--job heavy-hitters --hh.epsilon 1e-12", "hh.width/depth/epsilon/delta: CountMin: epsilon 1e-12 needs"},
           {"--job heavy-hitters --hh.algorithm space-saving --hh.epsilon 1e-9",
            "hh.capacity/epsilon: SpaceSaving: epsilon 1e-09 needs"},
           {"--job nexmark-hot-items --nexmark.phi inf", "nexmark.phi: expected >= 0 and finite, got inf"},
       }) {
    const auto bad = run("run " + args + " --runtime threads --quiet --items 1000");
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_EQ(lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(expect), std::string::npos) << args << ": " << bad.err;
  }
}

// What a job file gets wrong names the file and the line (DESIGN 8): Boost named neither (`unrecognised option
// 'hh.bogus'`, "contains an invalid line 'items'"), in a config.ini of some seventy lines; a file naming another
// (`config = ...`) was ignored without a word; a NaN epsilon ran on hh.width; fail.domain names fail.target could not
// tell from `all` or worker ids, or given twice, were shadowed without a word.
TEST(Cli, JobFileErrorsNameFileAndLine) {
  TempDir d;
  const auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(d.path() / name) << text;
    return (d.path() / name).string();
  };
  const std::string head = "job = heavy-hitters\nitems = 1000\nruntime = threads\n";
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--config " + file("unknown.ini", head + "\n# a comment\nhh.bogus = 3\n"),
            "unknown.ini' line 6: unknown option 'hh.bogus'"},
           {"--config " + file("section.ini", head + "[hh]\nbogus = 3\n"),
            "section.ini' line 5: unknown option 'hh.bogus'"},
           {"--config " + file("noeq.ini", head + "quiet\n"), "noeq.ini' line 4: expected KEY = VALUE, got 'quiet'"},
           {"--config " + file("value.ini", head + "hh.width = abc\n"),
            "value.ini' line 4: hh.width: expected a whole number"},
           {"--config " + file("twice.ini", head + "hh.width = 5\nhh.width = 6\n"), "twice.ini' line 5:"},
           // A bad value after a repeated key is named at its own line (the repetition's line was given).
           {"--config " + file("order.ini", head + "hh.width = 5\nhh.width = 6\nfail.count = 1.5\n"),
            "order.ini' line 6: fail.count: expected a whole number, got '1.5'"},
           {"--config " + file("nokey.ini", head + "= 5\n"), "nokey.ini' line 4: expected KEY = VALUE, got '= 5'"},
           {"--config " + file("emptysection.ini", head + "[]\nseed = 5\n"),
            "emptysection.ini' line 5: unknown option '.seed'"},
           {"--config " + file("nested.ini", head + "config = other.ini\n"),
            "nested.ini' line 4: a job file cannot name another"},
           {"--job distinct --config " + file("otherjob.ini", head + "hh.width = 100\n"),
            "otherjob.ini' line 4: unknown option 'hh.width'"},
           {"--job heavy-hitters --hh.epsilon nan", "hh.epsilon: expected 0 <= epsilon < 1"},
           {"--job heavy-hitters --hh.delta nan", "hh.delta: expected 0 <= delta < 1"},
           {"--job heavy-hitters --fail.count 1 --fail.domain all=1 --fail.target all",
            "fail.domain: 'all' cannot name a domain"},
           {"--job heavy-hitters --fail.count 1 --fail.domain 3=1 --fail.target 3",
            "fail.domain: '3' cannot name a domain"},
           {"--job heavy-hitters --fail.count 1 --fail.domain r=1 --fail.domain r=2 --fail.target r",
            "domain 'r' given twice"},
       }) {
    const auto bad = run("run " + args + " --runtime threads --quiet --items 1000");
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_EQ(lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(expect), std::string::npos) << args << ": " << bad.err;
  }
  // The backup server's options file: the same.
  const auto bs =
      run("backup-server --store memory --config " + file("bs.ini", "listen = tcp://127.0.0.1:0\nstore.bogus = 1\n"));
  EXPECT_EQ(bs.status, 2);
  EXPECT_NE(bs.err.find("bs.ini' line 2: unknown option 'store.bogus'"), std::string::npos) << bs.err;
  // A registering worker's bad value is not told to give only worker.* options (it did).
  const auto w = run("worker --worker.id x --worker.controller tcp://127.0.0.1:1");
  EXPECT_EQ(w.status, 2);
  EXPECT_NE(w.err.find("'x'"), std::string::npos) << w.err;
  EXPECT_EQ(w.err.find("give only worker.*"), std::string::npos) << w.err;
}

// A file whose values add up past 2^63 - 1 is refused: the counts and the exact weights are int64, and they wrapped
// to negative (a key of weight 1e19 was reported with exact weight -8.4e18, or not at all by Space-Saving, and the
// scores said precision 1 recall 1).
TEST(Cli, HeavyHittersRefusesAFileWhoseWeightsOverflow) {
  TempDir d;
  const auto input = d.path() / "big.csv";
  std::ofstream(input) << "1,5000000000000000000\n1,5000000000000000000\n2,5\n";
  for (const std::string algorithm : {"count-min", "space-saving"}) {
    const auto r = run("run --job heavy-hitters --runtime threads --quiet --hh.algorithm " + algorithm +
                       " --hh.input " + input.string());
    EXPECT_NE(r.status, 0) << algorithm << ": " << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("hh.input: the item values add up to more than 2^63 - 1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(input.string() + ":2: '1,5000000000000000000'"), std::string::npos) << r.err;
  }
}

// A weight below 1 is refused naming the file, the line and the line's key as written (it named only the key's
// 64-bit hash: "item values must be >= 1 (key 6294355645245719615)").
TEST(Cli, HeavyHittersNamesTheFileAndLineOfAWeightBelowOne) {
  TempDir d;
  const auto input = d.path() / "neg.csv";
  std::ofstream(input) << "# weights\napple,5\nbanana,-3\n";
  for (const std::string policy : {"fail", "skip"}) {
    const auto r = run("run --job heavy-hitters --runtime threads --quiet --hh.on-error " + policy + " --hh.input " +
                       input.string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(input.string() + ":3: 'banana,-3': item values must be >= 1"), std::string::npos) << r.err;
  }
}

// On one host the process runtime's backup server leaves state chains to the workers (--process.store-compact-ratio
// 0 by default: its compactions took the workers' cores, experiments/results/process-runtime/compaction/); the
// option turns them on. The join's chains grow past their full snapshot within 200,000 items; the server counts its
// compactions when it stops.
TEST(Cli, ProcessRuntimesServerCompactsOnlyWhenAsked) {
  auto compactions = [](const std::string& extra) {
    const auto r =
        run("run --job join --items 200000 --runtime processes --process.store memory --ft.mode approx "
            "--quiet" +
            extra);
    EXPECT_EQ(r.status, 0) << r.err;
    const long n = afs::testing::server_compactions(r.err);
    EXPECT_GE(n, 0) << "no compaction count from the backup server:\n" << r.err;
    return n;
  };
  EXPECT_EQ(compactions(""), 0);
  EXPECT_GT(compactions(" --process.store-compact-ratio 1"), 0);
}

// Runs of several modes and jobs in one --out directory: every row of summary.csv stays under its header. A row with
// columns the file lacks (checkpoint mode's metrics, another job's scores) rewrites the file under the union of the
// columns; before, a checkpoint row's 30 values went under the 23-column header of the modes before it.
TEST(Cli, SummaryRowsOfDifferentColumnsShareADirectory) {
  TempDir d;
  for (const std::string args : {"--job heavy-hitters --ft.mode none", "--job heavy-hitters --ft.mode checkpoint",
                                 "--job distinct --ft.mode none", "--job heavy-hitters --ft.mode exact"}) {
    const auto r = run("run " + args + " --items 20000 --runtime threads --quiet --out " + d.path().string());
    ASSERT_EQ(r.status, 0) << args << ": " << r.err;
  }
  std::istringstream in(read(d.path() / "summary.csv"));
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) rows.push_back(afs::testing::split_csv(line));
  ASSERT_EQ(rows.size(), 5u);
  const auto& header = rows[0];
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<std::size_t>(it - header.begin());
  };
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i].size(), header.size()) << "row " << i;
  const std::size_t mode = column("mode"), checkpoints = column("checkpoints"), precision = column("precision"),
                    estimate = column("estimate");
  EXPECT_EQ(rows[1][mode], "none");
  EXPECT_EQ(rows[2][mode], "checkpoint");
  EXPECT_EQ(rows[4][mode], "exact");
  EXPECT_EQ(rows[1][checkpoints], "");  // none has no checkpoint metrics
  EXPECT_NE(rows[2][checkpoints], "");  // checkpoint mode's own
  EXPECT_EQ(rows[2][precision], "1");   // its score under its own name
  EXPECT_EQ(rows[3][precision], "");    // the distinct job has no precision
  EXPECT_NE(rows[3][estimate], "");     // but an estimate
  EXPECT_EQ(rows[4][precision], "1");
}

// A run shorter than the metrics interval still writes its metrics.jsonl line (the process runtime wrote none: an
// empty file), and an --out that cannot be a directory is one line on stderr, before the configuration is printed.
TEST(Cli, ShortRunsWriteMetricsAndABadOutIsOneLine) {
  for (const std::string runtime : {"threads", "processes"}) {
    TempDir d;
    const auto r =
        run("run --job heavy-hitters --items 1000 --quiet --runtime " + runtime + " --out " + d.path().string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto metrics = read(d.path() / "metrics.jsonl");
    EXPECT_NE(metrics.find("\"source_items\": 1000"), std::string::npos) << runtime << ": " << metrics;
    // The job's progress (what the progress line's percentage is), all of it processed by the end.
    EXPECT_NE(metrics.find("\"input_items\": 1000"), std::string::npos) << runtime << ": " << metrics;
  }
  TempDir d;
  const auto file = d.path() / "a-file";
  std::ofstream(file) << "x";
  const auto r = run("run --job heavy-hitters --items 1000 --quiet --out " + file.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("out: cannot create directory"), std::string::npos) << r.err;
}

// metrics.jsonl has a line a second while the run goes on, and keeps them when the run is stopped by a signal: it was
// written through a buffer closed at the end, so it stayed empty for some 25 s, and for good after Ctrl-C or timeout.
TEST(Cli, MetricsAreWrittenAsTheRunGoesOnAndKeptWhenItIsStopped) {
  for (const std::string runtime : {"threads", "processes"}) {
    TempDir d;
    const auto out = d.path() / "out";
    const std::string cmd = "timeout -s INT " + std::to_string(afs::testing::scaled_seconds(4)) + " " +
                            std::string(AFS_BINARY) + " run --job heavy-hitters --items 1e11 --quiet --runtime " +
                            runtime + " --out " + out.string() + " >/dev/null 2>" + (d.path() / "err").string();
    const int rc = std::system(cmd.c_str());
    EXPECT_FALSE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << runtime << ": the run was not stopped";
    const auto metrics = read(out / "metrics.jsonl");
    EXPECT_GE(lines(metrics), 2) << runtime << ": " << metrics << read(d.path() / "err");
    EXPECT_NE(metrics.find("\"source_items\": "), std::string::npos) << runtime << ": " << metrics;
  }
}

// An option of another job is named as such (it was "unrecognised option" alone: --learn.parallelism is the learn
// job's, the ps job's workers are --learn.workers).
TEST(Cli, AnotherJobsOptionIsNamedAsItsOption) {
  auto r = run("run --job ps --learn.parallelism 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unrecognised option '--learn.parallelism' (an option of the learn job; this command's job is "
                       "ps)"),
            std::string::npos)
      << r.err;
  r = run("run --job heavy-hitters --bogus.option 3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unrecognised option '--bogus.option'\n"), std::string::npos) << r.err;
}

// A job's options that its other options leave without effect, given on the command line, are noted (they were
// silently ignored: --hh.capacity 5 --hh.epsilon 0.5 ran Space-Saving with 2 counters); a rerun from config.ini,
// which holds every option, notes none of them.
TEST(Cli, OptionsTheJobsOtherOptionsLeaveWithoutEffectAreNoted) {
  TempDir d;
  auto r =
      run("run --job heavy-hitters --items 1000 --quiet --runtime threads --hh.algorithm space-saving "
          "--hh.capacity 5 --hh.epsilon 0.5 --hh.width 100 --out " +
          d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: --hh.capacity has no effect (hh.epsilon > 0 sets the capacity)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("note: --hh.width has no effect (count-min only)"), std::string::npos) << r.err;
  const auto notes = [](const std::string& err) {
    int n = 0;
    for (auto at = err.find("has no effect"); at != std::string::npos; at = err.find("has no effect", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(notes(r.err), 2) << r.err;
  // (A Space-Saving of ceil(1 / 0.5) = 2 keys is also too small for its guarantee: Job::cautions, about the values.)
  EXPECT_NE(r.err.find("note: hh.capacity: Space-Saving monitors 2 keys per instance"), std::string::npos) << r.err;
  r = run("run --config " + (d.path() / "config.ini").string() + " --quiet --runtime threads");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("has no effect"), std::string::npos) << r.err;
  r = run("run --job heavy-hitters --items 1000 --quiet --runtime threads --hh.epsilon 0.01 --hh.width 100");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: --hh.width has no effect (hh.epsilon > 0 sizes the width)"), std::string::npos) << r.err;
  r = run("run --job learn --items 1000 --quiet --runtime threads --learn.hash-bits 12");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: --learn.hash-bits has no effect (kdd, vw and libsvm data only)"), std::string::npos)
      << r.err;
  r = run("run --job learn --items 1000 --quiet --runtime threads --learn.data kdd --learn.hash-bits 12");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note:"), std::string::npos) << r.err;
}

// Options of another fault-tolerance mode, given on the command line, are accepted and noted (they were ignored
// without a word: --ft.theta under exact); a job's own run defaults (learn's replay options) and a run's config.ini,
// which holds every option, are not noted.
TEST(Cli, OptionsOfAnotherModeAreNoted) {
  TempDir d;
  auto r =
      run("run --job heavy-hitters --items 1000 --quiet --runtime threads --ft.mode exact --ft.theta 5 "
          "--ft.checkpoint-interval 2s --out " +
          d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: --ft.theta (approx only) has no effect in ft.mode exact"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("note: --ft.checkpoint-interval (checkpoint only)"), std::string::npos) << r.err;
  r = run("run --config " + (d.path() / "config.ini").string() + " --ft.mode none --quiet --runtime threads");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note:"), std::string::npos) << r.err;
  r = run("run --job learn --items 2000 --quiet --runtime threads --ft.mode exact");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note:"), std::string::npos) << r.err;
  // The process runtime's options under the thread runtime (spares and a memory store were silently not had).
  r = run("run --job heavy-hitters --items 1000 --quiet --runtime threads --process.standby 2 --process.store memory");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: --process.standby has no effect (--runtime processes only)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("note: --process.store has no effect (--runtime processes only)"), std::string::npos) << r.err;
}

// Commands other than run: a stray option of list (exit 0 before) and a backup server's listen that is no endpoint
// (ZeroMQ's "Protocol not supported" named no option) are one line naming what is wrong.
TEST(Cli, OtherCommandsRefuseBadInputInOneLine) {
  for (const auto& [args, expect] : {std::pair{std::string("list --bogus"), std::string("list takes no options")},
                                     std::pair{std::string("backup-server --store memory --listen bogus"),
                                               std::string("listen: 'bogus' is not an endpoint")}}) {
    const auto r = run(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("afstream: error: " + expect), std::string::npos) << r.err;
  }
  // A second keygen into the same place keeps the first keypair and says which options choose another.
  TempDir d;
  const std::string keygen = "keygen --out " + d.path().string() + " --name k";
  ASSERT_EQ(run(keygen).status, 0);
  const auto r = run(keygen);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("exists already: not overwriting it (remove it, or choose another --name or --out)"),
            std::string::npos)
      << r.err;
}

TEST(Cli, ListAndHelp) {
  auto r = run("list");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("heavy-hitters"), std::string::npos);
  EXPECT_NE(r.out.find("count-min-hh"), std::string::npos);
  EXPECT_NE(r.out.find("distinct-hll"), std::string::npos);
  EXPECT_NE(r.out.find("ripple-join"), std::string::npos);
  EXPECT_NE(r.out.find("nexmark-hot-items"), std::string::npos);
  EXPECT_NE(r.out.find("space-saving-hh"), std::string::npos);
  r = run("run --job heavy-hitters --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--ft.state-divergence-max"), std::string::npos);
  EXPECT_NE(r.out.find("--hh.phi"), std::string::npos);
  // A job's own defaults are shown in place of the general ones (the ps job's Theta is 10, not 1e5).
  r = run("run --job ps --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Defaults of job ps, in place of the general ones shown below unless given:\n"
                       "  --ft.state-divergence-max 10\n"),
            std::string::npos)
      << r.out;
  r = run("controller --job ps --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("always runs worker processes"), std::string::npos) << r.out;
  // It lists neither --runtime (which it refuses unless it says processes) nor run's help twice, and keeps the rest.
  EXPECT_EQ(r.out.find("--runtime"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--controller.bind"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--ft.state-divergence-max"), std::string::npos) << r.out;
  r = run("run --job ps --help");
  EXPECT_NE(r.out.find("--runtime"), std::string::npos) << r.out;
}

// Every job's --help shows real-valued defaults as people write them: Boost's own text of a double has 17
// significant digits (--hh.skew's 0.9 read 0.90000000000000002, --learn.l2's 1e-6 9.9999999999999995e-07).
TEST(Cli, HelpShowsDefaultsAsWritten) {
  const auto listed = run("list");
  ASSERT_EQ(listed.status, 0);
  std::vector<std::string> jobs;
  {
    std::istringstream in(listed.out.substr(0, listed.out.find("operators:")));
    std::string line;
    while (std::getline(in, line)) {
      // "  NAME  description": a job's line (its run defaults are indented further).
      if (line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ') {
        jobs.push_back(line.substr(2, line.find(' ', 2) - 2));
      }
    }
  }
  ASSERT_GE(jobs.size(), 9u) << listed.out;
  const std::regex long_default(R"(\(=[-+]?[0-9]*\.?[0-9]{16,}(e[-+][0-9]+)?\))");
  for (const auto& job : jobs) {
    const auto r = run("run --job " + job + " --help");
    EXPECT_EQ(r.status, 0) << job;
    std::smatch m;
    EXPECT_FALSE(std::regex_search(r.out, m, long_default)) << job << ": " << m.str();
  }
  const auto r = run("run --job join --help");
  EXPECT_NE(r.out.find("--join.confidence arg (=0.95)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--ft.state-divergence-max arg (=100000)"), std::string::npos) << r.out;
}

}  // namespace
