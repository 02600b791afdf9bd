// `afstream backup-server` as a real process (DESIGN sections 4, 5 and 8): RemoteStore clients write state chains
// and item records to it while it is killed with SIGKILL and restarted on the same RocksDB directory; every put that
// returned is there afterwards and the chains are those of a store that saw each put once (a put in flight at a
// kill may be applied twice, back to back: harmless, see afstream/store/remote_store.h). A put issued while the
// server is down completes once it is back. SIGTERM stops it cleanly (exit 0, the store closed). Every wait is
// bounded; children and temporary directories are always cleaned up.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/remote_store.h"
#include "afstream/store/rocksdb_store.h"
#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

using afs::testing::TempDir;

// `afstream backup-server ARGS...` as a child process whose stderr we read through a pipe.
class ServerProcess {
 public:
  static constexpr const char* kReady = "afstream backup-server: listening on ";

  explicit ServerProcess(std::vector<std::string> args) {
    args.insert(args.begin(), {AFS_BINARY, "backup-server"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      if (getppid() != parent) _exit(4);
      dup2(fds[1], STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    err_ = fds[0];
  }

  ~ServerProcess() {
    if (pid_ > 0) kill_hard();
    if (err_ >= 0) close(err_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The endpoint from the ready line, or "" (with what stderr held) if none came within `wait`.
  std::string wait_ready(milliseconds wait = milliseconds(30000)) {
    const auto until = Clock::now() + wait;
    for (;;) {
      const auto at = stderr_.find(kReady);
      if (at != std::string::npos) {
        const auto end = stderr_.find('\n', at);
        if (end != std::string::npos) return stderr_.substr(at + std::strlen(kReady), end - at - std::strlen(kReady));
      }
      if (!read_some(until)) return "";
    }
  }

  // SIGKILL and reap (bounded).
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    status_ = reap(seconds(10));
    pid_ = -1;
  }

  // SIGTERM, then the exit status (bounded; SIGKILL if it does not stop within `wait`).
  int terminate(milliseconds wait = milliseconds(10000)) {
    ::kill(pid_, SIGTERM);
    status_ = reap(wait);
    if (status_ == -1) kill_hard();
    pid_ = -1;
    read_some(Clock::now() + milliseconds(500));  // what it said on the way out
    return status_;
  }

  const std::string& stderr_text() const { return stderr_; }

 private:
  // Reads what is available on stderr, waiting until `until`; false at EOF or timeout.
  bool read_some(Clock::time_point until) {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{err_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char buf[4096];
      const ssize_t n = read(err_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      stderr_.append(buf, static_cast<std::size_t>(n));
      return true;
    }
  }

  // The wait status, or -1 if the child did not end within `wait`.
  int reap(milliseconds wait) {
    const auto until = Clock::now() + wait;
    int status = 0;
    while (Clock::now() < until) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) return status;
      if (r < 0 && errno != EINTR) return -1;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return -1;
  }

  pid_t pid_ = -1;
  int err_ = -1;
  int status_ = -1;
  std::string stderr_;
};

std::vector<std::string> rocksdb_args(const std::string& dir, const std::string& listen) {
  return {"--store", "rocksdb", "--store.path", dir, "--listen", listen};
}

// --- the workload: state chains and item records of one worker, each record tagged with its operation index ----

constexpr int kWorker = 3;

Bytes payload(std::uint32_t i, char tag) {
  Bytes b(50 + (i * 7919u) % 900);
  for (std::size_t j = 0; j < b.size(); ++j) b[j] = static_cast<std::uint8_t>(i * 31 + j);
  for (int k = 0; k < 4; ++k) b[k] = static_cast<std::uint8_t>(i >> (8 * k));
  b[4] = static_cast<std::uint8_t>(tag);
  return b;
}

// Operation i: item records on two channels, a full state every 25 operations, deltas otherwise; every state covers
// the items up to 5 operations back, so some records are trimmed and some kept.
void op(BackupStore& s, std::uint32_t i) {
  if (i % 3 == 2) {
    s.put_items(kWorker, payload(i, 'I'), {{0, i, i}, {1, i, i}});
  } else {
    const bool full = i % 25 == 0;
    SeqByChannel covered;
    if (i >= 5) covered = {{0, i - 5}, {1, i - 5}};
    s.put_state(kWorker, full, payload(i, full ? 'F' : 'D'), covered);
  }
}

// Removes records equal to the one before them (a put applied twice in a row) and returns how many it removed.
std::size_t collapse_repeats(std::vector<Bytes>& records) {
  const auto before = records.size();
  records.erase(std::unique(records.begin(), records.end()), records.end());
  return before - records.size();
}

RemoteStoreOptions patient() {
  RemoteStoreOptions o;
  o.attempt_timeout = milliseconds(200);
  o.attempt_timeout_max = milliseconds(1000);
  o.backoff = milliseconds(20);
  o.backoff_max = milliseconds(200);
  o.deadline = milliseconds(60000);
  return o;
}

// Waits until counter >= target or `wait` passed; returns whether it got there.
bool wait_for(const std::atomic<std::uint32_t>& counter, std::uint32_t target, milliseconds wait) {
  const auto until = Clock::now() + wait;
  while (counter.load() < target) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

TEST(BackupServerProcess, SigkillMidStreamLosesNoPutThatReturned) {
  TempDir dir;
  const std::string db = dir.str() + "/db";
  auto server = std::make_unique<ServerProcess>(rocksdb_args(db, "tcp://127.0.0.1:0"));
  const std::string first = server->wait_ready();
  ASSERT_FALSE(first.empty()) << server->stderr_text();
  RemoteStore store(first, patient());

  // The writer: operation after operation, counting those whose put returned.
  std::atomic<std::uint32_t> returned{0};
  std::atomic<bool> stop{false};
  std::string writer_error;
  std::thread writer([&] {
    try {
      for (std::uint32_t i = 0; !stop.load(); ++i) {
        op(store, i);
        returned.store(i + 1);
      }
    } catch (const std::exception& e) {
      writer_error = e.what();
    }
  });

  constexpr int kKills = 3;
  for (int k = 0; k < kKills && writer_error.empty(); ++k) {
    SCOPED_TRACE("kill " + std::to_string(k + 1));
    ASSERT_TRUE(wait_for(returned, returned.load() + 300, seconds(60))) << "the writer made no progress";
    server->kill_hard();  // in the middle of a stream of puts
    const std::uint32_t at_kill = returned.load();
    server.reset();
    server = std::make_unique<ServerProcess>(rocksdb_args(db, "tcp://127.0.0.1:0"));
    const std::string endpoint = server->wait_ready();
    ASSERT_FALSE(endpoint.empty()) << server->stderr_text();
    store.set_endpoint(endpoint);  // the restarted server listens on another port
    EXPECT_TRUE(wait_for(returned, at_kill + 200, seconds(60))) << "no progress after the restart";
  }
  stop = true;
  writer.join();
  ASSERT_TRUE(writer_error.empty()) << writer_error;
  const std::uint32_t total = returned.load();

  // What a store that saw every returned put exactly once holds.
  MemoryStore model;
  for (std::uint32_t i = 0; i < total; ++i) op(model, i);
  std::vector<Bytes> chain = store.state_chain(kWorker);
  std::vector<Bytes> items = store.item_records(kWorker);
  ASSERT_FALSE(chain.empty());
  EXPECT_EQ(chain.front().at(4), 'F') << "the chain does not start with a full backup";
  const std::size_t repeats = collapse_repeats(chain) + collapse_repeats(items);
  EXPECT_LE(repeats, std::size_t{kKills}) << "more puts applied twice than there were kills";
  EXPECT_EQ(chain, model.state_chain(kWorker)) << total << " puts returned";
  EXPECT_EQ(items, model.item_records(kWorker)) << total << " puts returned";
  const auto c = store.counters();
  RecordProperty("puts", static_cast<int>(total));
  RecordProperty("applied_twice", static_cast<int>(repeats));
  RecordProperty("resends", static_cast<int>(c.resends));
  EXPECT_GE(c.resends, std::uint64_t{kKills}) << "every kill should have cost at least one resend";
  EXPECT_EQ(c.timeouts, 0u);

  EXPECT_EQ(server->terminate(), 0) << server->stderr_text();
}

// A put issued while the server is down completes once the server is back at the same endpoint (no set_endpoint:
// the client's retries reconnect by themselves), over ipc:// and over tcp:// on the same port.
TEST(BackupServerProcess, PutWhileTheServerIsDownSucceedsOnceItIsBack) {
  TempDir dir;
  const std::string db = dir.str() + "/db";
  for (const bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "ipc");
    std::string listen = tcp ? "tcp://127.0.0.1:0" : "ipc://" + dir.str() + "/backup.sock";
    auto server = std::make_unique<ServerProcess>(rocksdb_args(db, listen));
    const std::string endpoint = server->wait_ready();
    ASSERT_FALSE(endpoint.empty()) << server->stderr_text();
    RemoteStore store(endpoint, patient());
    store.drop(kWorker);
    store.put_state(kWorker, true, payload(1, 'F'), {});
    server->kill_hard();
    server.reset();

    auto put = std::async(std::launch::async, [&] { store.put_state(kWorker, false, payload(2, 'D'), {}); });
    EXPECT_EQ(put.wait_for(milliseconds(700)), std::future_status::timeout) << "a put returned with no server";
    server = std::make_unique<ServerProcess>(rocksdb_args(db, endpoint));  // the same endpoint
    ASSERT_FALSE(server->wait_ready().empty()) << server->stderr_text();
    const auto status = put.wait_for(seconds(30));
    ASSERT_EQ(status, std::future_status::ready) << "the put did not complete after the restart";
    EXPECT_NO_THROW(put.get());
    EXPECT_EQ(store.state_chain(kWorker), (std::vector<Bytes>{payload(1, 'F'), payload(2, 'D')}));
    EXPECT_GE(store.counters().resends, 1u);
    EXPECT_EQ(server->terminate(), 0) << server->stderr_text();
  }
}

TEST(BackupServerProcess, SigtermStopsCleanlyAndClosesTheStore) {
  TempDir dir;
  const std::string db = dir.str() + "/db";
  ServerProcess server({"--store", "rocksdb", "--store.path", db, "--store.sync", "--listen", "tcp://127.0.0.1:0"});
  const std::string endpoint = server.wait_ready();
  ASSERT_FALSE(endpoint.empty()) << server.stderr_text();
  {
    RemoteStore store(endpoint, patient());
    store.put_state(kWorker, true, payload(1, 'F'), {});
    store.put_items(kWorker, payload(2, 'I'), {{0, 1, 1}});
    EXPECT_EQ(store.stats().state_backups, 1u);
  }
  const int status = server.terminate();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << server.stderr_text();
  EXPECT_NE(server.stderr_text().find("stopped after 3 requests"), std::string::npos) << server.stderr_text();
  // The store was closed (its lock released) and holds what was put.
  RocksDbStore reopened(db);
  EXPECT_EQ(reopened.state_chain(kWorker), (std::vector<Bytes>{payload(1, 'F')}));
  EXPECT_EQ(reopened.item_records(kWorker), (std::vector<Bytes>{payload(2, 'I')}));
}

// A backup server's store reused by a new run: a server started anew on the --store.path of a run that had failures,
// then a run with another seed. Each worker's first start drops what the store holds of it: the new run gives what
// it gives on a fresh store. Before, its source restored the earlier run's position: the run processed no items,
// fired no failure, and reported the earlier seed's heavy hitters. A server still running from that run refuses the
// new run's first incarnations (fencing), saying why.
TEST(BackupServerProcess, ANewRunDropsWhatAReusedStoreHolds) {
  TempDir dir;
  const std::string db = dir.str() + "/db";
  const auto controller = [&](const std::string& endpoint, const std::string& args, const std::string& out) {
    return afs::testing::run_program(
        AFS_BINARY,
        "controller --job heavy-hitters --items 300000 --quiet --controller.backup-server " + endpoint + " " + args +
            " --out " + (dir.path() / out).string(),
        dir.path());
  };
  // A backup server on the RocksDB store at `path`, and its endpoint ("" if it did not come up).
  struct Served {
    std::unique_ptr<ServerProcess> server;
    std::string endpoint;
  };
  const auto serve = [](const std::string& path) {
    Served s{std::make_unique<ServerProcess>(rocksdb_args(path, "tcp://127.0.0.1:0")), ""};
    s.endpoint = s.server->wait_ready();
    return s;
  };
  {
    const auto first = serve(db);
    ASSERT_FALSE(first.endpoint.empty()) << first.server->stderr_text();
    const auto r = controller(first.endpoint, "--seed 1 --fail.count 2 --fail.target all", "seed1");
    ASSERT_EQ(r.status, 0) << r.err;
    // Still serving: a new run's first incarnations are fenced off, and told why.
    const auto again = controller(first.endpoint, "--seed 2", "fenced");
    EXPECT_NE(again.status, 0);
    EXPECT_NE(again.err.find("a new run on a backup server that served an earlier run"), std::string::npos)
        << again.err;
    EXPECT_EQ(first.server->terminate(), 0) << first.server->stderr_text();
  }
  const auto anew = serve(db);  // anew, on the earlier run's store
  ASSERT_FALSE(anew.endpoint.empty()) << anew.server->stderr_text();
  const auto r = controller(anew.endpoint, "--seed 2 --fail.count 2 --fail.target all", "seed2");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto fresh = afs::testing::run_program(
      AFS_BINARY,
      "run --job heavy-hitters --items 300000 --quiet --seed 2 --fail.count 2 --fail.target all --out " +
          (dir.path() / "fresh").string(),
      dir.path());
  ASSERT_EQ(fresh.status, 0) << fresh.err;
  const auto reused = afs::testing::summary(dir.path() / "seed2"), own = afs::testing::summary(dir.path() / "fresh");
  EXPECT_EQ(reused.at("items"), "300000");
  EXPECT_EQ(reused.at("failures_fired"), "2");
  EXPECT_EQ(reused.at("true_heavy"), own.at("true_heavy"));
  EXPECT_EQ(reused.at("recall"), "1");  // (precision after failures moves with their timing: not compared)
  EXPECT_EQ(anew.server->terminate(), 0) << anew.server->stderr_text();
  // Checkpoint mode: the ledger's round and complete checkpoint are the earlier run's, which a drop leaves; the new
  // run is refused, saying so (it failed with "no state record of checkpoint N of round R").
  const auto ck = serve(dir.str() + "/db2");
  ASSERT_FALSE(ck.endpoint.empty()) << ck.server->stderr_text();
  const auto first = controller(ck.endpoint, "--seed 1 --ft.mode checkpoint --ft.checkpoint-interval 20ms", "ck1");
  ASSERT_EQ(first.status, 0) << first.err;
  const auto second = controller(ck.endpoint, "--seed 2 --ft.mode checkpoint --ft.checkpoint-interval 20ms", "ck2");
  EXPECT_NE(second.status, 0);
  EXPECT_NE(second.err.find("the backup store holds an earlier run's checkpoints"), std::string::npos) << second.err;
  EXPECT_EQ(ck.server->terminate(), 0) << ck.server->stderr_text();
}

TEST(BackupServerProcess, BadOptionsGiveOneLineAndExitStatus2) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--store", "rocksdb"}, "store.path"},
      {{"--store", "disk"}, "store: expected memory or rocksdb, got 'disk'"},
      {{"--store", "memory", "--listen", "udp://x"}, "udp://x"},
      // A wildcard was bound, though every address of a job is one the other hosts reach (runtime/README.md).
      {{"--store", "memory", "--listen", "tcp://0.0.0.0:0"}, "listen: 'tcp://0.0.0.0:0' is a wildcard address"},
      {{"--store", "memory", "--bogus"}, "--bogus"},
      {{"--store", "rocksdb", "--store.path", "/proc/afs-no/db"}, "/proc/afs-no/db"},
  };
  for (const auto& [args, needle] : cases) {
    ServerProcess p(args);
    EXPECT_EQ(p.wait_ready(seconds(30)), "") << "started with bad options";
    const int status = p.terminate();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << needle << ": status " << status;
    const std::string& err = p.stderr_text();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find("afstream: error: "), std::string::npos) << err;
    EXPECT_NE(err.find(needle), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace afs
