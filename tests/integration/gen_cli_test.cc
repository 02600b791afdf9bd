// Integration tests of `afstream gen` as a user runs it (the real binary in a child process): the input a run would
// generate, written to a file and read back by the job, gives that run's results (heavy hitters: the same report;
// distinct: the same estimate, and a file of words counted under failures; learn: the same progressive and held-out
// figures, dense data as CSV and sparse as LIBSVM); a run's config.ini
// names its input; standard output; bad input is one line naming the option, and leaves no file behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

// The options gen printed to run the job on its file ("afstream run --job NAME <these> [its other options]").
std::string printed_read_back(const std::string& err, const std::string& job) {
  const std::string head = "afstream run --job " + job + " ";
  const auto at = err.find(head);
  if (at == std::string::npos) {
    ADD_FAILURE() << "gen printed no command: " << err;
    return "";
  }
  const auto end = err.find(" [its other options]", at);
  return err.substr(at + head.size(), end - at - head.size());
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
  // The printed options as they are (they carry the seed, which also seeds the sketch's hashes), with the run's
  // other options.
  const std::string read_back = printed_read_back(r.err, "heavy-hitters");
  EXPECT_NE(read_back.find("--seed 3"), std::string::npos) << read_back;
  r = run("run --job heavy-hitters --hh.phi 150000 --ft.mode none --runtime threads --quiet " + read_back + " --out " +
              b.path().string(),
          scratch.path());
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
  const std::string gen_err = r.err;
  r = run("run " + job + " --out " + a.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r.err = gen_err;
  r = run("run --job distinct --ft.theta 8 --runtime threads --quiet " + printed_read_back(r.err, "distinct") +
              " --out " + b.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(a.path() / "distinct.csv"), slurp(b.path() / "distinct.csv"));
  EXPECT_GT(std::stod(summary(a.path())["exact"]), 50000);
  // 20,000 distinct words and addresses, each 30 times, in a scrambled order (3 times made a run so short on a loaded
  // host that no failure point fired before its end).
  const fs::path words = dir.path() / "words.txt";
  {
    std::ofstream f(words);
    for (int round = 0; round < 30; ++round) {
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
  EXPECT_EQ(s.at("items"), "600000");
  EXPECT_GE(std::stoi(s.at("failures_fired")), 1);  // (a short run may end before its last failure point)
  EXPECT_LT(std::abs(std::stod(s.at("relative_error"))), 3 * std::stod(s.at("standard_error")));
}

// The learn and ps jobs on generated data and on the file gen wrote of it, run with the options gen printed: the
// same figures. HIGGS-like dense data as CSV (bit for bit), KDD-like sparse data as LIBSVM, 20-class data whose last
// class may not occur in the file (the printed --learn.classes keeps the model's shape), regression targets, and
// dense data as LIBSVM (read back as sparse: the printed --learn.tolerance keeps the dense default).
TEST(GenCli, LearnDataReadBackTrainsTheSame) {
  TempDir scratch, dir;
  struct Case {
    std::string job, data, file, format;
  };
  const Case cases[] = {
      {"learn", "--learn.data higgs", "higgs.csv", "csv"},
      {"learn", "--learn.data kdd", "kdd.svm", "libsvm"},
      {"learn", "--learn.data multiclass --learn.task softmax --learn.classes 20 --learn.features 4", "m.csv", "csv"},
      {"learn", "--learn.data linear --learn.task linear --learn.features 6", "linear.csv", "csv"},
      {"learn", "--learn.data higgs --gen.format libsvm", "higgs.svm", "libsvm"},
      {"ps", "--learn.data higgs", "ps.csv", "csv"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.job + " " + c.data);
    TempDir a, b;
    const std::string items = c.job == "ps" ? "6000" : "20000";
    const std::string base = "--job " + c.job + " --items " + items + " --ft.mode none --runtime threads --quiet ";
    const std::string data = c.data.substr(0, c.data.find(" --gen.format"));  // what a run is given
    const std::string generated = base + data + " --learn.holdout 2000 --seed 2";
    const fs::path input = dir.path() / c.file;
    auto r = run("gen " + base + c.data + " --learn.holdout 2000 --seed 2 --out " + input.string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string total = std::to_string(std::stoul(items) + 2000);
    EXPECT_NE(r.err.find("wrote " + total + " records (" + c.format + ")"), std::string::npos) << r.err;
    EXPECT_EQ(lines(slurp(input)), std::stoul(total));
    const std::string read_back = printed_read_back(r.err, c.job);
    EXPECT_NE(read_back.find("--learn.format " + c.format), std::string::npos) << read_back;
    r = run("run " + generated + " --out " + a.path().string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    r = run("run " + base + read_back + " --out " + b.path().string(), scratch.path());
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<std::string> names{"progressive_loss", "progressive_accuracy", "holdout_accuracy", "holdout_loss"};
    if (c.job == "learn") names.push_back("tolerance");
    EXPECT_EQ(scores(a.path(), names), scores(b.path(), names));
    EXPECT_TRUE(std::isfinite(std::stod(summary(a.path())["holdout_loss"])));
  }
}

// `afstream list` says which jobs gen writes the input of.
TEST(GenCli, ListSaysWhichJobsItWrites) {
  TempDir scratch;
  const auto r = run("list", scratch.path());
  ASSERT_EQ(r.status, 0);
  // A job's entry: its line and the lines indented further below it.
  const auto entry = [&](const std::string& job) {
    std::istringstream in(r.out);
    std::string line, text;
    bool inside = false;
    while (std::getline(in, line)) {
      const bool job_line = line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ';
      if (job_line) inside = line.rfind("  " + job + "  ", 0) == 0;
      if (inside) text += line + "\n";
    }
    return text;
  };
  for (const std::string job : {"heavy-hitters", "distinct", "learn", "ps"}) {
    EXPECT_NE(entry(job).find("afstream gen writes its input"), std::string::npos) << job << ": " << entry(job);
  }
  EXPECT_FALSE(entry("join").empty());
  EXPECT_EQ(entry("join").find("afstream gen"), std::string::npos);
}

TEST(GenCli, WritesToStandardOutput) {
  TempDir scratch;
  const auto r = run("gen --job learn --items 90 --learn.holdout 10 --learn.data kdd --quiet --out -", scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines(r.out), 100u);
  EXPECT_TRUE(r.out.rfind("1 ", 0) == 0 || r.out.rfind("-1 ", 0) == 0) << r.out.substr(0, 80);
  EXPECT_NE(r.err.find("to standard output"), std::string::npos) << r.err;
}

// Anything but a new or regular file (a pipe, a symbolic link) is written to as it is, not replaced by a file; a gen
// stopped by a signal leaves no partial file.
TEST(GenCli, WritesThroughPipesAndLinksAndLeavesNothingWhenStopped) {
  TempDir scratch, dir;
  const fs::path fifo = dir.path() / "pipe", copy = dir.path() / "copy.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string gen = std::string(AFS_BINARY) + " gen --job heavy-hitters --items 1000 --quiet --out ";
  const std::string piped = "timeout " + std::to_string(afs::testing::scaled_seconds(60)) + " sh -c 'cat " +
                            fifo.string() + " > " + copy.string() + " & " + gen + fifo.string() + "; wait' 2>/dev/null";
  ASSERT_EQ(std::system(piped.c_str()), 0);
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_EQ(lines(slurp(copy)), 1000u);

  const fs::path target = dir.path() / "target.csv", link = dir.path() / "link.csv";
  { std::ofstream(target) << "old\n"; }
  fs::create_symlink(target, link);
  auto r = run("gen --job heavy-hitters --items 1000 --quiet --out " + link.string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(lines(slurp(target)), 1000u);
  // A refused gen leaves the link's target as it was (it was opened, and so emptied, before the options were checked).
  r = run("gen --job heavy-hitters --hh.algorithm foo --quiet --out " + link.string(), scratch.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(slurp(target)), 1000u);

  // About a minute of writing, stopped after a second.
  TempDir stopped;
  const std::string big = "timeout -s TERM 1 " + std::string(AFS_BINARY) + " gen --job heavy-hitters --items 1e9 " +
                          "--quiet --out " + (stopped.path() / "big.csv").string() + " 2>/dev/null";
  const int status = std::system(big.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 124);  // stopped by timeout's SIGTERM
  EXPECT_TRUE(fs::is_empty(stopped.path()));

  // A signal set to be ignored (nohup's SIGHUP) stays ignored; SIGTERM then ends gen as SIGTERM (the shell sees 143),
  // with nothing left.
  const std::string ignoring =
      "sh -c \"trap '' HUP; " + std::string(AFS_BINARY) + " gen --job heavy-hitters --items 1e9 --quiet --out " +
      (stopped.path() / "hup.csv").string() +
      " 2>/dev/null & pid=\\$!; sleep 0.5; kill -HUP \\$pid; sleep 0.5; kill -0 \\$pid && echo alive; "
      "kill -TERM \\$pid; wait \\$pid; echo status \\$?\" 2>/dev/null";
  FILE* p = ::popen(ignoring.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) said += buf;
  ::pclose(p);
  EXPECT_EQ(said, "alive\nstatus 143\n");
  EXPECT_TRUE(fs::is_empty(stopped.path()));
}

// A learn run on a file of class labels, repeated from its config.ini: the same classes (config.ini holds
// learn.classes = 0, "from the data", not a number that would override the file's), so the same results.
TEST(GenCli, ALearnRunOnAFileRepeatsFromItsConfig) {
  TempDir scratch, dir, a, b;
  const std::string file = (dir.path() / "three.csv").string();
  auto r =
      run("gen --job learn --learn.data multiclass --learn.task softmax --learn.classes 3 --items 3000 "
          "--learn.holdout 300 --quiet --out " +
              file,
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r =
      run("run --job learn --runtime threads --ft.mode none --quiet --learn.task softmax --learn.holdout 300 "
          "--learn.data file --learn.file " +
              file + " --out " + a.path().string(),
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run("run --config " + (a.path() / "config.ini").string() + " --out " + b.path().string(), scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> names{"progressive_loss", "holdout_accuracy", "holdout_loss"};
  EXPECT_EQ(scores(a.path(), names), scores(b.path(), names));
  EXPECT_EQ(slurp(a.path() / "model.csv"), slurp(b.path() / "model.csv"));
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
      {"gen --job heavy-hitters --hh.skew -1 --out " + out, "hh.skew: expected a finite skew >= 0, got -1"},
      {"gen --job heavy-hitters --hh.keys 0 --out " + out, "hh.keys: expected a key count"},
      {"gen --job heavy-hitters --hh.algorithm foo --out " + out, "hh.algorithm"},
      {"gen --job distinct --distinct.skew nan --out " + out, "distinct.skew"},
      {"gen --job distinct --distinct.input " + out + " --out " + out, "distinct.input: the input is already a file"},
      {"gen --job learn --learn.data kdd --gen.format csv --out " + out, "gen.format: csv"},
      {"gen --job learn --gen.format vw --out " + out, "gen.format: expected csv or libsvm"},
      // Its printed command would read the indices as they are, which stops at 2^24 weights.
      {"gen --job learn --learn.data kdd --learn.hash-bits 26 --items 100 --out " + out,
       "learn.hash-bits: the kdd data has 67108864 weights"},
      {"gen --job learn --learn.eta0 -1 --out " + out, "learn.eta0"},
      {"gen --job learn --learn.data file --learn.file x.csv --out " + out, "learn.data: file names data in a file"},
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

  // A file's classes: at least its largest class id + 1.
  TempDir data;
  const std::string classes = (data.path() / "classes.csv").string();
  auto r =
      run("gen --job learn --learn.data multiclass --learn.task softmax --learn.classes 6 --items 500 "
          "--learn.holdout 50 --quiet --out " +
              classes,
          scratch.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r =
      run("run --job learn --runtime threads --quiet --learn.task softmax --learn.holdout 50 --learn.data file "
          "--learn.file " +
              classes + " --learn.classes 2",
          scratch.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("learn.classes: 2 classes given, expected 6 to 65536"), std::string::npos) << r.err;
}

}  // namespace
