// Integration tests of the wordcount and grep jobs as a user runs them (`afstream run --job wordcount | grep`): small
// corpora made in a temp dir, results compared with a plain scan written here, a run with failures of every worker
// within the bound, and one clear error line for a missing corpus.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::slurp;
using afs::testing::summary;
using afs::testing::TempDir;

using Result = afs::testing::ProgramResult;

// Runs the afstream binary with args, capturing stdout and stderr into `scratch`; bounded by a timeout.
Result run(const std::string& args, const fs::path& scratch) {
  return afs::testing::run_program(AFS_BINARY, args, scratch, 60);
}

// A corpus of a few files (one in a subdirectory, one empty, one without a last newline) of seeded random text.
void make_corpus(const fs::path& dir, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> words = {"The", "cat", "sat",         "on",  "the",   "mat",   "THE",   "Dog",
                                          "ran", "x9",  "caf\xc3\xa9", "end", "lorem", "ipsum", "thesis"};
  const std::vector<std::string> names = {"a.txt", "sub/b.txt", "c.txt", "empty.txt"};
  for (std::size_t f = 0; f < names.size(); ++f) {
    fs::create_directories((dir / names[f]).parent_path());
    std::ofstream o(dir / names[f], std::ios::binary);
    if (names[f] == "empty.txt") continue;
    for (int line = 0; line < 600; ++line) {
      const int n = static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) o << words[rng() % words.size()] << (rng() % 5 ? " " : ", ");
      if (!(f == 2 && line == 599)) o << '\n';
    }
  }
}

// Word counts the plain way: runs of [A-Za-z0-9] and bytes >= 0x80, ASCII lower-cased.
std::map<std::string, long> plain_word_counts(const fs::path& dir) {
  std::map<std::string, long> m;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const auto s = slurp(e.path());
    std::string w;
    for (const char ch : s + " ") {
      const auto c = static_cast<unsigned char>(ch);
      if (std::isalnum(c) || c >= 0x80) {
        w += static_cast<char>(std::tolower(c));
      } else if (!w.empty()) {
        ++m[w];
        w.clear();
      }
    }
  }
  return m;
}

std::map<std::string, long> read_wordcount_csv(const fs::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "word,count");
  std::map<std::string, long> m;
  while (std::getline(f, line)) {
    const auto comma = line.rfind(',');
    m[line.substr(0, comma)] = std::stol(line.substr(comma + 1));
  }
  return m;
}

// Word count on worker processes and on threads: the counts file equals the plain count, and the summary says
// the results are exact and reports throughput.
TEST(TextCli, WordCountIsExact) {
  TempDir d;
  make_corpus(d.path() / "corpus", 3);
  const auto want = plain_word_counts(d.path() / "corpus");
  ASSERT_GT(want.size(), 10u);
  for (const std::string runtime : {"processes", "threads"}) {
    const auto out = d.path() / ("out-" + runtime);
    const auto r = run("run --job wordcount --text.dir " + (d.path() / "corpus").string() +
                           " --text.chunk-bytes 700 --runtime " + runtime + " --quiet --out " + out.string(),
                       d.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read_wordcount_csv(out / "wordcount.csv"), want) << runtime;
    auto s = summary(out);
    EXPECT_EQ(s["words_wrong"], "0");
    EXPECT_EQ(s["max_abs_error"], "0");
    EXPECT_EQ(s["distinct_words"], std::to_string(want.size()));
    EXPECT_GT(std::stod(s["bytes_per_s"]), 0);
    EXPECT_GT(std::stod(s["words_per_s"]), 0);
  }
}

// Grep, substring and regex: grep.txt lists path:line:text of exactly the lines a plain scan finds.
TEST(TextCli, GrepIsExact) {
  TempDir d;
  make_corpus(d.path() / "corpus", 5);
  for (const auto& [pattern, regex] : std::vector<std::pair<std::string, bool>>{{"the", false}, {"^Dog.*end", true}}) {
    // The plain scan: files in path order, lines split at '\n'.
    std::vector<std::string> paths;
    for (const auto& e : fs::recursive_directory_iterator(d.path() / "corpus")) {
      if (e.is_regular_file()) paths.push_back(fs::relative(e.path(), d.path() / "corpus").generic_string());
    }
    std::sort(paths.begin(), paths.end());
    std::string want;
    long count = 0;
    const std::regex re(pattern);
    for (const auto& p : paths) {
      std::stringstream s(slurp(d.path() / "corpus" / p));
      int n = 0;
      for (std::string line; std::getline(s, line);) {
        ++n;
        if (regex ? std::regex_search(line, re) : line.find(pattern) != std::string::npos) {
          want += p + ":" + std::to_string(n) + ":" + line + "\n";
          ++count;
        }
      }
    }
    ASSERT_GT(count, 5);
    const auto out = d.path() / "out";
    fs::remove_all(out);
    const auto r = run("run --job grep --text.dir " + (d.path() / "corpus").string() + " --grep.pattern '" + pattern +
                           "'" + (regex ? " --grep.regex" : "") +
                           " --text.chunk-bytes 500 --runtime threads --quiet --out " + out.string(),
                       d.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(slurp(out / "grep.txt"), want) << pattern;
    auto s = summary(out);
    EXPECT_EQ(s["matches"], std::to_string(count));
    EXPECT_EQ(s["missing"], "0");
    EXPECT_EQ(s["extra"], "0");
    EXPECT_GT(std::stod(s["lines_per_s"]), 0);
  }
}

// Regression (the process runtime, mode none): a short job whose whole stream reaches a receiver before the
// controller's directory names its sender there. The receiver's end-of-stream acknowledgement could not go out, was
// dropped, and the sender waited for it forever (half of these runs hung). Now it stays due and goes out once the
// sender is known. Each run is bounded (a hang shows as status -1 or 124).
TEST(TextCli, ModeNoneOnProcessesFinishesWhenTheStreamOutrunsTheDirectory) {
  TempDir d;
  for (int seed = 1; seed <= 6; ++seed) {
    const auto out = d.path() / ("out" + std::to_string(seed));
    // A 1 MB synthetic corpus (about 60 chunks) is short enough for the race (a hand-made one of 4 chunks is not).
    const auto r =
        run("run --job grep --text.synthetic-bytes 1000000 --text.synthetic-dir " + (d.path() / "corpus").string() +
                " --grep.pattern the --ft.mode none --runtime processes --quiet --seed " + std::to_string(seed) +
                " --out " + out.string(),
            d.path());
    ASSERT_EQ(r.status, 0) << "seed " << seed << ": " << r.err;
    EXPECT_EQ(summary(out)["missing"], "0");
  }
}

// Approximate mode with 3 failures of every worker: each word's count stays within Theta + L * alpha (alpha = 1)
// of the exact one (DESIGN 3), and the grep results within Theta + L lines.
TEST(TextCli, FailuresStayWithinTheBound) {
  TempDir d;
  const std::string corpus = " --text.synthetic-bytes 1500000 --text.synthetic-dir " + (d.path() / "syn").string() +
                             " --text.chunk-bytes 2048 --runtime threads --ft.mode approx --ft.theta 1000 --ft.l 100"
                             " --ft.gamma 1000 --fail.count 3 --fail.target all --quiet --out ";
  const auto wc = d.path() / "wc";
  auto r = run("run --job wordcount" + corpus + wc.string(), d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  auto s = summary(wc);
  EXPECT_EQ(s["failures"], "3");
  EXPECT_LE(std::stod(s["max_abs_error"]), 1000 + 100 * 1) << slurp(wc / "summary.csv");
  EXPECT_GT(std::stod(s["words"]), 200000);
  const auto grep = d.path() / "grep";
  r = run("run --job grep --grep.pattern e" + corpus + grep.string(), d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  s = summary(grep);
  EXPECT_LE(std::stod(s["missing"]), 1000 + 100) << slurp(grep / "summary.csv");
  EXPECT_EQ(s["extra"], "0");
  // Without --ft.theta the grep job's own default applies (GrepJob::run_defaults: 100 matching lines, not the
  // general 1e5), and the bound is Theta + L * alpha with the general L, 1e3.
  const auto grep_default = d.path() / "grep-default";
  const std::string defaults = " --text.synthetic-bytes 1500000 --text.synthetic-dir " + (d.path() / "syn").string() +
                               " --text.chunk-bytes 2048 --runtime threads --ft.mode approx --fail.count 3"
                               " --fail.target all --quiet --out ";
  r = run("run --job grep --grep.pattern e" + defaults + grep_default.string(), d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  s = summary(grep_default);
  EXPECT_EQ(std::stod(s["theta"]), 100);
  EXPECT_LE(std::stod(s["missing"]), 100 + 1000) << slurp(grep_default / "summary.csv");
  EXPECT_EQ(s["extra"], "0");
}

// The text jobs' run default ft.replay-items-max = 1024 (TextJob::run_defaults): the stateless workers fed by the
// source make it commit its position, so a failure of all workers late in the run sends again at most about 1024
// chunks per worker, not every chunk from the first. Given on the command line, the option wins (0: off).
TEST(TextCli, AFailureLateInTheRunRepeatsAtMostTheReplayBound) {
  TempDir d;
  // 12 MB in 1 KB chunks: about 11,700 chunks, one failure of all workers after 80% of them.
  const std::string common = " --text.synthetic-bytes 12000000 --text.synthetic-dir " + (d.path() / "syn").string() +
                             " --text.chunk-bytes 1024 --runtime threads --ft.mode approx --fail.at 0.8"
                             " --fail.target all --quiet --out ";
  // The most any matcher processed again, and whether it was reported at all.
  auto most_repeated = [](const fs::path& out) {
    std::ifstream f(out / "failures.csv");
    std::string line;
    std::getline(f, line);
    const auto header = afs::testing::split_csv(line);
    const auto worker = afs::testing::column_of(header, "worker");
    const auto repeated = afs::testing::column_of(header, "repeated_items");
    long most = -1;
    while (std::getline(f, line)) {
      const auto cols = afs::testing::split_csv(line);
      if (std::stoi(cols.at(worker)) == 1 || std::stoi(cols.at(worker)) == 2) {  // the matchers
        most = std::max(most, std::stol(cols.at(repeated)));
      }
    }
    return most;
  };
  const auto bounded = d.path() / "bounded";
  auto r = run("run --job grep --grep.pattern e" + common + bounded.string(), d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(bounded / "config.ini").find("ft.replay-items-max = 1024"), std::string::npos);
  EXPECT_EQ(summary(bounded)["extra"], "0");
  const long with_bound = most_repeated(bounded);
  EXPECT_GE(with_bound, 0) << slurp(bounded / "failures.csv");
  // The bound, plus backups queued but not yet written when the worker failed (up to two more intervals under load).
  EXPECT_LE(with_bound, 3 * 1024) << slurp(bounded / "failures.csv");

  const auto unbounded = d.path() / "unbounded";
  r = run("run --job grep --grep.pattern e --ft.replay-items-max 0" + common + unbounded.string(), d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(unbounded / "config.ini").find("ft.replay-items-max = 0"), std::string::npos);
  // Each matcher had processed about 4,700 chunks when it failed, every one of them sent again.
  EXPECT_GT(most_repeated(unbounded), 3 * 1024) << slurp(unbounded / "failures.csv");
  EXPECT_LT(2 * with_bound, most_repeated(unbounded));
}

// repeated_items counts the items a recovered worker processes again. A word counter is fed by the tokenizers, which
// are not replayable: what it processed after its restored backup and did not log is lost (missing_items), never
// processed again, so only its replayed log can hold repeated items. It reported the whole gap between the restored
// positions and the crashed incarnation's as repeated (replayed_items 0, repeated_items = missing_items = 125,759).
TEST(TextCli, LostItemsAreNotCountedAsRepeated) {
  TempDir d;
  const auto out = d.path() / "out";
  auto r =
      run("run --job wordcount --text.synthetic-bytes 30000000 --text.synthetic-dir " + (d.path() / "syn").string() +
              " --runtime threads --fail.at 0.5 --fail.target 3 --quiet --out " + out.string(),
          d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream f(out / "failures.csv");
  std::string line;
  std::getline(f, line);
  const auto header = afs::testing::split_csv(line);
  const auto col = [&](const std::vector<std::string>& row, const char* name) {
    return std::stoll(row.at(afs::testing::column_of(header, name)));
  };
  int rows = 0;
  while (std::getline(f, line)) {
    const auto row = afs::testing::split_csv(line);
    if (col(row, "worker") != 3 || col(row, "recovered") != 1) continue;
    ++rows;
    EXPECT_LE(col(row, "repeated_items"), col(row, "replayed_items")) << slurp(out / "failures.csv");
  }
  EXPECT_EQ(rows, 1) << slurp(out / "failures.csv");
}

TEST(TextCli, MissingCorpusAndBadOptionsAreOneClearLine) {
  TempDir d;
  const auto missing = (d.path() / "no-such-dir").string();
  auto r = run("run --job wordcount --text.dir " + missing + " --quiet", d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  r = run("run --job grep --grep.pattern '' --quiet", d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("grep.pattern"), std::string::npos) << r.err;
  r = run("run --job grep --grep.regex --grep.pattern 'a(' --quiet", d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("regular expression"), std::string::npos) << r.err;
  r = run("run --job wordcount --text.parallelism 0 --quiet", d.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("text.parallelism"), std::string::npos) << r.err;
}

}  // namespace
