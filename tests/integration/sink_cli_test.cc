// Integration tests of `afstream run --job copy` on the process runtime: real worker processes (source, two
// pass-through relays, the exactly-once sink) SIGKILLed by the controller's failure plan while the sink writes its
// RocksDB table, restarted and recovered. In exact mode the table read back afterwards holds every source item's
// effect exactly once (none missing, none duplicated, contents right). Mode none against exact mode is tested on
// the threads runtime (exactly_once_sink_test.cc): on processes, where a kill lands in the sink's stream depends on
// socket buffers, and mode none with kills did not always finish (algorithms/sinks/README.md, "Known issue").
// Approximate mode with kills of the stateless relays gives the same on both runtimes. Also: the job's bad options
// are one line naming the option.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using afs::testing::run_program;
using afs::testing::slurp;
using afs::testing::summary;
using afs::testing::TempDir;

const std::string kCopy = "run --job copy --items 100000 --copy.keys 5000 --seed 4 --quiet --net.batch-items 256 ";

int data_lines(const fs::path& csv) {
  std::ifstream f(csv);
  std::string line;
  int n = -1;  // header
  while (std::getline(f, line)) ++n;
  return n;
}

void expect_exactly_once(const std::map<std::string, std::string>& s, const std::string& what) {
  EXPECT_EQ(s.at("exactly_once"), "1") << what;
  EXPECT_EQ(s.at("effects"), "100000") << what;
  EXPECT_EQ(s.at("missing"), "0") << what;
  EXPECT_EQ(s.at("duplicates"), "0") << what;
  EXPECT_EQ(s.at("wrong"), "0") << what;
  EXPECT_EQ(s.at("seq_gaps"), "0") << what;
  EXPECT_EQ(s.at("sink_items"), "100000") << what;
  EXPECT_EQ(s.at("state_matches_db"), "1") << what;
}

TEST(SinkCli, ProcessesExactModeKillsOfEveryWorkerLeaveEveryEffectOnce) {
  TempDir t("afs-sink-cli");
  const auto out = t.path() / "out";
  const auto r = run_program(AFS_BINARY,
                             kCopy +
                                 "--runtime processes --ft.mode exact --ft.exact-state-every 5000 "
                                 "--fail.at 0.15,0.35,0.55,0.75 --fail.target all --copy.db " +
                                 (t.path() / "db").string() + " --out " + out.string(),
                             t.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GE(data_lines(out / "failures.csv"), 8) << slurp(out / "failures.csv");  // 4 kills of up to 4 workers
  expect_exactly_once(summary(out), "all workers killed 4 times");
}

TEST(SinkCli, ProcessesExactModeRepeatedKillsOfTheSinkLeaveEveryEffectOnce) {
  TempDir t("afs-sink-cli");
  const auto out = t.path() / "out";
  const auto r = run_program(AFS_BINARY,
                             kCopy +
                                 "--runtime processes --ft.mode exact --ft.exact-state-every 5000 "
                                 "--fail.count 5 --fail.target 3 --copy.flush-every 700 --copy.db " +
                                 (t.path() / "db").string() + " --out " + out.string(),
                             t.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GE(data_lines(out / "failures.csv"), 4) << slurp(out / "failures.csv");
  expect_exactly_once(summary(out), "the sink killed 5 times");
}

// Approximate mode: the relays are stateless and fed by the replayable source, which sends again everything after
// a restarted relay's restored backup; the relay regenerates the same outputs under the same numbers, which the sink
// drops where it holds them. They were numbered anew (as outputs that cannot be regenerated are) and every output
// since the relay's last backup reached the sink a second time: on threads, where nothing but Theta backed up a
// stateless relay, 260,000 of 1e6 effects after one failure. Both relays killed three times, on both runtimes: no
// effect twice. What a relay had emitted before its restored backup and not yet seen acknowledged may be lost (its
// Gamma share: Theorem H(2)); on threads nothing sent is lost, on worker processes a SIGKILL drops what is still in
// the relay's ZeroMQ buffers (13-182 of 1e5 effects in about 10 of 300 runs, 2026-12-06), within Gamma + L * beta.
TEST(SinkCli, ApproxModeKillsOfTheStatelessRelaysLeaveEveryEffectOnce) {
  for (const std::string runtime : {"threads", "processes"}) {
    TempDir t("afs-sink-cli");
    const auto out = t.path() / "out";
    const auto r = run_program(AFS_BINARY,
                               kCopy + "--runtime " + runtime +
                                   " --ft.mode approx --fail.at 0.2,0.45,0.7 --fail.target 1,2 --copy.db " +
                                   (t.path() / "db").string() + " --out " + out.string(),
                               t.path());
    ASSERT_EQ(r.status, 0) << runtime << ": " << r.err;
    EXPECT_GE(data_lines(out / "failures.csv"), 4) << runtime << ": " << slurp(out / "failures.csv");
    const auto s = summary(out);
    if (runtime == "threads") {
      expect_exactly_once(s, runtime + ": both relays killed 3 times");
      continue;
    }
    // At most once: nothing twice, nothing wrong, and the missing effects are the gaps in the relays' numbering,
    // fewer than Gamma + L * beta = 1e3 + 1e3 (the defaults; beta 1).
    const std::string what = runtime + ": both relays killed 3 times";
    EXPECT_EQ(s.at("duplicates"), "0") << what;
    EXPECT_EQ(s.at("wrong"), "0") << what;
    EXPECT_EQ(s.at("missing"), s.at("seq_gaps")) << what;
    EXPECT_LT(std::stoll(s.at("missing")), 2000) << what;
    EXPECT_EQ(std::stoll(s.at("effects")) + std::stoll(s.at("missing")), 100000) << what;
    EXPECT_EQ(s.at("state_matches_db"), "1") << what;
  }
}

// A stateless relay behind the replayable source never reaches Theta (nothing moves its state), so nothing backed up
// its input position, and a restart took everything since the start again: 5 failures of 2e6 items, 5 million
// duplicates and 17-43 s instead of 1. It backs up every ft.exact-state-every (1e5) items: each relay's restart
// repeats at most that much, and nothing is lost (only the relays are killed).
TEST(SinkCli, ARestartedStatelessRelayRepeatsAtMostItsBackupInterval) {
  TempDir t("afs-sink-cli");
  const auto r = run_program(AFS_BINARY,
                             "run --job copy --items 1000000 --copy.keys 5000 --seed 4 --copy.sink count --runtime "
                             "threads --ft.mode approx --fail.at 0.5,0.95 --fail.target 1,2 --copy.db " +
                                 (t.path() / "db").string() + " --out " + (t.path() / "out").string(),
                             t.path());
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"((\d+) duplicates dropped, (\d+) items never received)")))
      << r.out;
  // 2 failures x 2 relays x 1e5 items at most (it was every item before each failure: 1.45 million).
  EXPECT_LE(std::stoll(m[1]), 400000) << r.out;
  EXPECT_EQ(m[2], "0") << r.out;
  EXPECT_EQ(summary(t.path() / "out").at("sink_items"), "1000000");
}

TEST(SinkCli, BadOptionsNameTheOption) {
  TempDir t("afs-sink-cli");
  auto r = run_program(AFS_BINARY, kCopy + "--runtime threads", t.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("copy.db"), std::string::npos) << r.err;
  r = run_program(AFS_BINARY, kCopy + "--runtime threads --copy.sink maybe --copy.db " + t.str(), t.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("copy.sink"), std::string::npos) << r.err;
  r = run_program(AFS_BINARY, kCopy + "--runtime threads --copy.flush-every 0 --copy.db " + (t.path() / "d").string(),
                  t.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("flush-every"), std::string::npos) << r.err;
}

// --copy.sync and --copy.verify are switches as the docs write them (a bare --copy.sync was refused: "the required
// argument for option '--copy.sync' is missing"), and still take a value.
TEST(SinkCli, SyncAndVerifyAreSwitches) {
  TempDir t("afs-sink-cli");
  const auto out = t.path() / "out";
  auto r = run_program(AFS_BINARY,
                       "run --job copy --items 5000 --copy.keys 500 --quiet --runtime threads --copy.sync --copy.db " +
                           (t.path() / "db").string() + " --out " + out.string(),
                       t.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(out / "config.ini").find("copy.sync = true"), std::string::npos);
  EXPECT_EQ(summary(out).at("exactly_once"), "1");
  r = run_program(AFS_BINARY,
                  "run --job copy --items 5000 --copy.keys 500 --quiet --runtime threads --copy.verify false "
                  "--copy.sync --copy.db " +
                      (t.path() / "db2").string() + " --out " + (t.path() / "out2").string(),
                  t.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(summary(t.path() / "out2").at("exactly_once"), "-1");  // not verified
}

}  // namespace
