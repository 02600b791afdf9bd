// Integration tests of jobs across hosts: `afstream controller` on one host (it starts the backup server and some
// workers there, on tcp://) and `afstream worker` processes started by hand on another, which register with it.
//
// "Hosts" are two network namespaces joined by a veth pair (10.200.0.1/24 and 10.200.0.2/24), created by the test
// (root and iproute2 needed; otherwise those tests are skipped, saying why), and, so that the feature is tested
// everywhere, 127.0.0.1 for both. The results must equal the in-process runtime's; a remote worker killed with
// SIGKILL is restarted on its host (`--worker.restart`) or started again by hand once the controller has marked it
// down, and the job completes with its accuracy. With CURVE (keys from `afstream keygen`) the job gives the same
// results, and a worker whose key is not authorized cannot join: it stops with one clear error, and the controller
// counts the refusal. Every wait is bounded; every process started here is killed (its whole process group) and the
// namespaces are deleted when a test ends, also when it fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "tests/run_output.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using afs::testing::column_of;
using afs::testing::scaled_seconds;
using afs::testing::slurp;
using afs::testing::split_csv;
using afs::testing::summary;
using afs::testing::TempDir;
using afs::testing::time_scale;
using namespace std::chrono_literals;

// The job of process_runtime_test: small enough for CI, watched keys few.
const std::vector<std::string> kJob = {"--job",      "heavy-hitters", "--hh.keys",  "20000", "--seed", "3",
                                       "--ft.mode",  "approx",        "--ft.theta", "1e4",   "--ft.l", "10",
                                       "--ft.gamma", "100",           "--quiet"};
const std::string kShortJob = "400000";   // items: a run of a second or two
const std::string kLongJob = "20000000";  // items: long enough to kill a worker in the middle (several seconds)
// The controller's heartbeat timeout in these tests: long enough that a loaded 2-core machine does not take a live
// worker for failed (at 1 s, a run beside other tests' processes replaced a worker it had wrongly marked down).
constexpr auto kHeartbeatTimeout = std::chrono::milliseconds(3000);

// Runs a shell command quietly; its exit status.
int sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A free tcp port on 127.0.0.1 (bound by ZeroMQ, then released): nothing listens there.
int free_port() {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::pull);
  s.set(zmq::sockopt::linger, 0);
  s.bind("tcp://127.0.0.1:*");
  const auto ep = s.get(zmq::sockopt::last_endpoint);
  return std::stoi(ep.substr(ep.rfind(':') + 1));
}

// The processes a test starts, each in a process group of its own (a supervisor's workers are in it too), all killed
// when the test ends.
class Processes {
 public:
  ~Processes() {
    for (pid_t p : pids_) {
      ::kill(-p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }

  // Starts argv (argv[0] looked up on PATH) with stdout and stderr to `log`.
  pid_t start(const std::vector<std::string>& argv, const fs::path& log) {
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      ::setpgid(0, 0);
      // One open file, appending, for both: stdout opened apart ("w") wrote over the first lines of stderr.
      std::freopen(log.c_str(), "a", stderr);
      ::dup2(STDERR_FILENO, STDOUT_FILENO);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    pids_.push_back(pid);
    return pid;
  }

  // Its exit status, or -1 if it did not exit within `limit` (then it is killed).
  int wait(pid_t pid, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit * time_scale();
    int status = 0;
    while (Clock::now() < end) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  std::vector<pid_t> pids_;
};

// The first match of `pattern` (its group 1) in `log`, waiting up to `limit`; "" if it never shows.
std::string wait_for(const fs::path& log, const std::string& pattern, std::chrono::milliseconds limit) {
  const std::regex re(pattern);
  const auto end = Clock::now() + limit * time_scale();
  while (Clock::now() < end) {
    std::smatch m;
    const auto text = slurp(log);
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    std::this_thread::sleep_for(20ms);
  }
  return "";
}

// The child of `parent` (a supervisor's worker), waiting up to `limit`; -1 if none shows.
pid_t child_of(pid_t parent, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit * time_scale();
  while (Clock::now() < end) {
    const auto children = "/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children";
    std::ifstream f(children);
    pid_t child = -1;
    if (f >> child && child > 0) return child;
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

// A host: how to run a program there, and its address.
struct Host {
  std::vector<std::string> exec;  // prefix, e.g. {"ip", "netns", "exec", NS}
  std::string ip;
  std::vector<std::string> run(std::vector<std::string> argv) const {
    std::vector<std::string> all = exec;
    all.insert(all.end(), argv.begin(), argv.end());
    return all;
  }
};

// Two network namespaces joined by a veth pair, named after this process (parallel runs do not collide); removed
// in the destructor. skip_reason says why they could not be made (the test is then skipped).
class NamespacePair {
 public:
  NamespacePair() {
    if (::geteuid() != 0) {
      skip_reason_ = "network namespaces need root (running as uid " + std::to_string(::geteuid()) + ")";
      return;
    }
    if (sh("command -v ip") != 0) {
      skip_reason_ = "iproute2's ip is not installed (bash .ci/install-deps installs it)";
      return;
    }
    sweep_stale();
    const std::string id = std::to_string(::getpid());
    a_ = "afs" + id + "a";
    b_ = "afs" + id + "b";
    veth_a_ = "afs" + id + "va";
    veth_b_ = "afs" + id + "vb";
    const std::vector<std::string> steps = {
        "ip netns add " + a_,
        "ip netns add " + b_,
        "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
        "ip link set " + veth_a_ + " netns " + a_,
        "ip link set " + veth_b_ + " netns " + b_,
        "ip -n " + a_ + " addr add 10.200.0.1/24 dev " + veth_a_,
        "ip -n " + b_ + " addr add 10.200.0.2/24 dev " + veth_b_,
        "ip -n " + a_ + " link set " + veth_a_ + " up",
        "ip -n " + b_ + " link set " + veth_b_ + " up",
        "ip -n " + a_ + " link set lo up",
        "ip -n " + b_ + " link set lo up",
    };
    for (const auto& step : steps) {
      const int rc = sh(step);
      if (rc != 0) {
        skip_reason_ = "cannot create network namespaces: `" + step + "` failed (exit status " + std::to_string(rc) +
                       "; no permission in this container?)";
        remove();
        return;
      }
    }
  }
  ~NamespacePair() { remove(); }

  const std::string& skip_reason() const { return skip_reason_; }
  Host a() const { return {{"ip", "netns", "exec", a_}, "10.200.0.1"}; }
  Host b() const { return {{"ip", "netns", "exec", b_}, "10.200.0.2"}; }

 private:
  void remove() {
    // Deleting a namespace destroys its end of the veth pair, and so the pair; a pair never moved is deleted here.
    if (!a_.empty()) sh("ip netns del " + a_);
    if (!b_.empty()) sh("ip netns del " + b_);
    if (!veth_a_.empty()) sh("ip link del " + veth_a_);
  }

  // Namespaces of earlier runs of this test that were killed before their teardown (their pid is gone).
  static void sweep_stale() {
    const std::regex mine("^afs([0-9]+)[ab]\\b");
    std::istringstream list([] {
      FILE* p = ::popen("ip netns list 2>/dev/null", "r");
      std::string out;
      if (p == nullptr) return out;
      char buf[256];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
      return out;
    }());
    for (std::string line; std::getline(list, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, mine)) continue;
      const pid_t owner = static_cast<pid_t>(std::stol(m[1].str()));
      if (owner != ::getpid() && ::kill(owner, 0) != 0 && errno == ESRCH) {
        sh("ip netns del " + line.substr(0, line.find(' ')));
      }
    }
  }

  std::string a_, b_, veth_a_, veth_b_, skip_reason_;
};

std::vector<std::string> job_args(const std::string& items) {
  std::vector<std::string> args = kJob;
  args.insert(args.end(), {"--items", items});
  return args;
}

// The in-process runtime's run of the job, into `out`.
void reference_run(const std::string& items, const fs::path& out, const fs::path& log) {
  std::string cmd = "timeout " + std::to_string(scaled_seconds(120)) + " " + std::string(AFS_BINARY) + " run";
  for (const auto& a : job_args(items)) cmd += " " + a;
  cmd += " --runtime threads --out " + out.string() + " >" + log.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(log);
}

// A job with its controller on host A (workers 0 and 3 started there) and workers 1 and 2 started by hand on host B.
class AcrossHosts {
 public:
  AcrossHosts(Host a, Host b, const fs::path& dir) : a_(std::move(a)), b_(std::move(b)), dir_(dir) {}

  // Starts the controller and waits (bounded) for its report endpoint. extra: more controller options.
  void start_controller(const std::string& items, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{AFS_BINARY, "controller"};
    for (const auto& a : job_args(items)) argv.push_back(a);
    argv.insert(argv.end(), {"--controller.bind", "tcp://" + a_.ip, "--controller.remote-workers", "1,2",
                             "--controller.register-timeout-ms", "30000", "--process.heartbeat-timeout-ms",
                             std::to_string(kHeartbeatTimeout.count()), "--out", (dir_ / "out").string()});
    argv.insert(argv.end(), extra.begin(), extra.end());
    controller_ = procs_.start(a_.run(argv), log("controller"));
    ASSERT_GT(controller_, 0);
    reports_ = wait_for(log("controller"), "reports on (tcp://[0-9.]+:[0-9]+)", 30s);
    ASSERT_FALSE(reports_.empty()) << "the controller did not print its endpoints: " << slurp(log("controller"));
  }

  // Starts `afstream worker` for worker `id` on host B; name: its log's name.
  pid_t start_worker(int id, const std::string& name, bool restart, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{
        AFS_BINARY, "worker",        "--worker.id",   std::to_string(id), "--worker.controller",
        reports_,   "--worker.bind", "tcp://" + b_.ip};
    if (restart) argv.push_back("--worker.restart");
    argv.insert(argv.end(), extra.begin(), extra.end());
    return procs_.start(b_.run(argv), log(name));
  }

  // Waits (bounded) for the controller to finish the job; its exit status.
  int wait_controller() { return procs_.wait(controller_, 90s); }
  // Stops a controller whose job cannot finish as a user would (SIGTERM: it stops its processes and removes its
  // directories; a SIGKILL to its process group would leave them); its exit status.
  int stop_controller() {
    ::kill(controller_, SIGTERM);
    return procs_.wait(controller_, 30s);
  }
  int wait(pid_t pid, std::chrono::milliseconds limit = 30s) { return procs_.wait(pid, limit); }

  fs::path log(const std::string& name) const { return dir_ / (name + ".log"); }
  fs::path out() const { return dir_ / "out"; }
  std::string logs() const {
    std::string s;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".log") s += "--- " + e.path().filename().string() + "\n" + slurp(e.path());
    }
    return s;
  }

 private:
  Host a_, b_;
  fs::path dir_;
  Processes procs_;  // destroyed first: every process is gone before the namespaces are
  pid_t controller_ = -1;
  std::string reports_;
};

// No failures: the same heavy hitters as the in-process runtime. One worker runs under --worker.restart, the other
// bare; a worker id the job does not have is refused with one line naming it.
void expect_same_results_as_the_thread_runtime(const Host& a, const Host& b, bool external_backup_server) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(reference_run(kShortJob, t.path() / "threads", t.path() / "threads.log"));
  AcrossHosts job(a, b, t.path());
  std::vector<std::string> extra;
  Processes server;
  if (external_backup_server) {
    // A backup server started by hand on host A, on a port of its choosing.
    const auto file = t.path() / "store.endpoint";
    server.start(a.run({AFS_BINARY, "backup-server", "--store", "memory", "--listen", "tcp://" + a.ip + ":0",
                        "--endpoint-file", file.string()}),
                 t.path() / "server.txt");
    const auto store = wait_for(file, "(tcp://[0-9.]+:[0-9]+)", 30s);
    ASSERT_FALSE(store.empty()) << slurp(t.path() / "server.txt");
    extra = {"--controller.backup-server", store};
  }
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kShortJob, extra));
  const pid_t bad = job.start_worker(9, "bad", false);
  const pid_t w1 = job.start_worker(1, "w1", true);
  const pid_t w2 = job.start_worker(2, "w2", false);
  ASSERT_EQ(job.wait(bad), 2) << job.logs();
  const auto refused = slurp(job.log("bad"));
  EXPECT_NE(refused.find("afstream: error: controller at "), std::string::npos) << refused;
  EXPECT_NE(refused.find("worker.id: no worker 9 in this job (workers are 0..3)"), std::string::npos) << refused;
  EXPECT_EQ(std::count(refused.begin(), refused.end(), '\n'), 1) << refused;

  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  EXPECT_EQ(slurp(job.out() / "heavy_hitters.csv"), slurp(t.path() / "threads" / "heavy_hitters.csv"));
  const auto threads = summary(t.path() / "threads"), hosts = summary(job.out());
  for (const char* k : {"precision", "recall", "are", "items", "failures"}) EXPECT_EQ(threads.at(k), hosts.at(k)) << k;
  EXPECT_NE(slurp(job.log("w1")).find("registered with"), std::string::npos) << job.logs();
}

// A remote worker running under --worker.restart is killed with SIGKILL: its supervisor starts it again at once, the
// new process registers, the controller takes it for the next incarnation (and the killed one for failed), and the
// job completes with the accuracy of a run without failures. dir: a directory for the run; extra: more options of
// the controller and of the workers started by hand (CURVE keys).
void expect_a_killed_remote_worker_to_be_restarted(const Host& a, const Host& b, const fs::path& dir,
                                                   const std::vector<std::string>& controller_extra = {},
                                                   const std::vector<std::string>& worker_extra = {}) {
  ASSERT_NO_FATAL_FAILURE(reference_run(kLongJob, dir / "threads", dir / "threads.log"));
  AcrossHosts job(a, b, dir);
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob, controller_extra));
  const pid_t w1 = job.start_worker(1, "w1", true, worker_extra);
  const pid_t w2 = job.start_worker(2, "w2", true, worker_extra);
  ASSERT_FALSE(wait_for(job.log("w1"), "registered with", 30s).empty()) << job.logs();
  std::this_thread::sleep_for(700ms);
  const pid_t victim = child_of(w1, 10s);
  ASSERT_GT(victim, 0) << job.logs();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);

  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  EXPECT_NE(slurp(job.log("w1")).find("as incarnation 2"), std::string::npos) << job.logs();
  const auto failures = slurp(job.out() / "failures.csv");
  EXPECT_NE(failures.find("\n1,1,"), std::string::npos) << failures;
  const auto clean = summary(dir / "threads"), killed = summary(job.out());
  EXPECT_EQ(killed.at("recall"), "1");
  EXPECT_NEAR(std::stod(killed.at("precision")), std::stod(clean.at("precision")), 0.05);
  EXPECT_EQ(killed.at("items"), clean.at("items"));
}

const Host kLoopback{{}, "127.0.0.1"};

TEST(MultiHostLoopback, ControllerAndWorkersStartedByHandGiveTheThreadRuntimesResults) {
  expect_same_results_as_the_thread_runtime(kLoopback, kLoopback, true);
}

TEST(MultiHostLoopback, KilledRemoteWorkerIsRestartedByItsSupervisor) {
  TempDir t;
  expect_a_killed_remote_worker_to_be_restarted(kLoopback, kLoopback, t.path());
}

// Without a supervisor: the controller notices the silence (kHeartbeatTimeout), marks the worker down and waits;
// a worker started again by hand registers as its next incarnation.
TEST(MultiHostLoopback, SilentRemoteWorkerIsMarkedDownAndItsNextIncarnationRegisters) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob));
  const pid_t w1 = job.start_worker(1, "w1", false);
  const pid_t w2 = job.start_worker(2, "w2", false);
  ASSERT_FALSE(wait_for(job.log("w2"), "registered with", 30s).empty()) << job.logs();
  std::this_thread::sleep_for(700ms);
  ASSERT_EQ(::kill(w2, SIGKILL), 0);
  EXPECT_EQ(job.wait(w2, 5s), 128 + SIGKILL);
  std::this_thread::sleep_for(kHeartbeatTimeout + 500ms);  // past the heartbeat timeout: marked down
  // and said so, with how to start it again (the controller waited without a word).
  const auto down = slurp(job.log("controller"));
  EXPECT_NE(down.find("remote worker 2 silent for"), std::string::npos) << down;
  EXPECT_NE(down.find("afstream worker --worker.id 2 --worker.controller tcp://"), std::string::npos) << down;
  const pid_t again = job.start_worker(2, "w2-again", false);

  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(again), 0) << job.logs();
  EXPECT_NE(slurp(job.log("w2-again")).find("as incarnation 2"), std::string::npos) << job.logs();
  // worker 2, first failure, detected after at least the heartbeat timeout of silence.
  const std::regex row("\n2,1,[^\n]*");
  std::smatch m;
  const auto failures = slurp(job.out() / "failures.csv");
  ASSERT_TRUE(std::regex_search(failures, m, row)) << failures;
  const auto header = split_csv(failures.substr(0, failures.find('\n')));
  const auto cols = split_csv(m[0].str().substr(1));
  const std::size_t at = column_of(header, "detect_ms");
  ASSERT_LT(at, cols.size()) << failures;
  EXPECT_GE(std::stod(cols[at]), static_cast<double>(kHeartbeatTimeout.count())) << "detect_ms: " << failures;
  EXPECT_EQ(summary(job.out()).at("recall"), "1");
}

// A remote worker under --worker.restart that stalls (stopped, or cut off from the controller) past the heartbeat
// timeout is presumed dead. When it comes back it must not end for good: it dies as a killed incarnation, its
// supervisor starts the next one, which registers, and the job completes (before, it stopped with an error exit,
// which its supervisor takes as final, and the controller waited for a registration until register-timeout).
TEST(MultiHostLoopback, StalledRemoteWorkerUnderASupervisorIsRestartedOnceItComesBack) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob));
  const pid_t w1 = job.start_worker(1, "w1", true);
  const pid_t w2 = job.start_worker(2, "w2", true);
  ASSERT_FALSE(wait_for(job.log("w1"), "registered with", 30s).empty()) << job.logs();
  std::this_thread::sleep_for(700ms);
  const pid_t victim = child_of(w1, 10s);
  ASSERT_GT(victim, 0) << job.logs();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  ASSERT_FALSE(wait_for(job.log("controller"), "remote worker 1 silent for", kHeartbeatTimeout + 10s).empty())
      << job.logs();
  ASSERT_EQ(::kill(victim, SIGCONT), 0);

  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  const auto text = slurp(job.log("w1"));
  EXPECT_NE(text.find("as incarnation 2"), std::string::npos) << text;
  EXPECT_EQ(text.find("replaced by incarnation"), std::string::npos) << text;
  EXPECT_NE(slurp(job.out() / "failures.csv").find("\n1,1,"), std::string::npos) << job.logs();
  EXPECT_EQ(summary(job.out()).at("recall"), "1");
}

// The controller's failure plan kills remote workers too: it cannot signal a process on another host, so the
// directory tells the incarnation it killed, which raises SIGKILL on itself; the supervisor (--worker.restart) starts
// the next one, which registers; the job completes with every failure recorded and no heavy hitter missed.
TEST(MultiHostLoopback, FailurePlanKillsRemoteWorkersThroughTheDirectory) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob, {"--fail.count", "2", "--fail.target", "1,2"}));
  const pid_t w1 = job.start_worker(1, "w1", true);
  const pid_t w2 = job.start_worker(2, "w2", true);
  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  for (const char* name : {"w1", "w2"}) {
    const auto text = slurp(job.log(name));
    EXPECT_NE(text.find("as incarnation 3"), std::string::npos) << text;         // restarted after each of the 2 kills
    EXPECT_EQ(text.find("replaced by incarnation"), std::string::npos) << text;  // killed, not replaced
  }
  const auto failures = slurp(job.out() / "failures.csv");
  for (const char* row : {"\n1,1,", "\n2,1,", "\n1,2,", "\n2,2,"}) {
    EXPECT_TRUE(std::regex_search(failures, std::regex(row))) << row << "\n" << failures;
  }
  EXPECT_EQ(summary(job.out()).at("recall"), "1");
  // The controller says so on each kill, with the command that starts the worker again: without a supervisor on its
  // host nothing else would (the job waited out register-timeout without a word).
  const auto controller = slurp(job.log("controller"));
  for (const char* w : {"1", "2"}) {
    EXPECT_NE(
        controller.find(std::string("remote worker ") + w + " killed by the failure plan; waiting for it to register"),
        std::string::npos)
        << controller;
  }
}

// A backup server started by hand that dies: the remote workers give up their store calls at their deadline and stop
// on that error, which a restart would meet again. The controller ends the run at once with the worker's error
// (before, the error was printed on the worker's host only, and the controller took the worker for silent and waited
// out register-timeout for a registration that never came).
TEST(MultiHostLoopback, ARemoteWorkersErrorEndsTheRunWithItsMessage) {
  TempDir t;
  Processes server;
  const auto file = t.path() / "store.endpoint";
  const pid_t store_pid = server.start({AFS_BINARY, "backup-server", "--store", "memory", "--listen",
                                        "tcp://127.0.0.1:0", "--endpoint-file", file.string()},
                                       t.path() / "server.txt");
  const auto store = wait_for(file, "(tcp://[0-9.]+:[0-9]+)", 30s);
  ASSERT_FALSE(store.empty()) << slurp(t.path() / "server.txt");
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob, {"--controller.backup-server", store}));
  const std::vector<std::string> quick{"--worker.store-deadline-ms", "1500"};
  job.start_worker(1, "w1", false, quick);
  job.start_worker(2, "w2", false, quick);
  ASSERT_FALSE(wait_for(job.log("w1"), "registered with", 30s).empty()) << job.logs();
  std::this_thread::sleep_for(700ms);
  ASSERT_EQ(::kill(store_pid, SIGKILL), 0);
  EXPECT_EQ(job.wait_controller(), 2) << job.logs();
  const auto controller = slurp(job.log("controller"));
  EXPECT_TRUE(
      std::regex_search(controller, std::regex("controller: remote worker [12] stopped on an error: .*" +
                                               std::regex_replace(store, std::regex("\\."), "\\.") + ".*no reply")))
      << job.logs();
}

// A remote worker that stops on an error before its worker process reports (building the job or the worker on its
// host: here a local-state directory it cannot create) ends the run at once with that error. Before, nothing was
// sent (the failed report comes from the worker process's report thread, not yet started), and the controller waited
// for its first report for process.start-timeout-ms (10 minutes), then for a registration.
TEST(MultiHostLoopback, ARemoteWorkerThatCannotStartEndsTheRunWithItsError) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob));
  job.start_worker(2, "w2", false);
  job.start_worker(1, "w1", false, {"--worker.local-state", "/proc/afs-cannot-create-this"});
  EXPECT_EQ(job.wait_controller(), 2) << job.logs();
  EXPECT_NE(slurp(job.log("controller"))
                .find("controller: remote worker 1 stopped on an error: local recovery directory "
                      "'/proc/afs-cannot-create-this'"),
            std::string::npos)
      << job.logs();
}

// A second process registering as a worker that is still running replaces it: the first learns from the directory
// that it is no longer the current incarnation and stops with one clear error; the job completes.
TEST(MultiHostLoopback, SecondProcessRegisteringAsTheSameWorkerReplacesTheFirst) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kLongJob));
  const pid_t first = job.start_worker(1, "w1", false);
  const pid_t w2 = job.start_worker(2, "w2", false);
  ASSERT_FALSE(wait_for(job.log("w1"), "registered with", 30s).empty()) << job.logs();
  std::this_thread::sleep_for(700ms);
  const pid_t second = job.start_worker(1, "w1-second", false);

  EXPECT_EQ(job.wait(first), 2) << job.logs();
  // Whichever it hears of first: the directory, or the backup server refusing the old incarnation's backups.
  const auto text = slurp(job.log("w1"));
  EXPECT_TRUE(text.find("afstream: error: worker 1: replaced by incarnation 2") != std::string::npos ||
              text.find("worker 1: incarnation 1 is fenced off: incarnation 2 has used the store since") !=
                  std::string::npos)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << "registered, then one error line: " << text;
  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(second), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  EXPECT_NE(slurp(job.out() / "failures.csv").find("\n1,1,"), std::string::npos) << job.logs();
  EXPECT_EQ(summary(job.out()).at("recall"), "1");
}

// A worker started by hand with --job and every --worker.* endpoint (not registering: "as a controller starts one")
// runs the options it was given. With the controller's job options it takes part as a registered worker does; with
// others (a sketch of another size, or another job) it used to be let in without a word: the run ended "successfully"
// with a precision of 0.0001, or, with another job, hung at 100% until killed. Its hello now says its job's options,
// and the controller ends the run with one error naming the first option that differs.
void run_with_a_hand_started_job_worker(const std::vector<std::string>& worker2_job, int expected_controller_status,
                                        const std::string& expected_error) {
  TempDir t;
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kShortJob));
  const auto directory = wait_for(job.log("controller"), "directory on (tcp://[0-9.]+:[0-9]+)", 30s);
  const auto store = wait_for(job.log("controller"), "backup server on (tcp://[0-9.]+:[0-9]+)", 30s);
  ASSERT_FALSE(directory.empty() || store.empty()) << job.logs();
  const pid_t w1 = job.start_worker(1, "w1", false);
  std::vector<std::string> extra = worker2_job;
  extra.insert(extra.end(), {"--worker.directory", directory, "--worker.store", store});
  const pid_t w2 = job.start_worker(2, "w2", false, extra);
  ASSERT_EQ(job.wait_controller(), expected_controller_status) << job.logs();
  if (expected_controller_status == 0) {
    EXPECT_EQ(job.wait(w1), 0) << job.logs();
    EXPECT_EQ(job.wait(w2), 0) << job.logs();
    EXPECT_EQ(summary(job.out()).at("recall"), "1");
    return;
  }
  const auto text = slurp(job.log("controller"));
  EXPECT_NE(text.find("afstream: error: controller: remote worker 2 runs another job than this controller's: " +
                      expected_error),
            std::string::npos)
      << text;
  // The worker is told why, at once (it said only, after worker.controller-timeout-ms, that the controller was silent).
  EXPECT_NE(job.wait(w2), 0) << job.logs();
  const auto worker_text = slurp(job.log("w2"));
  EXPECT_NE(worker_text.find(" refused it: it runs another job than the controller's: "), std::string::npos)
      << worker_text;
  EXPECT_EQ(worker_text.find("silent"), std::string::npos) << worker_text;
}

TEST(MultiHostLoopback, AWorkerStartedByHandWithTheJobsOptionsTakesPart) {
  run_with_a_hand_started_job_worker(job_args(kShortJob), 0, "");
}

TEST(MultiHostLoopback, AWorkerStartedByHandWithOtherJobOptionsEndsTheRunNamingTheOption) {
  auto other = job_args(kShortJob);
  other.insert(other.end(), {"--hh.width", "200"});
  run_with_a_hand_started_job_worker(other, 2, "hh.width = 200 there, ");
}

TEST(MultiHostLoopback, AWorkerStartedByHandWithAnotherJobEndsTheRunNamingIt) {
  run_with_a_hand_started_job_worker({"--job", "learn", "--quiet"}, 2, "job = learn there, heavy-hitters here");
}

TEST(MultiHostNamespaces, WorkersOnAnotherHostGiveTheThreadRuntimesResults) {
  NamespacePair hosts;
  if (!hosts.skip_reason().empty()) GTEST_SKIP() << hosts.skip_reason();
  expect_same_results_as_the_thread_runtime(hosts.a(), hosts.b(), false);
}

TEST(MultiHostNamespaces, KilledWorkerOnAnotherHostIsRestartedThere) {
  NamespacePair hosts;
  if (!hosts.skip_reason().empty()) GTEST_SKIP() << hosts.skip_reason();
  TempDir t;
  expect_a_killed_remote_worker_to_be_restarted(hosts.a(), hosts.b(), t.path());
}

// Bad input: one line naming the option, a non-zero status, promptly.
// Bad input: `afstream ARGS` exits 2 within 20 s with one line on stderr, "afstream: error: ...", containing every
// expected fragment.
struct BadInputCase {
  std::string args;
  std::vector<std::string> expect;
};
void expect_one_clear_error_line(const TempDir& t, const std::vector<BadInputCase>& cases) {
  for (const auto& c : cases) {
    const auto log = t.path() / "err.txt";
    const auto start = Clock::now();
    const int rc = std::system(("timeout " + std::to_string(scaled_seconds(60)) + " " + std::string(AFS_BINARY) + " " +
                                c.args + " >/dev/null 2>" + log.string())
                                   .c_str());
    const auto text = slurp(log);
    ASSERT_TRUE(WIFEXITED(rc)) << c.args;
    EXPECT_EQ(WEXITSTATUS(rc), 2) << c.args << "\n" << text;
    EXPECT_LT(Clock::now() - start, 20s) << c.args;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << c.args << "\n" << text;
    EXPECT_EQ(text.rfind("afstream: error: ", 0), 0u) << text;
    for (const auto& e : c.expect) EXPECT_NE(text.find(e), std::string::npos) << c.args << "\n" << text;
  }
}

TEST(MultiHostBadInput, OneClearLineNamingTheOption) {
  TempDir t;
  const std::string nobody = "tcp://127.0.0.1:" + std::to_string(free_port());
  const auto garbage = t.path() / "requests.txt";
  std::ofstream(garbage) << "two words\n";
  const std::string job = "--job heavy-hitters --items 1000";
  const std::vector<BadInputCase> cases = {
      {"worker --worker.id 1 --worker.controller " + nobody + " --worker.controller-timeout-ms 500",
       {"no answer from the controller at " + nobody, "worker.controller", "500 ms",
        "worker.controller is the controller's controller.bind address and PORT (PORT + 1 is its directory"}},
      {"worker --worker.id 1 --worker.controller tcp://127.0.0.1:x", {"worker.controller: 'tcp://127.0.0.1:x'"}},
      {"worker --worker.id 1 --worker.controller " + nobody + " --worker.bind tcp://10.0.0.300",
       {"worker.bind: 'tcp://10.0.0.300'", "no valid IP address"}},
      {"worker --worker.id 1 --worker.controller " + nobody + " --worker.bind tcp://0.0.0.0",
       {"worker.bind: 'tcp://0.0.0.0'", "wildcard"}},
      {"worker --worker.id 1 --worker.controller " + nobody + " --items 5", {"--items", "worker.*"}},
      {"worker " + job + " --worker.id 1 --worker.bind tcp://127.0.0.1 --worker.controller " + nobody +
           " --worker.directory " + nobody + " --worker.store ipc://",
       {"worker.store: 'ipc://'"}},
      {"worker " + job + " --worker.standby 0 --worker.id 1 --worker.bind tcp://127.0.0.1 --worker.controller " +
           nobody + " --worker.directory " + nobody + " --worker.store " + nobody,
       {"worker.standby", "--worker.id", "from its controller"}},
      {"worker " + job + " --worker.standby -2 --worker.bind tcp://127.0.0.1 --worker.controller " + nobody +
           " --worker.directory " + nobody + " --worker.store " + nobody,
       {"worker.standby: expected a slot >= 0, got -2"}},
      // A spare whose controller is gone stops by itself, naming the directory it listened to.
      {"worker " + job + " --worker.standby 3 --worker.bind tcp://127.0.0.1 --worker.controller " + nobody +
           " --worker.directory " + nobody + " --worker.store " + nobody + " --worker.controller-timeout-ms 500",
       {"standby 3", nobody, "worker.directory", "silent for 500 ms"}},
      {"run " + job + " --runtime processes --process.standby -1", {"process.standby", "got -1"}},
      {"worker " + job + " --worker.fork-server --worker.id 2 --worker.bind tcp://127.0.0.1 --worker.controller " +
           nobody + " --worker.directory " + nobody + " --worker.store " + nobody,
       {"worker.fork-server: a fork server gets --worker.id from its controller"}},
      {"worker " + job + " --worker.fork-server --worker.standby 1 --worker.bind tcp://127.0.0.1 --worker.controller " +
           nobody + " --worker.directory " + nobody + " --worker.store " + nobody,
       {"worker.fork-server: a fork server is not a standby"}},
      // A request it cannot read: one line naming it (the request arrives on its stdin).
      {"worker " + job + " --worker.fork-server --worker.bind tcp://127.0.0.1 --worker.controller " + nobody +
           " --worker.directory " + nobody + " --worker.store " + nobody + " < " + garbage.string() +
           " 3>/dev/null",  // its reply descriptor, as its controller gives it (closed: it took the controller for
                            // gone)
       {"fork server: malformed request 'two words' (expected WORKER EPOCH FAILURES)"}},
      {"worker " + job +
           " --worker.id 1 --worker.store-reads-copies --worker.bind tcp://127.0.0.1 "
           "--worker.controller " +
           nobody + " --worker.directory " + nobody + " --worker.store " + nobody,
       {"worker.store-reads-copies: needs worker.local-state"}},
      {"worker " + job + " --worker.id 1 --worker.local-state " + garbage.string() +
           " --worker.bind tcp://127.0.0.1 --worker.controller " + nobody + " --worker.directory " + nobody +
           " --worker.store " + nobody,
       {"local recovery directory '" + garbage.string() + "'", "Not a directory"}},
      {"backup-server --store memory --store.local-dir ''", {"store.local-dir: expected a directory"}},
      {"controller " + job + " --controller.bind tcp://0.0.0.0", {"controller.bind: 'tcp://0.0.0.0'", "wildcard"}},
      {"controller " + job + " --controller.bind 127.0.0.1", {"controller.bind: '127.0.0.1'"}},
      {"controller " + job + " --controller.remote-workers 1,9",
       {"controller.remote-workers: no worker 9 in this job (workers are 0..3)"}},
      {"controller " + job + " --controller.remote-workers one", {"controller.remote-workers"}},
      {"controller " + job + " --controller.backup-server tcp://127.0.0.1", {"controller.backup-server", "no port"}},
  };
  expect_one_clear_error_line(t, cases);
}

// A spare (`--worker.standby`) whose starter exits stops by itself with one clear line, well before its directory
// timeout: a later controller on the same endpoints must not be served by spares of an earlier one.
TEST(MultiHostBadInput, StandbyWhoseStarterIsGoneStops) {
  TempDir t;
  const std::string nobody = "tcp://127.0.0.1:" + std::to_string(free_port());
  const auto log = t.path() / "standby.log";
  // The shell starts the spare in the background and exits: the spare's parent is gone.
  const std::string cmd = "sh -c '" + std::string(AFS_BINARY) +
                          " worker --job heavy-hitters --items 1000 --worker.standby 0 --worker.bind tcp://127.0.0.1"
                          " --worker.controller " +
                          nobody + " --worker.directory " + nobody + " --worker.store " + nobody +
                          " --worker.controller-timeout-ms 60000 2>" + log.string() + " >/dev/null & sleep 0.2'";
  const auto start = Clock::now();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const auto said =
      wait_for(log, "afstream: error: standby 0: the process that started it \\(\\d+, its controller\\) is gone", 20s);
  EXPECT_FALSE(said.empty()) << slurp(log);
  EXPECT_LT(Clock::now() - start, 20s * time_scale());
  const auto text = slurp(log);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

// --- CURVE -------------------------------------------------------------------------------------------------------

// Keys made with `afstream keygen`, as a user would: host A (controller, backup server, workers 0 and 3), host B
// (workers 1 and 2), and an intruder; `authorized` holds A's and B's public keys.
struct Keys {
  fs::path dir, a, b, intruder, authorized;
  std::string intruder_public;
};

Keys make_keys(const fs::path& dir) {
  Keys k;
  k.dir = dir / "keys";
  k.authorized = k.dir / "authorized";
  fs::create_directories(k.dir);
  for (const char* name : {"hostA", "hostB", "intruder"}) {
    const auto out = k.dir / name;
    const std::string cmd = "timeout " + std::to_string(scaled_seconds(30)) + " " + std::string(AFS_BINARY) +
                            " keygen --out " + out.string() + " --name " + name + " >" + (out.string() + ".stdout") +
                            " 2>" + (out.string() + ".stderr");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(out.string() + ".stderr");
  }
  k.a = k.dir / "hostA" / "hostA.key";
  k.b = k.dir / "hostB" / "hostB.key";
  k.intruder = k.dir / "intruder" / "intruder.key";
  k.intruder_public = slurp(k.dir / "intruder.stdout");
  if (!k.intruder_public.empty() && k.intruder_public.back() == '\n') k.intruder_public.pop_back();
  fs::create_directories(k.authorized);
  fs::copy_file(k.dir / "hostA" / "hostA.pub", k.authorized / "hostA.pub");
  fs::copy_file(k.dir / "hostB" / "hostB.pub", k.authorized / "hostB.pub");
  return k;
}

std::vector<std::string> curve(const fs::path& secret, const Keys& k) {
  return {"--net.curve-secret", secret.string(), "--net.curve-authorized", k.authorized.string()};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(MultiHostCurve, KeygenWritesTheSecretKeyForItsOwnerOnlyAndPrintsThePublicKey) {
  TempDir t;
  const auto k = make_keys(t.path());
  struct stat st {};
  ASSERT_EQ(::stat(k.a.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((k.dir / "hostA" / "hostA.pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(k.intruder_public.size(), 40u) << k.intruder_public;
  EXPECT_NE(slurp(k.dir / "intruder" / "intruder.pub").find("public-key = \"" + k.intruder_public + "\""),
            std::string::npos);
  EXPECT_NE(slurp(k.dir / "hostA.stderr").find("hostA.key"), std::string::npos);
}

// CURVE on every tcp socket of the job (the controller's, the backup server it starts, every worker's): the same
// heavy hitters as the in-process runtime, and nothing refused. A worker without CURVE cannot register at all.
TEST(MultiHostCurve, JobWithCurveGivesTheThreadRuntimesResults) {
  TempDir t;
  const auto k = make_keys(t.path());
  ASSERT_NO_FATAL_FAILURE(reference_run(kShortJob, t.path() / "threads", t.path() / "threads.log"));
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kShortJob, curve(k.a, k)));
  // The line the controller prints for the other hosts carries its public key, quoted for the shell.
  const auto key = wait_for(job.log("controller"), "--worker.controller-key='([^']+)'", 10s);
  ASSERT_EQ(key.size(), 40u) << job.logs();
  const pid_t plain = job.start_worker(1, "plain", false, {"--worker.controller-timeout-ms", "1500"});
  const auto member = curve(k.b, k) + std::vector<std::string>{"--worker.controller-key=" + key};
  const pid_t w1 = job.start_worker(1, "w1", true, member);
  const pid_t w2 = job.start_worker(2, "w2", false, member);

  EXPECT_EQ(job.wait(plain, 20s), 2) << job.logs();
  const auto refused = slurp(job.log("plain"));
  EXPECT_NE(refused.find("no answer from the controller"), std::string::npos) << refused;
  EXPECT_NE(refused.find("does the controller require CURVE?"), std::string::npos) << refused;
  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  EXPECT_EQ(slurp(job.out() / "heavy_hitters.csv"), slurp(t.path() / "threads" / "heavy_hitters.csv"));
  const auto threads = summary(t.path() / "threads"), hosts = summary(job.out());
  for (const char* c : {"precision", "recall", "are", "items", "failures"}) EXPECT_EQ(threads.at(c), hosts.at(c)) << c;
  const auto controller = slurp(job.log("controller"));
  EXPECT_NE(controller.find("afstream backup-server: CURVE on"), std::string::npos) << controller;
  EXPECT_NE(controller.find("security: CURVE on tcp, 0 connections refused"), std::string::npos) << controller;
}

// A worker whose key is not in the controller's net.curve-authorized is refused: it stops with one clear line
// naming its key within its controller timeout, the controller logs and counts the refusal, and the job completes
// with the authorized workers. The backup server here is started by hand, with CURVE too.
TEST(MultiHostCurve, WorkerWithAnUnauthorizedKeyCannotJoin) {
  TempDir t;
  const auto k = make_keys(t.path());
  const auto a_public = k.dir / "hostA" / "hostA.pub";
  Processes server;
  const auto file = t.path() / "store.endpoint";
  server.start(std::vector<std::string>{AFS_BINARY, "backup-server", "--store", "memory", "--listen",
                                        "tcp://127.0.0.1:0", "--endpoint-file", file.string()} +
                   curve(k.a, k),
               t.path() / "server.txt");
  const auto store = wait_for(file, "(tcp://[0-9.]+:[0-9]+)", 30s);
  ASSERT_FALSE(store.empty()) << slurp(t.path() / "server.txt");
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(
      kShortJob, curve(k.a, k) + std::vector<std::string>{"--controller.backup-server", store,
                                                          "--controller.backup-server-key", a_public.string()}));

  const auto start = Clock::now();
  const pid_t intruder =
      job.start_worker(1, "intruder", true,
                       curve(k.intruder, k) + std::vector<std::string>{"--worker.controller-key", a_public.string(),
                                                                       "--worker.controller-timeout-ms", "5000"});
  EXPECT_EQ(job.wait(intruder, 20s), 2) << job.logs();
  EXPECT_LT(Clock::now() - start, 6s) << "within its controller timeout";
  const auto text = slurp(job.log("intruder"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.rfind("afstream: error: controller at tcp://127.0.0.1:", 0), 0u) << text;
  EXPECT_NE(text.find("refused worker 1: its CURVE public key " + k.intruder_public +
                      " is not in the controller's net.curve-authorized"),
            std::string::npos)
      << text;
  EXPECT_FALSE(wait_for(job.log("controller"), "refused a connection from 127.0.0.1: its key (.+) is not", 5s).empty())
      << job.logs();

  const auto member = curve(k.b, k) + std::vector<std::string>{"--worker.controller-key", a_public.string()};
  const pid_t w1 = job.start_worker(1, "w1", false, member);
  const pid_t w2 = job.start_worker(2, "w2", false, member);
  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  const auto controller = slurp(job.log("controller"));
  EXPECT_NE(controller.find("its key " + k.intruder_public + " is not in net.curve-authorized"), std::string::npos)
      << controller;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(controller, m, std::regex("security: CURVE on tcp, ([0-9]+) connections refused")))
      << controller;
  EXPECT_GE(std::stoi(m[1].str()), 1) << controller;
  const auto result = summary(job.out());
  EXPECT_EQ(result.at("items"), kShortJob);
  EXPECT_EQ(result.at("recall"), "1");
}

// A worker whose own net.curve-authorized lacks host A's key (the controller's host, where workers 0 and 3 run)
// registers, but refuses the connections of its peers there: the job cannot go on. The worker says so at once, with
// the refused key (before, it only counted the refusals, and the job stalled without a word on any host).
TEST(MultiHostCurve, WorkerRefusingItsPeersKeysSaysSo) {
  TempDir t;
  const auto k = make_keys(t.path());
  const auto a_public = k.dir / "hostA" / "hostA.pub";
  const auto only_b = t.path() / "only-b";
  fs::create_directories(only_b);
  fs::copy_file(k.dir / "hostB" / "hostB.pub", only_b / "hostB.pub");
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(kShortJob, curve(k.a, k)));
  const auto member = curve(k.b, k) + std::vector<std::string>{"--worker.controller-key", a_public.string()};
  job.start_worker(1, "w1", false,
                   std::vector<std::string>{"--net.curve-secret", k.b.string(), "--net.curve-authorized",
                                            only_b.string(), "--worker.controller-key", a_public.string()});
  job.start_worker(2, "w2", false, member);
  const auto a_key = wait_for(job.log("controller"), "CURVE on, public key '([^']+)'", 10s);
  ASSERT_EQ(a_key.size(), 40u) << job.logs();
  EXPECT_FALSE(wait_for(job.log("w1"),
                        "afstream worker: worker 1 refused a connection from 127.0.0.1: its key (.+) is not in "
                        "net.curve-authorized",
                        20s)
                   .empty())
      << job.logs();
  EXPECT_NE(slurp(job.log("w1")).find("its key " + a_key + " is not"), std::string::npos) << job.logs();
  EXPECT_EQ(job.stop_controller(), 128 + SIGTERM) << job.logs();
}

// With CURVE, a killed remote worker's next incarnation serves with a new keypair; its peers learn the new key from
// the directory, reconnect, resend, and the job completes with the accuracy of a run without failures.
TEST(MultiHostCurve, KilledRemoteWorkerIsRestartedWithANewIncarnationKey) {
  TempDir t;
  const auto k = make_keys(t.path());
  expect_a_killed_remote_worker_to_be_restarted(
      kLoopback, kLoopback, t.path(), curve(k.a, k),
      curve(k.b, k) + std::vector<std::string>{"--worker.controller-key", (k.dir / "hostA" / "hostA.pub").string()});
}

// Workers 0 and 3 on the controller's host (tcp, CURVE) killed twice and restarted as `restart` says; the remote
// workers reconnect to each new incarnation and the job completes with the failure-free accuracy.
// With `restart` the option that restarts the local workers (process.standby or process.fork-server) and the line
// of the controller's output that counts its restarts (first group: how many it did).
void expect_local_restarts_with_curve(const std::vector<std::string>& restart, const std::string& counted) {
  TempDir t;
  const auto k = make_keys(t.path());
  ASSERT_NO_FATAL_FAILURE(reference_run(kLongJob, t.path() / "threads", t.path() / "threads.log"));
  AcrossHosts job(kLoopback, kLoopback, t.path());
  ASSERT_NO_FATAL_FAILURE(job.start_controller(
      kLongJob, curve(k.a, k) + restart + std::vector<std::string>{"--fail.count", "2", "--fail.target", "0,3"}));
  const auto member =
      curve(k.b, k) + std::vector<std::string>{"--worker.controller-key", (k.dir / "hostA" / "hostA.pub").string()};
  const pid_t w1 = job.start_worker(1, "w1", true, member);
  const pid_t w2 = job.start_worker(2, "w2", true, member);
  ASSERT_EQ(job.wait_controller(), 0) << job.logs();
  EXPECT_EQ(job.wait(w1), 0) << job.logs();
  EXPECT_EQ(job.wait(w2), 0) << job.logs();
  const auto controller = slurp(job.log("controller"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(controller, m, std::regex(counted))) << job.logs();
  EXPECT_GE(std::stoi(m[1]), 1) << job.logs();
  EXPECT_NE(controller.find("security: CURVE on tcp, 0 connections refused"), std::string::npos) << controller;
  const auto failures = slurp(job.out() / "failures.csv");
  for (const char* row : {"\n0,1,", "\n3,1,", "\n0,2,", "\n3,2,"}) {
    EXPECT_NE(failures.find(row), std::string::npos) << row << "\n" << failures;
  }
  const auto clean = summary(t.path() / "threads"), killed = summary(job.out());
  EXPECT_EQ(killed.at("recall"), "1");
  EXPECT_NEAR(std::stod(killed.at("precision")), std::stod(clean.at("precision")), 0.05);
}

// The controller's spares (process.standby) on tcp with CURVE: they reach the controller with its key, and a spare
// that takes over a killed local worker serves with a keypair of its incarnation like a restarted process; the
// remote workers reconnect to it and the job completes with the failure-free accuracy.
TEST(MultiHostCurve, StandbyProcessesTakeOverLocalWorkersWithCurve) {
  expect_local_restarts_with_curve({"--process.standby", "2"}, R"(standby: \d+ spare processes started, (\d+) of)");
}

// The same with the controller's fork server (process.fork-server): the processes it forks are CURVE clients and
// servers of their own incarnation too.
TEST(MultiHostCurve, ForkServerRestartsLocalWorkersWithCurve) {
  expect_local_restarts_with_curve({"--process.fork-server"}, R"(fork server: (\d+) of \d+ failed workers)");
}

// Bad CURVE options: one line naming the option (and the file), a non-zero status, promptly.
TEST(MultiHostCurve, BadKeyOptionsAreOneClearLineNamingTheOption) {
  TempDir t;
  const auto k = make_keys(t.path());
  const std::string nobody = "tcp://127.0.0.1:" + std::to_string(free_port());
  const std::string job = "--job heavy-hitters --items 1000";
  const std::string keys = " --net.curve-secret " + k.a.string() + " --net.curve-authorized " + k.authorized.string();
  const auto a_public = (k.dir / "hostA" / "hostA.pub").string();
  const auto open_key = t.path() / "open.key";
  fs::copy_file(k.a, open_key);
  fs::permissions(open_key, fs::perms::others_read, fs::perm_options::add);
  const std::vector<BadInputCase> cases = {
      {"controller " + job + " --net.curve-secret " + k.a.string(), {"net.curve-authorized: missing"}},
      {"controller " + job + " --net.curve-secret " + a_public + " --net.curve-authorized " + k.authorized.string(),
       {"net.curve-secret: '" + a_public + "' has no secret-key"}},
      {"controller " + job + " --net.curve-secret " + open_key.string() + " --net.curve-authorized " +
           k.authorized.string(),
       {"net.curve-secret: '" + open_key.string() + "'", "chmod 600"}},
      {"controller " + job + keys + " --controller.backup-server " + nobody,
       {"controller.backup-server-key: needed with net.curve-secret"}},
      {"worker --worker.id 1 --worker.controller " + nobody + keys, {"worker.controller-key: missing"}},
      // A spare checks the servers' keys before it waits for its takeover.
      {"worker " + job + " --worker.standby 0 --worker.bind tcp://127.0.0.1 --worker.controller " + nobody +
           " --worker.directory " + nobody + " --worker.store " + nobody + keys,
       {"worker.controller-key: needed with net.curve-secret"}},
      {"worker --worker.id 1 --worker.controller " + nobody + keys + " --worker.controller-key nonsense",
       {"worker.controller-key: 'nonsense' is neither a public key file"}},
      {"worker --worker.id 1 --worker.controller " + nobody + " --worker.controller-key " + a_public,
       {"worker.controller-key: only with CURVE"}},
      {"backup-server --store memory --net.curve-secret " + (t.path() / "missing.key").string() +
           " --net.curve-authorized " + k.authorized.string(),
       {"net.curve-secret: '" + (t.path() / "missing.key").string() + "' cannot be read: No such file or directory"}},
      {"backup-server --store memory --net.curve-secret " + k.a.string() + " --net.curve-authorized " +
           (t.path() / "none").string(),
       {"net.curve-authorized: '" + (t.path() / "none").string() + "' cannot be read"}},
      {"keygen", {"keygen: missing --out DIR"}},
  };
  expect_one_clear_error_line(t, cases);
}

}  // namespace
