// The controller of the process runtime (process_cluster.h).
#include "afstream/runtime/process_cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/core/temp_root.h"
#include "afstream/net/codec.h"
#include "afstream/net/endpoint.h"
#include "afstream/net/handoff.h"
#include "afstream/runtime/failure_plan.h"
#include "afstream/runtime/fork_server.h"
#include "afstream/runtime/spawn.h"
#include "afstream/runtime/worker.h"
#include "afstream/state/snapshot.h"

namespace afs {

namespace {

using Clock = std::chrono::steady_clock;

// The first option in which two job configurations ("key = value" lines) differ, the job itself first, as
// "KEY = A there, B here" (or "KEY: not set there, B here").
std::string job_config_difference(const std::string& there, const std::string& here) {
  auto parse = [](const std::string& text) {
    std::map<std::string, std::string> m;
    std::size_t at = 0;
    while (at < text.size()) {
      auto end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const auto line = text.substr(at, end - at);
      at = end + 1;
      const auto eq = line.find(" = ");
      if (eq == std::string::npos) continue;
      auto& value = m[line.substr(0, eq)];  // a list option: one line an element
      value += (value.empty() ? "" : ",") + line.substr(eq + 3);
    }
    return m;
  };
  const auto a = parse(there), b = parse(here);
  if (a.count("job") && b.count("job") && a.at("job") != b.at("job")) {
    return "job = " + a.at("job") + " there, " + b.at("job") + " here";
  }
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    if (it == a.end()) return k + ": not set there, " + v + " here";
    if (it->second != v) return k + " = " + it->second + " there, " + v + " here";
  }
  for (const auto& [k, v] : a) {
    if (!b.count(k)) return k + " = " + v + " there, not set here";
  }
  return "its options differ";
}

// Bytes in the regular files under dir (0 if it cannot be read). Files a running RocksDB deletes between listing
// and measuring are skipped.
std::uint64_t directory_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) || fec) continue;
    const auto size = it->file_size(fec);
    if (!fec) total += size;
  }
  return total;
}

template <typename T>
std::string join(const std::vector<T>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// Binds `socket` to `endpoint` and returns what it bound (tcp: with the port the operating system chose).
std::string bind_socket(zmq::socket_t& socket, const std::string& endpoint, const char* what) {
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw RuntimeError(std::string("controller: cannot bind its ") + what + " socket on " + endpoint + ": " + e.what());
  }
  return socket.get(zmq::sockopt::last_endpoint);
}

// Every process of a run holds sockets for each worker it talks to (the controller and the backup server: all of
// them), and ZeroMQ and RocksDB files besides. At 20 + 3 descriptors a worker or below no run works (4 workers failed
// at a limit of 32 and ran at 40; 13 failed at 56 and ran at 60), and what fails instead is a libzmq abort, a bind
// error or a backup server that stops answering, midway: refused before anything starts.
void check_open_file_limit(int workers) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return;
  const auto floor = static_cast<rlim_t>(20 + 3 * workers);
  if (files.rlim_cur <= floor) {
    throw ConfigError("this process may open " + std::to_string(files.rlim_cur) + " files (ulimit -n), and a run of " +
                      std::to_string(workers) + " workers on processes needs more than " + std::to_string(floor) +
                      " in the controller, the backup server and each worker: raise the limit");
  }
}

// The run's own directory (its ipc:// sockets, the durable store, the store's endpoint file), under TMPDIR when set
// (as mkdtemp(1)), else /tmp. A socket's path has room for sizeof(sun_path) - 1 bytes (107 on Linux), so TMPDIR must
// leave room for the longest socket name of a job with `workers` workers.
std::string make_run_directory(int workers) {
  const TempRoot root = temp_root();
  const std::string& base = root.path;
  std::string path = base + (base == "/" ? "" : "/") + "afs-XXXXXX";
  const std::size_t longest_socket =
      path.size() + std::string("/w-e4294967295-acks").size() + std::to_string(std::max(workers - 1, 0)).size();
  constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (longest_socket > kMaxSocketPath) {
    throw ConfigError("TMPDIR=" + base + ": too long for the process runtime's local sockets, which live under it (" +
                      std::to_string(longest_socket) + " bytes for the longest, at most " +
                      std::to_string(kMaxSocketPath) + "); set a TMPDIR at most " +
                      std::to_string(base.size() - (longest_socket - kMaxSocketPath)) + " bytes long");
  }
  if (::mkdtemp(path.data()) == nullptr) {
    throw RuntimeError("cannot create the run's directory in " + base + (root.from_env ? " (TMPDIR)" : "") + ": " +
                       std::strerror(errno));
  }
  return path;
}

}  // namespace

struct ProcessCluster::Impl {
  struct WorkerState {
    pid_t pid = -1;
    std::uint32_t epoch = 0;
    bool up = false;
    bool finished = false;  // reported finished for good
    bool exited = false;    // and its process exited normally
    // Its process exited with status 0 before its finished report was read: the report is on its way (a worker
    // exits 0 only after sending it, and its socket lingers to deliver it). Since when it has been awaited.
    std::optional<Clock::time_point> exited_clean_at;
    std::vector<std::uint64_t> failures;
    net::WorkerStatusMsg status;  // latest report of the current incarnation
    net::WorkerStatusMsg before;  // totals of earlier incarnations (counters restart with each process)
    Clock::time_point last_report;
    bool reported = false;  // the current incarnation has sent a report (before that: options.start_timeout)
    std::optional<FailureRecord> pending;  // killed, not yet reported recovered
    bool said_hello = false;               // the pending one's incarnation is up (recovery_ms is set)
    double hello_ms = 0;                   // its process start to its hello, as it measured it
    // The record its last completed recovery added to the result (index), which a later report of that incarnation
    // still completes with caught_up_ms: a recovery is complete at its first item from upstream, and behind a
    // replayable source that comes before it is back where the crashed one was.
    std::optional<std::size_t> completed;
    Clock::time_point killed_at;
    std::optional<Clock::time_point> signalled_at;  // SIGKILL sent (signal_kill), not yet reaped by fail()
    std::vector<std::uint8_t> final_state;
    std::string data_endpoint, ack_endpoint;  // as the current incarnation announced them in its hello
    std::string curve_key;                    // CURVE: the key its sockets serve with, as announced
    // Crashes (a signal of a program fault: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) of incarnations that lived less
    // than kCrashLoopLife, in a row, and the last one's signal: a restart that meets the same input crashes again.
    int quick_crashes = 0;
    int crash_signal = 0;
    Clock::time_point started_at;
    // Remote workers (started by hand, registering): whether a process holds the current incarnation, which
    // registration (routing id; empty if it came with --job and said hello) it was given to, and since when the
    // next one has been awaited.
    bool remote = false;
    bool killed = false;  // the failure plan killed the incarnation before the current one (told to remote ones)
    bool assigned = false;
    std::string assigned_to;
    Clock::time_point awaiting_since;
  };

  const Topology& topology;
  const Registry& registry;
  RunConfig config;
  ProcessClusterOptions options;
  std::string dir;
  std::string local_dir;  // local recovery: the workers' own copies of their chains ("": off)
  std::atomic<pid_t> server{-1};
  std::atomic<int> server_restarts{0};
  std::vector<WorkerState> workers;
  std::map<int, std::unique_ptr<Operator>> finals;
  ControllerEndpoints bound;           // where the controller, its directory and the backup server are
  std::optional<net::TcpAddress> tcp;  // options.bind, parsed (tcp mode)
  std::string store_listen;            // what the backup server it starts listens on
  InputProgress input_progress;

  // Spare processes (options.standby): started, and ready once their standby report came (routing id known).
  struct Standby {
    int slot = 0;
    pid_t pid = -1;
    std::string routing_id;  // empty until ready
    // The routing id its report must come with (registration.h, await_assignment): a report from any other
    // process (say, a spare left over from an earlier controller on the same port) is not this spare.
    std::string expected_id() const { return "s" + std::to_string(slot) + "-p" + std::to_string(pid); }
  };
  std::vector<Standby> standbys;
  int next_standby_slot = 0;
  std::atomic<int> standby_takeovers{0};
  std::atomic<int> standbys_started{0};
  std::vector<pid_t> to_reap;  // killed workers whose standby took over, reaped after the event (reap_killed)
  ForkServer forks;            // options.fork_server
  std::atomic<int> forked_restarts{0};
  // Sends an assignment to a ready standby (set by run(): the report socket).
  std::function<void(const std::string& routing_id, const net::AssignmentMsg&)> send_assignment;

  // CURVE: on tcp:// only.
  bool curve() const { return tcp && options.curve; }

  Impl(const Topology& t, const Registry& r, RunConfig c, ProcessClusterOptions o)
      : topology(t), registry(r), config(std::move(c)), options(std::move(o)), input_progress(t) {}

  // How often workers report their status. With failure points in items the plan fires on the reported input
  // positions, so they report at least every kPlanStatusEvery (a 100 ms heartbeat let a short job process a fifth
  // of its input between two reports, and points that far apart fired together).
  static constexpr std::chrono::milliseconds kPlanStatusEvery{5};
  std::chrono::milliseconds status_every() const {
    const bool item_points =
        std::any_of(config.failures.begin(), config.failures.end(), [](const FailureEvent& e) { return !e.at_time; });
    return item_points ? std::min(options.heartbeat, kPlanStatusEvery) : options.heartbeat;
  }

  std::string endpoint(const char* name) const { return ipc_prefix() + name; }
  // The local workers' directory bind (--worker.prefix): their sockets are files under the run's directory.
  std::string ipc_prefix() const { return "ipc://" + dir + "/"; }

  // `afstream worker` with the job's options, where to bind and whom to reach, and `own` (which worker, or standby).
  std::vector<std::string> worker_process_args(const std::vector<std::string>& own) const {
    std::vector<std::string> args{"worker"};
    args.insert(args.end(), options.worker_args.begin(), options.worker_args.end());
    args.insert(args.end(), own.begin(), own.end());
    const std::vector<std::string> where{tcp ? "--worker.bind" : "--worker.prefix",
                                         tcp ? "tcp://" + tcp->host : ipc_prefix(),
                                         "--worker.controller",
                                         bound.reports,
                                         "--worker.directory",
                                         bound.directory,
                                         "--worker.store",
                                         bound.store,
                                         "--worker.heartbeat-ms",
                                         std::to_string(status_every().count())};
    args.insert(args.end(), where.begin(), where.end());
    if (!local_dir.empty()) {
      args.insert(args.end(), {"--worker.local-state", local_dir});
      // The server this controller starts reads the puts from the copies (start_server); one started by hand does not.
      if (options.backup_server.empty()) args.push_back("--worker.store-reads-copies");
    }
    if (curve()) {
      args.insert(args.end(), options.curve_args.begin(), options.curve_args.end());
      // --key=value: a Z85 key may start with '-'.
      args.insert(args.end(), {"--worker.controller-key=" + bound.key, "--worker.store-key=" + bound.store_key});
    }
    return args;
  }

  void start_worker(int w) {
    auto& s = workers[static_cast<std::size_t>(w)];
    std::vector<std::string> own{"--worker.id", std::to_string(w), "--worker.epoch", std::to_string(s.epoch)};
    if (!s.failures.empty()) {
      own.push_back("--worker.failures");
      own.push_back(join(s.failures));
    }
    started(w, spawn(options.program, worker_process_args(own)));
  }

  // Local worker w's next incarnation runs as process `pid` (started, forked, or a spare's): awaited from now.
  void started(int w, pid_t pid) {
    auto& s = workers[static_cast<std::size_t>(w)];
    s.pid = pid;
    s.up = false;
    s.reported = false;
    s.last_report = Clock::now();
    s.started_at = s.last_report;
  }

  // A worker that crashed (not killed by the plan) kCrashLoopCount times in a row, each incarnation within
  // kCrashLoopLife of its start, by the same program-fault signal, is not restarted again: the run ends with an
  // error naming it. Restarting it met the same input and crashed again without end (a grep worker's stack overflow
  // on a long line: 3,365 failures in 60 s). Other deaths (SIGKILL: the plan's, the OOM killer's, a user's) are
  // failures to recover from as always.
  static constexpr int kCrashLoopCount = 5;
  static constexpr auto kCrashLoopLife = std::chrono::seconds(30);
  void note_death(int w, int status) {
    auto& s = workers[static_cast<std::size_t>(w)];
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    const bool fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
    if (!fault || Clock::now() - s.started_at >= kCrashLoopLife || sig != s.crash_signal) s.quick_crashes = 0;
    s.crash_signal = fault ? sig : 0;
    if (!fault) return;
    if (++s.quick_crashes >= kCrashLoopCount) {
      throw RuntimeError("controller: worker " + std::to_string(w) + " crashed " + std::to_string(s.quick_crashes) +
                         " times in a row (" + ::strsignal(sig) + ", signal " + std::to_string(sig) +
                         "), each time soon after its restart: a restart meets the same input and crashes again, so "
                         "the run stops here");
    }
  }

  // Some worker is started here, and every one of them is up (has said hello: its state restored, the job
  // started): a spare or the fork server started now does not compete for the cores with a start or a restore.
  bool local_workers_up() const {
    const auto local = [](const WorkerState& s) { return !s.remote; };
    return std::any_of(workers.begin(), workers.end(), local) &&
           std::none_of(workers.begin(), workers.end(),
                        [](const WorkerState& s) { return !s.remote && !s.finished && !s.up; });
  }

  void start_standby() {
    Standby sb;
    sb.slot = next_standby_slot++;
    sb.pid = spawn(options.program, worker_process_args({"--worker.standby", std::to_string(sb.slot)}));
    standbys.push_back(std::move(sb));
    ++standbys_started;
  }

  // Hands local worker w's next incarnation to a ready standby, if there is one (spares that have exited since the
  // last look are dropped first: an assignment sent to one would be lost).
  bool take_over(int w) {
    check_standbys();
    auto it = std::find_if(standbys.begin(), standbys.end(), [](const Standby& sb) { return !sb.routing_id.empty(); });
    if (it == standbys.end() || !send_assignment) return false;
    auto& s = workers[static_cast<std::size_t>(w)];
    net::AssignmentMsg a;
    a.worker = static_cast<std::uint32_t>(w);
    a.epoch = s.epoch;
    a.failures = s.failures;
    send_assignment(it->routing_id, a);
    started(w, it->pid);
    standbys.erase(it);
    ++standby_takeovers;
    return true;
  }

  // Starts local worker w's next incarnation through the fork server, if it runs.
  bool fork_worker(int w) {
    // Not yet ready (building the job): this restart starts the program; the server is asked once it is.
    if (!forks.running() || !forks.ready()) return false;
    auto& s = workers[static_cast<std::size_t>(w)];
    // Well within the heartbeat timeout: the loop reads no reports meanwhile.
    const auto wait = std::min(std::chrono::milliseconds(500), options.heartbeat_timeout / 4);
    const pid_t pid = forks.fork_worker({w, s.epoch, s.failures}, wait);
    if (pid <= 0) {
      // The server is gone, silent or confused (it has been killed): the program starts the restarts from now on.
      // A slow server may have forked this incarnation all the same: the next one is used instead, so that the
      // stray (adopted, reaped by reap_strays) is fenced off and stops once the directory shows the newer one.
      ++s.epoch;
      return false;
    }
    started(w, pid);
    ++forked_restarts;
    return true;
  }

  // The fork server started, once every local worker is up (as a spare: not competing with the workers' start), if
  // the options want one. Started once: one that is gone leaves the restarts to the program.
  bool fork_server_started = false;
  void maybe_start_fork_server() {
    if (!options.fork_server || fork_server_started || !local_workers_up()) return;
    fork_server_started = true;
    forks.start(options.program, worker_process_args({"--worker.fork-server"}));
  }

  // Children this controller does not know of: processes a fork server forked and could not report (a slow or
  // killed one), or its intermediate child orphaned by its death. Adopted as a child subreaper, reaped here. The
  // known ones (workers, spares, the backup server, the fork server, killed ones awaiting reaping) are reaped where
  // they are watched; an exited known one is left for them (and hides the others until then: at most a loop).
  void reap_strays() {
    if (!fork_server_started) return;
    for (;;) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
      const pid_t pid = info.si_pid;
      const bool known =
          pid == server.load() || pid == forks.pid() ||
          std::any_of(workers.begin(), workers.end(), [&](const WorkerState& s) { return s.pid == pid; }) ||
          std::any_of(standbys.begin(), standbys.end(), [&](const Standby& sb) { return sb.pid == pid; }) ||
          std::find(to_reap.begin(), to_reap.end(), pid) != to_reap.end();
      if (known) return;
      ::waitpid(pid, nullptr, 0);
    }
  }

  // Whether to start a spare now: fewer than options.standby, and the local workers up (spares serve only those).
  bool want_standby() const { return static_cast<int>(standbys.size()) < options.standby && local_workers_up(); }

  // Standbys that exited: one that stopped on an error (bad options, a controller it cannot reach) ends the run, as
  // a worker's error does; one killed from outside is dropped (and replaced).
  void check_standbys() {
    for (auto it = standbys.begin(); it != standbys.end();) {
      int status = 0;
      if (::waitpid(it->pid, &status, WNOHANG) != it->pid) {
        ++it;
        continue;
      }
      const int slot = it->slot;
      it = standbys.erase(it);  // reaped: never signalled again
      if (WIFEXITED(status)) {
        throw RuntimeError("controller: standby process " + std::to_string(slot) + " stopped with exit status " +
                           std::to_string(WEXITSTATUS(status)) + " (its error is in the log above)");
      }
    }
  }

  void reap_killed() {
    for (const pid_t pid : std::exchange(to_reap, {})) ::waitpid(pid, nullptr, 0);
  }

  // Stops every process of the run still alive and removes the private directories. Idempotent: at the end of a
  // run, and again by the destructor (after an error, or a signal that stopped the run).
  void stop_all() {
    stop_standbys();
    forks.stop();
    reap_killed();
    for (auto& s : workers) {
      if (s.pid > 0) {
        ::kill(s.pid, SIGKILL);
        ::waitpid(s.pid, nullptr, 0);
        s.pid = -1;
      }
    }
    if (server > 0) {
      ::kill(server, SIGKILL);
      ::waitpid(server, nullptr, 0);
      server = -1;
    }
    for (auto* d : {&local_dir, &dir}) {
      std::error_code ec;
      if (!d->empty()) std::filesystem::remove_all(*d, ec);
      d->clear();
    }
  }

  void stop_standbys() {
    for (const auto& sb : standbys) ::kill(sb.pid, SIGKILL);
    for (const auto& sb : standbys) ::waitpid(sb.pid, nullptr, 0);
    standbys.clear();
  }

  net::DirectoryMsg directory() const {
    net::DirectoryMsg d;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      const auto& s = workers[w];
      d.peers.push_back({static_cast<std::uint32_t>(w), s.epoch, s.up, s.finished, s.data_endpoint, s.ack_endpoint,
                         s.curve_key, s.killed});
    }
    return d;
  }

  static void add(net::WorkerStatusMsg& a, const net::WorkerStatusMsg& b) {
    a.items_in += b.items_in;
    a.items_out += b.items_out;
    a.state_backups += b.state_backups;
    a.item_backups += b.item_backups;
    a.backup_bytes += b.backup_bytes;
    a.duplicates_dropped += b.duplicates_dropped;
    a.trees_replayed += b.trees_replayed;
    if (a.latency.size() < b.latency.size()) a.latency.resize(b.latency.size());
    for (std::size_t i = 0; i < b.latency.size(); ++i) a.latency[i] += b.latency[i];
    a.gaps += b.gaps;
    a.outputs_after_end += b.outputs_after_end;
    a.bad_messages += b.bad_messages;
    a.unauthorized_connections += b.unauthorized_connections;
    a.checkpoints += b.checkpoints;
    a.checkpoints_abandoned += b.checkpoints_abandoned;
    a.checkpoint_ms += b.checkpoint_ms;
    a.checkpoint_ms_max = std::max(a.checkpoint_ms_max, b.checkpoint_ms_max);
    a.checkpoint_bytes += b.checkpoint_bytes;
    a.alignments += b.alignments;
    a.alignment_ms += b.alignment_ms;
    a.alignment_ms_max = std::max(a.alignment_ms_max, b.alignment_ms_max);
    a.items_held += b.items_held;
  }

  net::WorkerStatusMsg totals() const {
    net::WorkerStatusMsg t;
    for (const auto& s : workers) {
      add(t, s.before);
      add(t, s.status);
      t.unbacked += s.status.unbacked;
      t.unacked += s.status.unacked;
      t.divergence += s.status.divergence;
    }
    return t;
  }

  std::uint64_t source_items() const {
    std::uint64_t n = 0;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      if (topology.stages()[topology.workers()[w].stage].is_source) {
        n += std::max(workers[w].status.source_offset, workers[w].before.source_offset);
      }
    }
    return n;
  }

  // Input items processed so far (InputProgress): the failure plan's measure.
  std::uint64_t input_items() const {
    return input_progress(source_items(), [&](int w) {
      const auto& s = workers[static_cast<std::size_t>(w)];
      return std::max(s.before.input_position, s.status.input_position);
    });
  }

  // The record of a failure whose next incarnation did not report a completed recovery (it failed too, or the run
  // ended first): a real failure, with the thresholds that were in force (computed as the worker computes them)
  // and the recovery measurements it reported before failing again (restore_ms, replayed_items: sent with its hello
  // and statuses), the others unknown (FailureRecord::recovered).
  FailureRecord unrecovered(int w) const {
    const auto& s = workers[static_cast<std::size_t>(w)];
    FailureRecord rec = *s.pending;
    rec.recovered = false;
    rec.missing_items = -1;
    rec.first_item_ms = -1;
    const auto& ref = topology.workers()[w];
    const auto& stage = topology.stages()[ref.stage];
    std::unique_ptr<Operator> op;
    if (!stage.is_source) {
      op = registry.make_operator(stage.kind, stage.params, {ref.index, stage.parallelism});
      rec.alpha = op->alpha();
    }
    const std::vector<std::uint64_t> history(s.failures.begin(), s.failures.begin() + rec.failure_count);
    const auto at = thresholds_at_failures(topology, config, w, op.get(), history);
    rec.theta = at.back().theta;
    rec.l = at.back().l;
    rec.gamma = at.back().gamma;
    return rec;
  }

  // Sends SIGKILL to a local worker's process; fail() reaps it. Lets a failure of several workers kill them all
  // before reaping any.
  void signal_kill(int w) {
    auto& s = workers[static_cast<std::size_t>(w)];
    if (s.pid <= 0 || s.signalled_at) return;
    ::kill(s.pid, SIGKILL);
    s.signalled_at = Clock::now();
  }

  // Removes the ipc:// socket files that incarnation `epoch` of local worker w bound (PeerDirectory::bind_endpoint's
  // names, under the run's directory). A process killed by SIGKILL leaves them behind and each restart binds new
  // ones: the run's directory gained two files per failed worker until the run ended (1,415 after 140 failures of
  // 5 workers). The replaced incarnation is fenced off; its successor binds under its own epoch and announces that.
  void remove_sockets(int w, std::uint32_t epoch) const {
    if (tcp) return;  // tcp:// endpoints leave no files
    for (const bool acks : {false, true}) {
      const std::string path = PeerDirectory::bind_endpoint(ipc_prefix(), w, epoch, acks).substr(6);  // "ipc://"
      ::unlink(path.c_str());
    }
  }

  // A worker failed (killed by the plan, exited, or silent): reap it and start its next incarnation (a remote one:
  // await its registration).
  void fail(int w, std::uint64_t at_items, bool kill_it, RunResult& result, double detect_ms = 0) {
    auto& s = workers[static_cast<std::size_t>(w)];
    if (s.pending) result.failures.push_back(unrecovered(w));  // failed again before it reported its recovery
    if (kill_it) {
      signal_kill(w);
      s.quick_crashes = 0;  // a planned kill or a silence between two crashes: they are not in a row
    }
    // Recovery is timed from the kill (its SIGKILL), the process's teardown included.
    const auto signalled = std::exchange(s.signalled_at, std::nullopt);
    const pid_t old = std::exchange(s.pid, -1);
    FailureRecord r;
    r.worker = w;
    r.failure_count = static_cast<int>(s.failures.size()) + 1;
    r.at_items = at_items;
    r.detect_ms = detect_ms;
    r.recovery_ms = -1;  // until its next incarnation's hello
    s.pending = r;
    s.said_hello = false;
    s.killed_at = signalled ? *signalled : Clock::now();
    // Where it failed: the items it had processed over all its incarnations, as on threads (whose counters outlive
    // an incarnation); the reset policy replays these positions, and a source starts counting past the last one.
    s.failures.push_back(s.before.items_in + s.status.items_in);
    const auto offset = std::max(s.status.source_offset, s.before.source_offset);
    const auto position = std::max(s.status.input_position, s.before.input_position);
    add(s.before, s.status);
    s.before.source_offset = offset;
    s.before.input_position = position;
    s.status = {};
    s.up = false;
    s.data_endpoint.clear();
    s.ack_endpoint.clear();
    s.curve_key.clear();
    if (!s.remote) remove_sockets(w, s.epoch);
    ++s.epoch;
    // A remote worker is killed through the directory: the incarnation it replaces sees itself killed and raises
    // SIGKILL on itself (WorkerProcessOptions::on_killed).
    s.killed = kill_it && s.remote;
    if (s.remote) {
      s.assigned = false;
      s.assigned_to.clear();
      s.awaiting_since = Clock::now();
    } else if (take_over(w) || fork_worker(w)) {
      // A spare or a forked process runs the next incarnation already; the killed process is reaped after the
      // event's other workers have been restarted too (reap_killed), its teardown competing with their restores,
      // not delaying them.
      if (old > 0) to_reap.push_back(old);
    } else {
      if (old > 0) ::waitpid(old, nullptr, 0);
      start_worker(w);
    }
  }

  // A worker started by hand asks who it is (registration.h). A registration from another process than the one
  // holding the current incarnation means that one is gone (or is a duplicate): it is failed, and the registering
  // process gets the next incarnation. A resent registration gets the same answer again.
  net::AssignmentMsg on_register(std::uint32_t worker, const std::string& routing_id, RunResult& result) {
    net::AssignmentMsg a;
    a.worker = worker;
    const int n = static_cast<int>(workers.size());
    if (worker >= static_cast<std::uint32_t>(n)) {
      a.error = "worker.id: no worker " + std::to_string(worker) + " in this job (workers are 0.." +
                std::to_string(n - 1) + ")";
      return a;
    }
    auto& s = workers[worker];
    if (!s.remote) {
      a.error = "worker.id: worker " + std::to_string(worker) +
                " is started by the controller itself (remote workers: " + remote_list() + ")";
      return a;
    }
    if (s.finished) {
      a.error = "worker.id: worker " + std::to_string(worker) + " has already finished its stream";
      return a;
    }
    if (s.assigned && s.assigned_to != routing_id) {
      // at_items as for every other failure: the input processed (InputProgress), not what the sources produced,
      // which on word count is the whole corpus a second into the run
      fail(static_cast<int>(worker), input_items(), false, result,
           std::chrono::duration<double, std::milli>(Clock::now() - s.last_report).count());
    }
    if (!s.assigned) {
      s.assigned = true;
      s.assigned_to = routing_id;
      s.reported = false;
      s.last_report = Clock::now();
    }
    a.epoch = s.epoch;
    a.failures = s.failures;
    a.job_args = options.worker_args;
    a.directory = bound.directory;
    a.store = bound.store;
    a.store_key = bound.store_key;
    a.heartbeat_ms = static_cast<std::uint32_t>(status_every().count());
    return a;
  }

  std::string remote_list() const {
    std::vector<int> ids;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      if (workers[w].remote) ids.push_back(static_cast<int>(w));
    }
    return ids.empty() ? "none" : join(ids);
  }

  // Starts the backup server on store_listen (tcp: then learns the port it got, the first time).
  void start_server(bool first) {
    const bool durable = options.store == "rocksdb";
    std::vector<std::string> args{"backup-server",
                                  "--listen",
                                  store_listen,
                                  "--store",
                                  options.store,
                                  "--store.compact-ratio",
                                  exact_text(options.store_compact_ratio)};
    if (durable) {
      args.push_back("--store.path");
      args.push_back(dir + "/backups");
    }
    if (!local_dir.empty()) args.insert(args.end(), {"--store.local-dir", local_dir});  // puts read from the copies
    if (options.store_quiet) args.push_back("--quiet");
    // If this process is killed, the server (sent parent_death_signal(), spawn.h) removes what ~ProcessCluster
    // would have.
    for (const auto* d : {&local_dir, &dir}) {
      if (!d->empty()) args.insert(args.end(), {"--remove-if-orphaned", *d});
    }
    if (curve()) args.insert(args.end(), options.curve_args.begin(), options.curve_args.end());
    if (!tcp) {
      server = spawn(options.program, args);
      return;
    }
    const auto file = dir + "/store.endpoint";
    std::error_code ec;
    std::filesystem::remove(file, ec);
    args.push_back("--endpoint-file");
    args.push_back(file);
    server = spawn(options.program, args);
    if (!first) return;  // listening on the endpoint it had; the workers' RemoteStore retries until it is back
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      std::ifstream f(file);
      std::string line;
      if (f && std::getline(f, line) && !line.empty()) {
        store_listen = line;  // a restart listens on the same port
        bound.store = line;
        return;
      }
      int status = 0;
      if (::waitpid(server, &status, WNOHANG) == server) {
        server = -1;
        throw RuntimeError("controller: the backup server exited before listening on " + store_listen +
                           " (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                           "; its message is above)");
      }
      if (Clock::now() > deadline) {
        throw RuntimeError("controller: the backup server did not listen on " + store_listen + " within 30 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

ProcessCluster::ProcessCluster(const Topology& topology, const Registry& registry, RunConfig config,
                               ProcessClusterOptions options)
    : impl_(std::make_unique<Impl>(topology, registry, std::move(config), std::move(options))) {}

ProcessCluster::~ProcessCluster() { impl_->stop_all(); }

RunResult ProcessCluster::run(const std::function<void(const MetricsSample&)>& on_sample,
                              std::chrono::milliseconds sample_every) {
  auto& im = *impl_;
  const int n = im.topology.worker_count();
  im.workers.assign(static_cast<std::size_t>(n), {});

  // Options that do not fit the job: before anything is started.
  if (!im.options.bind.empty()) {
    im.tcp = net::parse_tcp_bind(im.options.bind, "controller.bind", true);
    if (im.tcp->port > 65533) {
      throw ConfigError("controller.bind: port " + std::to_string(im.tcp->port) +
                        " leaves no room for the directory (port + 1) and the backup server (port + 2)");
    }
  }
  if (!im.options.backup_server.empty()) {
    net::check_connect_endpoint(im.options.backup_server, "controller.backup-server");
    if (im.curve() && net::is_tcp(im.options.backup_server) && im.options.backup_server_key.empty()) {
      throw ConfigError("controller.backup-server-key: needed with net.curve-secret to reach the backup server at " +
                        im.options.backup_server + " (its public key: the NAME.pub of the key it serves with)");
    }
  }
  for (int w : im.options.remote_workers) {
    if (w < 0 || w >= n) {
      throw ConfigError("controller.remote-workers: no worker " + std::to_string(w) + " in this job (workers are 0.." +
                        std::to_string(n - 1) + ")");
    }
    if (!im.tcp) {
      throw ConfigError(
          "controller.remote-workers: workers on other hosts need the controller on tcp:// "
          "(controller.bind tcp://IP)");
    }
    im.workers[static_cast<std::size_t>(w)].remote = true;
  }

  check_open_file_limit(n);
  im.dir = make_run_directory(n);
  if (im.options.local_recovery) {
    // On tmpfs when there is one with room to spare (the copies are memory there: up to five times each worker's
    // state; a container's default /dev/shm is 64 MB): the copies are for failures of processes, and stay off the
    // disk. Else beside the sockets.
    struct statvfs fs {};
    char shm[] = "/dev/shm/afs-local-XXXXXX";
    const bool roomy = ::statvfs("/dev/shm", &fs) == 0 &&
                       static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize >= (std::uint64_t{1} << 30);
    im.local_dir = roomy && ::mkdtemp(shm) != nullptr ? std::string(shm) : im.dir + "/local";
  }

  zmq::context_t zmq(1);
  // CURVE: who may connect is decided from the first connection on (bound before the sockets, destroyed after them).
  std::optional<Gatekeeper> gate;
  if (im.curve()) gate.emplace(zmq, im.options.curve->authorized);
  zmq::socket_t reports(zmq, zmq::socket_type::router);
  reports.set(zmq::sockopt::linger, 0);
  zmq::socket_t pub(zmq, zmq::socket_type::pub);
  pub.set(zmq::sockopt::linger, 0);
  if (im.curve()) {
    net::make_curve_server(reports, im.options.curve->keys);
    net::make_curve_server(pub, im.options.curve->keys);
    im.bound.key = im.options.curve->keys.public_key;
    // The backup server it starts serves with the same keypair (it gets the same key files).
    im.bound.store_key = im.options.backup_server.empty() ? im.bound.key : im.options.backup_server_key;
  }
  if (im.tcp) {
    const auto port = [&](int offset) {
      return net::TcpAddress{im.tcp->host, static_cast<std::uint16_t>(im.tcp->port ? im.tcp->port + offset : 0)}
          .endpoint();
    };
    im.bound.reports = bind_socket(reports, port(0), "report");
    im.bound.directory = bind_socket(pub, port(1), "directory");
    im.store_listen = im.tcp->port ? port(2) : "tcp://" + im.tcp->host + ":0";
  } else {
    im.bound.reports = bind_socket(reports, im.endpoint("control"), "report");
    im.bound.directory = bind_socket(pub, im.endpoint("directory"), "directory");
    im.store_listen = im.endpoint("store");
  }
  im.bound.store = im.options.backup_server.empty() ? im.store_listen : im.options.backup_server;
  net::Encoder encoder;
  // Refers to this scope's socket and encoder: cleared when run() returns or throws.
  struct ClearOnExit {
    Impl& im;
    ~ClearOnExit() { im.send_assignment = nullptr; }
  } clear_send_assignment{im};
  im.send_assignment = [&](const std::string& routing_id, const net::AssignmentMsg& a) {
    auto frame = encoder.encode_assignment(0, 0, a);
    zmq::message_t id(routing_id.data(), routing_id.size());
    (void)reports.send(id, zmq::send_flags::sndmore);
    (void)reports.send(net::outgoing(frame), zmq::send_flags::dontwait);
  };
  auto broadcast = [&] {
    auto frame = encoder.encode_directory(0, 0, im.directory());
    zmq::message_t m = net::outgoing(frame);
    (void)pub.send(m, zmq::send_flags::dontwait);
  };

  const bool durable = im.options.store == "rocksdb";
  const bool own_server = im.options.backup_server.empty();
  if (own_server) im.start_server(true);
  if (im.options.on_ready) im.options.on_ready(im.bound);
  const auto t0 = Clock::now();
  for (int w = 0; w < n; ++w) {
    auto& s = im.workers[static_cast<std::size_t>(w)];
    s.epoch = 1;
    if (s.remote) {
      s.awaiting_since = t0;
    } else {
      im.start_worker(w);
    }
  }

  FailurePlan plan(im.config.failures);
  RunResult result;
  auto last_sample = t0;
  auto last_broadcast = t0;
  std::uint64_t last_items = 0, last_input = 0;
  net::Message msg;
  // How to start remote worker w on its host (for the messages about one that has not registered).
  auto remote_start_command = [&](int w) {
    return "afstream worker --worker.id " + std::to_string(w) + " --worker.controller " + im.bound.reports +
           " --worker.bind tcp://ITS_IP" +
           (im.curve() ? " --net.curve-secret ITS.key --net.curve-authorized DIR --worker.controller-key='" +
                             im.bound.key + "'"
                       : std::string()) +
           " --worker.restart";
  };
  // Connections refused for their key: the controller's own and every worker's (incarnations added up).
  auto unauthorized = [&] { return (gate ? gate->unauthorized() : 0) + im.totals().unauthorized_connections; };
  // One line of metrics: every sample_every while running, and one at the end (a run shorter than sample_every wrote
  // none: an empty metrics.jsonl).
  auto take_sample = [&] {
    const auto t = im.totals();
    MetricsSample sample;
    sample.t = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto sources_now = im.source_items();
    sample.source_items = sources_now;
    const double dt = std::chrono::duration<double>(Clock::now() - last_sample).count();
    sample.items_per_s = static_cast<double>(sources_now - last_items) / dt;
    sample.input_items = im.input_items();
    sample.input_per_s = static_cast<double>(sample.input_items - std::min(sample.input_items, last_input)) / dt;
    sample.items_out = t.items_out;
    sample.state_backups = t.state_backups;
    sample.item_backups = t.item_backups;
    sample.backup_bytes = t.backup_bytes;
    sample.divergence = t.divergence;
    sample.unbacked = t.unbacked;
    sample.unacked = t.unacked;
    sample.failures = result.failures.size();
    sample.last_recovery_ms = result.failures.empty() ? 0 : result.failures.back().recovery_ms;
    if (durable) sample.store_bytes = directory_bytes(im.dir + "/backups");
    sample.unauthorized_connections = unauthorized();
    sample.trees_replayed = t.trees_replayed;
    on_sample(sample);
    last_sample = Clock::now();
    last_items = sources_now;
    last_input = sample.input_items;
  };

  for (;;) {
    const auto now = Clock::now();
    if (gate && im.options.on_refused) {
      for (const auto& r : gate->new_refusals()) im.options.on_refused(r);
    }
    if (now - t0 > im.options.run_timeout) throw RuntimeError("process runtime: the job did not finish in time");
    if (im.options.stop_signal && im.options.stop_signal->load(std::memory_order_relaxed) != 0) {
      throw RuntimeError("process runtime: stopped by signal " +
                         std::to_string(im.options.stop_signal->load(std::memory_order_relaxed)));
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(reports), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(5));
    bool changed = false;
    for (;;) {
      zmq::message_t id, body;
      if (!reports.recv(id, zmq::recv_flags::dontwait)) break;
      if (!reports.recv(body, zmq::recv_flags::dontwait)) break;
      net::received(body);
      try {
        net::decode_into({static_cast<const std::uint8_t*>(body.data()), body.size()}, {}, msg);
      } catch (const FormatError&) {
        ++result.bad_messages;
        continue;
      }
      const auto* r = std::get_if<net::WorkerReportMsg>(&msg.body);
      if (r == nullptr) continue;
      if (r->kind == net::ReportKind::kRegister) {
        const auto epoch_before = msg.sender < static_cast<std::uint32_t>(n) ? im.workers[msg.sender].epoch : 0;
        const auto answer = im.on_register(msg.sender, id.to_string(), result);
        if (answer.epoch != epoch_before) changed = true;
        auto frame = encoder.encode_assignment(0, 0, answer);
        (void)reports.send(id, zmq::send_flags::sndmore);
        (void)reports.send(net::outgoing(frame), zmq::send_flags::dontwait);
        continue;
      }
      if (r->kind == net::ReportKind::kStandby) {
        const auto from = id.to_string();
        for (auto& sb : im.standbys) {
          if (sb.routing_id.empty() && from == sb.expected_id()) sb.routing_id = from;
        }
        continue;
      }
      if (msg.sender >= static_cast<std::uint32_t>(n)) continue;
      auto& s = im.workers[msg.sender];
      if (msg.epoch != s.epoch) continue;  // from an incarnation that has been replaced
      if (s.remote && !s.assigned) {
        if (r->kind != net::ReportKind::kHello) continue;
        s.assigned = true;  // started by hand with the job's options and this incarnation, not registered
      }
      s.last_report = Clock::now();
      s.reported = true;
      s.status = r->status;
      if (r->kind == net::ReportKind::kFailed) {
        // It stops on an error a restart would meet again (a backup server unreachable past its deadline, a state
        // over the store's message limit): as when a local worker exits with a status. A remote one's error was
        // printed on its own host only, and the run waited for a registration that never came.
        throw RuntimeError("controller: " + std::string(s.remote ? "remote " : "") + "worker " +
                           std::to_string(msg.sender) + " stopped on an error: " + r->error);
      }
      if (r->kind == net::ReportKind::kHello && !im.options.job_config.empty() && !r->job_config.empty() &&
          r->job_config != im.options.job_config) {
        // A worker started by hand with --job (not registered: it did not get the job from here) and another job or
        // other job options: its results would be wrong, or the run would never end, without a word. The worker is
        // told why (a refusal on its report socket) rather than left to find the controller silent.
        net::AssignmentMsg refusal;
        refusal.worker = msg.sender;
        refusal.error = "it runs another job than the controller's: " +
                        job_config_difference(im.options.job_config, r->job_config) +
                        " (start it without --job: it then takes the job's options from the controller)";
        auto frame = encoder.encode_assignment(0, 0, refusal);
        (void)reports.send(id, zmq::send_flags::sndmore);
        (void)reports.send(net::outgoing(frame), zmq::send_flags::dontwait);
        reports.set(zmq::sockopt::linger, 1000);  // closing on the way out delivers it
        throw RuntimeError(
            "controller: " + std::string(s.remote ? "remote " : "") + "worker " + std::to_string(msg.sender) +
            " runs another job than this controller's: " + job_config_difference(r->job_config, im.options.job_config) +
            " (start it without --job: it then takes the job's options from the controller)");
      }
      if (r->kind == net::ReportKind::kHello && !s.up) {
        s.up = true;
        s.data_endpoint = r->data_endpoint;
        s.ack_endpoint = r->ack_endpoint;
        s.curve_key = r->curve_key;
        changed = true;
        if (s.pending) {
          s.pending->recovery_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.killed_at).count();
          s.hello_ms = r->recovery.recovered_ms;
          s.said_hello = true;
        }
      }
      // The restarted worker's report of its recovery: once restored, what the restore measured (restore_ms and
      // replayed_items, kept in case it fails again first: unrecovered); once recovered (replayed, compensated), the
      // record's details, and the record is complete.
      // The worker measured its durations from its start; the kill was recovery_ms - hello_ms before that.
      auto since_kill = [&s](double ms_since_start, const FailureRecord& rec) {
        return ms_since_start < 0 ? -1 : rec.recovery_ms - s.hello_ms + ms_since_start;
      };
      if (s.pending && s.said_hello &&
          r->recovery.failure_count == static_cast<std::uint32_t>(s.pending->failure_count)) {
        auto& rec = *s.pending;
        rec.restore_ms = r->recovery.restore_ms;
        rec.replayed_items = r->recovery.replayed_items;
        rec.repeated_items = r->recovery.repeated_items;
        rec.lost_items = r->recovery.lost_items;
        rec.lost_outputs = r->recovery.lost_outputs;
        rec.caught_up_ms = since_kill(r->recovery.caught_up_ms, rec);
        if (r->recovery.done) {
          rec.theta = r->recovery.theta;
          rec.l = r->recovery.l;
          rec.gamma = r->recovery.gamma;
          rec.alpha = r->recovery.alpha;
          rec.replay_ms = r->recovery.replay_ms;
          rec.first_item_ms = since_kill(r->recovery.first_item_ms, rec);
          rec.missing_items = r->recovery.missing_items;
          rec.residual = r->recovery.residual;
          s.completed = result.failures.size();
          result.failures.push_back(rec);
          s.pending.reset();
        }
      } else if (s.completed &&
                 r->recovery.failure_count == static_cast<std::uint32_t>(result.failures[*s.completed].failure_count)) {
        auto& rec = result.failures[*s.completed];
        if (rec.caught_up_ms < 0) rec.caught_up_ms = since_kill(r->recovery.caught_up_ms, rec);
      }
      if (r->kind == net::ReportKind::kFinished) {
        s.finished = true;
        s.final_state = r->final_state;
        if (s.remote || s.exited_clean_at) s.exited = true;  // exits on its own / has already exited
        changed = true;
      }
    }

    // Processes that exited: normally after finishing, or a failure to recover from. Remote workers: silence.
    for (int w = 0; w < n; ++w) {
      auto& s = im.workers[static_cast<std::size_t>(w)];
      if (s.remote) {
        if (s.finished) continue;
        if (s.assigned && !s.reported && Clock::now() - s.last_report > im.options.start_timeout) {
          // As for a local worker: a restart (a supervisor's) would build the job as slowly again, without end.
          throw RuntimeError("controller: remote worker " + std::to_string(w) + " sent no report within " +
                             std::to_string(im.options.start_timeout.count()) +
                             " ms of its registration (it builds the job first, reading any input file; "
                             "--process.start-timeout-ms)");
        }
        if (s.assigned && s.reported && Clock::now() - s.last_report > im.options.heartbeat_timeout) {
          const double silent_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.last_report).count();
          // Presumed dead; its next incarnation registers. Failed as a kill (the directory says `killed`): if the
          // incarnation was only stalled or cut off and comes back, it raises SIGKILL on itself, so that its
          // supervisor (--worker.restart) starts the next one; an error exit would be final there, and the job would
          // wait for a registration that never comes (controller.register-timeout-ms).
          im.fail(w, im.input_items(), true, result, silent_ms);
          if (im.options.on_remote_down) {
            im.options.on_remote_down(
                w, "silent for " + std::to_string(static_cast<long>(silent_ms)) + " ms, presumed dead",
                remote_start_command(w));
          }
          changed = true;
        } else if (!s.assigned && Clock::now() - s.awaiting_since > im.options.register_timeout) {
          const auto refused = unauthorized();
          throw RuntimeError(
              "controller: remote worker " + std::to_string(w) + " did not register within " +
              std::to_string(im.options.register_timeout.count()) +
              " ms (controller.register-timeout-ms); start it on its host with `" + remote_start_command(w) + "`" +
              (refused > 0 ? "; " + std::to_string(refused) +
                                 " connections were refused meanwhile, their key not in net.curve-authorized"
                           : std::string()));
        }
        continue;
      }
      if (s.exited_clean_at && !s.finished && Clock::now() - *s.exited_clean_at > im.options.heartbeat_timeout) {
        s.exited_clean_at.reset();  // exited 0 but its finished report never came: a failure after all
        im.fail(w, im.input_items(), false, result);
        changed = true;
        continue;
      }
      if (s.pid <= 0) continue;
      int status = 0;
      const pid_t got = ::waitpid(s.pid, &status, WNOHANG);
      if (got == s.pid) {
        s.pid = -1;
        if (s.finished) {
          // It had finished for good (everything it sent acknowledged, its upstream done): nothing to redo, even
          // if it died while lingering.
          s.exited = true;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
          // Finished, and its finished report not read yet (a loaded machine): wait for the report, not a restart.
          s.exited_clean_at = Clock::now();
        } else if (WIFEXITED(status)) {
          // It stopped on an error it reported itself (a state over the store's message limit, a store that stayed
          // unreachable past its deadline, bad options): a restart would meet it again. The thread runtime also
          // ends the run on a worker's error.
          throw RuntimeError("controller: worker " + std::to_string(w) + " stopped with exit status " +
                             std::to_string(WEXITSTATUS(status)) + " (its error is in the log above)");
        } else {
          im.note_death(w, status);  // RuntimeError once it keeps crashing
          im.fail(w, im.input_items(), false, result);
          changed = true;
        }
      } else if (!s.finished && !s.reported && Clock::now() - s.last_report > im.options.start_timeout) {
        throw RuntimeError("controller: worker " + std::to_string(w) + " sent no report within " +
                           std::to_string(im.options.start_timeout.count()) +
                           " ms of its start (it builds the job first, reading any input file; "
                           "--process.start-timeout-ms)");
      } else if (!s.finished && s.reported && Clock::now() - s.last_report > im.options.heartbeat_timeout) {
        im.fail(w, im.input_items(), true, result,  // silent: presumed dead
                std::chrono::duration<double, std::milli>(Clock::now() - s.last_report).count());
        changed = true;
      }
    }
    if (int status = 0; im.server > 0 && ::waitpid(im.server, &status, WNOHANG) == im.server) {
      im.server = -1;
      // How it ended, for the errors: a signal (SIGXFSZ under a file size limit, SIGKILL from the OOM killer) or
      // its exit status (its own error is in the log above).
      const std::string how = WIFSIGNALED(status) ? std::string("killed by ") + ::strsignal(WTERMSIG(status)) +
                                                        " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                                  : "exit status " + std::to_string(WEXITSTATUS(status));
      if (!durable) {
        throw RuntimeError("process runtime: the backup server (memory store) ended, " + how + "; backups are lost");
      }
      // It exits with a non-zero status only on an error of its own (a store it cannot open or write: a restart
      // meets it again; it was restarted 20 times in a second and the run ended without the cause). Status 0 is a
      // SIGTERM or SIGINT it was sent, which it stops on cleanly: started again, as after a kill.
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        throw RuntimeError("process runtime: the backup server stopped with " + how +
                           " (its error is in the log above)");
      }
      // Killed: everything it acknowledged is on disk. Workers' RemoteStore calls retry until it is back.
      if (++im.server_restarts > 20) {
        throw RuntimeError("process runtime: the backup server keeps ending (the last time " + how + ")");
      }
      if (im.options.on_backup_server_restart) im.options.on_backup_server_restart(how);
      im.start_server(false);
    }

    // The failure plan, at input items processed.
    const auto items_now = im.input_items();
    // An event due while one of its workers restarts waits for its hello (FailurePlan::due).
    const auto ready = [&](int w) {
      if (w < 0 || w >= n) return true;  // not a worker: nothing to wait for (and nothing killed)
      const auto& s = im.workers[static_cast<std::size_t>(w)];
      return s.finished || s.up;
    };
    for (const auto& e : plan.due(items_now, im.source_items(),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0), ready)) {
      // As in the thread runtime, a worker that has finished its stream for good is not killed any more.
      const auto to_kill = [&](int w) { return w >= 0 && w < n && !im.workers[static_cast<std::size_t>(w)].finished; };
      if (std::any_of(e.workers.begin(), e.workers.end(), to_kill)) ++result.failure_events;
      // The event's workers die together: all are signalled before the first is reaped and restarted, so that one's
      // teardown (about 10 ms for a learner of 2^18 weights) does not hold up the next one's kill. fail() reaps each.
      for (int w : e.workers) {
        if (to_kill(w)) im.signal_kill(w);  // a remote one (no pid here) is killed through the directory by fail()
      }
      for (int w : e.workers) {
        if (!to_kill(w)) continue;
        im.fail(w, items_now, true, result);
        // A remote one kills itself on seeing the directory; without a supervisor nothing starts it again.
        if (im.workers[static_cast<std::size_t>(w)].remote && im.options.on_remote_down) {
          im.options.on_remote_down(w, "killed by the failure plan", remote_start_command(w));
        }
      }
      changed = true;
    }
    im.reap_killed();
    im.check_standbys();
    if (im.forks.running()) (void)im.forks.exited();  // one that is gone leaves the restarts to the program
    im.reap_strays();
    im.maybe_start_fork_server();
    if (im.want_standby()) im.start_standby();

    if (changed || Clock::now() - last_broadcast > std::chrono::milliseconds(200)) {
      broadcast();
      last_broadcast = Clock::now();
    }
    if (on_sample && Clock::now() - last_sample >= sample_every) take_sample();
    if (std::all_of(im.workers.begin(), im.workers.end(), [](const auto& s) { return s.exited; })) break;
  }

  for (int w = 0; w < n; ++w) {
    // Recovered, but its last report did not say so yet.
    if (im.workers[static_cast<std::size_t>(w)].pending) result.failures.push_back(im.unrecovered(w));
  }
  if (on_sample) take_sample();
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result.source_items = im.source_items();
  const auto t = im.totals();
  result.state_backups = t.state_backups;
  result.item_backups = t.item_backups;
  result.backup_bytes = t.backup_bytes;
  result.duplicates_dropped = t.duplicates_dropped;
  result.trees_replayed = t.trees_replayed;
  result.latency_buckets = t.latency;
  result.gaps = t.gaps;
  result.outputs_after_end = t.outputs_after_end;
  result.bad_messages += t.bad_messages;
  result.unauthorized_connections = unauthorized();
  result.checkpoints = t.checkpoints;  // checkpoint mode (worker_checkpoint.cc, summarize_checkpoints)
  result.checkpoints_abandoned = t.checkpoints_abandoned;
  result.checkpoint_ms_mean = t.checkpoints ? t.checkpoint_ms / static_cast<double>(t.checkpoints) : 0;
  result.checkpoint_ms_max = t.checkpoint_ms_max;
  result.checkpoint_bytes = t.checkpoint_bytes;
  result.alignment_ms_mean = t.alignments ? t.alignment_ms / static_cast<double>(t.alignments) : 0;
  result.alignment_ms_max = t.alignment_ms_max;
  result.items_held = t.items_held;

  im.stop_standbys();
  im.forks.stop();
  if (im.server > 0) {
    ::kill(im.server, SIGTERM);
    ::waitpid(im.server, nullptr, 0);
    im.server = -1;
  }
  for (int w = 0; w < n; ++w) {
    const auto& s = im.workers[static_cast<std::size_t>(w)];
    if (s.final_state.empty()) continue;
    const auto& stage = im.topology.stages()[im.topology.workers()[w].stage];
    auto op = im.registry.make_operator(stage.kind, stage.params, {im.topology.workers()[w].index, stage.parallelism});
    const auto opened = open_snapshot(s.final_state, type_id_of(stage.kind));
    ByteReader r(opened.payload);
    op->restore_full(r);
    im.finals[w] = std::move(op);
  }
  // Nothing of the run is needed any more but the results: its directories go now, not when the cluster does (a
  // signal that came while the job was evaluated ended the program, and left them behind).
  im.stop_all();
  return result;
}

ProcessRunInfo ProcessCluster::info() const {
  return {impl_->server_restarts.load(), impl_->server.load(), impl_->standby_takeovers.load(),
          impl_->standbys_started.load(), impl_->forked_restarts.load()};
}

Operator* ProcessCluster::final_operator(int worker) {
  auto it = impl_->finals.find(worker);
  return it == impl_->finals.end() ? nullptr : it->second.get();
}

}  // namespace afs
