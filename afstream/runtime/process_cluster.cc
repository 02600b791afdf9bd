// The controller of the process runtime (process_cluster.h).
#include "afstream/runtime/process_cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/codec.h"
#include "afstream/runtime/failure_plan.h"
#include "afstream/state/snapshot.h"

namespace afs {

namespace {

using Clock = std::chrono::steady_clock;

pid_t spawn(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeError(std::string("cannot start ") + program + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
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

std::string join(const std::vector<std::uint64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

struct ProcessCluster::Impl {
  struct WorkerState {
    pid_t pid = -1;
    std::uint32_t epoch = 0;
    bool up = false;
    bool finished = false;  // reported finished for good
    bool exited = false;    // and its process exited normally
    std::vector<std::uint64_t> failures;
    net::WorkerStatusMsg status;  // latest report of the current incarnation
    net::WorkerStatusMsg before;  // totals of earlier incarnations (counters restart with each process)
    Clock::time_point last_report;
    std::optional<FailureRecord> pending;  // killed, not yet reported recovered
    bool said_hello = false;               // the pending one's incarnation is up (recovery_ms is set)
    double hello_ms = 0;                   // its process start to its hello, as it measured it
    Clock::time_point killed_at;
    std::vector<std::uint8_t> final_state;
  };

  const Topology& topology;
  const Registry& registry;
  RunConfig config;
  ProcessClusterOptions options;
  std::string dir;
  std::atomic<pid_t> server{-1};
  std::atomic<int> server_restarts{0};
  std::vector<WorkerState> workers;
  std::map<int, std::unique_ptr<Operator>> finals;

  Impl(const Topology& t, const Registry& r, RunConfig c, ProcessClusterOptions o)
      : topology(t), registry(r), config(std::move(c)), options(std::move(o)) {}

  std::string endpoint(const char* name) const { return "ipc://" + dir + "/" + name; }

  void start_worker(int w) {
    auto& s = workers[static_cast<std::size_t>(w)];
    std::vector<std::string> args{"worker"};
    args.insert(args.end(), options.worker_args.begin(), options.worker_args.end());
    const std::vector<std::string> own{"--worker.id",           std::to_string(w),
                                       "--worker.epoch",        std::to_string(s.epoch),
                                       "--worker.prefix",       "ipc://" + dir + "/",
                                       "--worker.controller",   endpoint("control"),
                                       "--worker.directory",    endpoint("directory"),
                                       "--worker.store",        endpoint("store"),
                                       "--worker.heartbeat-ms", std::to_string(options.heartbeat.count())};
    args.insert(args.end(), own.begin(), own.end());
    if (!s.failures.empty()) {
      args.push_back("--worker.failures");
      args.push_back(join(s.failures));
    }
    s.pid = spawn(options.program, args);
    s.up = false;
    s.last_report = Clock::now();
  }

  net::DirectoryMsg directory() const {
    net::DirectoryMsg d;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      d.peers.push_back({static_cast<std::uint32_t>(w), workers[w].epoch, workers[w].up, workers[w].finished});
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
    a.gaps += b.gaps;
    a.bad_messages += b.bad_messages;
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

  // A worker failed (killed by the plan, exited, or silent): reap it and start its next incarnation.
  void fail(int w, std::uint64_t at_items, bool kill_it, RunResult& result, double detect_ms = 0) {
    auto& s = workers[static_cast<std::size_t>(w)];
    if (s.pending) result.failures.push_back(*s.pending);  // failed again before it reported its recovery
    if (kill_it && s.pid > 0) ::kill(s.pid, SIGKILL);
    if (s.pid > 0) {
      int status = 0;
      ::waitpid(s.pid, &status, 0);
    }
    s.pid = -1;
    FailureRecord r;
    r.worker = w;
    r.failure_count = static_cast<int>(s.failures.size()) + 1;
    r.at_items = at_items;
    r.detect_ms = detect_ms;
    s.pending = r;
    s.said_hello = false;
    s.killed_at = Clock::now();
    s.failures.push_back(s.status.items_in);
    const auto offset = std::max(s.status.source_offset, s.before.source_offset);
    add(s.before, s.status);
    s.before.source_offset = offset;
    s.status = {};
    s.up = false;
    ++s.epoch;
    start_worker(w);
  }
};

ProcessCluster::ProcessCluster(const Topology& topology, const Registry& registry, RunConfig config,
                               ProcessClusterOptions options)
    : impl_(std::make_unique<Impl>(topology, registry, std::move(config), std::move(options))) {}

ProcessCluster::~ProcessCluster() {
  for (auto& s : impl_->workers) {
    if (s.pid > 0) {
      ::kill(s.pid, SIGKILL);
      ::waitpid(s.pid, nullptr, 0);
    }
  }
  if (impl_->server > 0) {
    ::kill(impl_->server, SIGKILL);
    ::waitpid(impl_->server, nullptr, 0);
  }
  if (!impl_->dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->dir, ec);
  }
}

RunResult ProcessCluster::run(const std::function<void(const MetricsSample&)>& on_sample,
                              std::chrono::milliseconds sample_every) {
  auto& im = *impl_;
  const int n = im.topology.worker_count();
  char tmpl[] = "/tmp/afs-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    throw RuntimeError(std::string("cannot create a directory in /tmp: ") + std::strerror(errno));
  im.dir = tmpl;

  zmq::context_t zmq(1);
  zmq::socket_t reports(zmq, zmq::socket_type::router);
  reports.set(zmq::sockopt::linger, 0);
  reports.bind(im.endpoint("control"));
  zmq::socket_t pub(zmq, zmq::socket_type::pub);
  pub.set(zmq::sockopt::linger, 0);
  pub.bind(im.endpoint("directory"));
  net::Encoder encoder;
  auto broadcast = [&] {
    auto frame = encoder.encode_directory(0, 0, im.directory());
    zmq::message_t m(frame.data(), frame.size());
    (void)pub.send(m, zmq::send_flags::dontwait);
  };

  const bool durable = im.options.store == "rocksdb";
  auto start_server = [&] {
    std::vector<std::string> args{"backup-server", "--listen", im.endpoint("store"), "--store", im.options.store};
    if (durable) {
      args.push_back("--store.path");
      args.push_back(im.dir + "/backups");
    }
    im.server = spawn(im.options.program, args);
  };
  start_server();
  im.workers.assign(static_cast<std::size_t>(n), {});
  for (int w = 0; w < n; ++w) {
    im.workers[static_cast<std::size_t>(w)].epoch = 1;
    im.start_worker(w);
  }

  FailurePlan plan(im.config.failures);
  RunResult result;
  const auto t0 = Clock::now();
  auto last_sample = t0;
  auto last_broadcast = t0;
  std::uint64_t last_items = 0;
  net::Message msg;

  for (;;) {
    const auto now = Clock::now();
    if (now - t0 > im.options.run_timeout) throw RuntimeError("process runtime: the job did not finish in time");
    zmq::pollitem_t items[] = {{static_cast<void*>(reports), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(5));
    bool changed = false;
    for (;;) {
      zmq::message_t id, body;
      if (!reports.recv(id, zmq::recv_flags::dontwait)) break;
      if (!reports.recv(body, zmq::recv_flags::dontwait)) break;
      try {
        net::decode_into({static_cast<const std::uint8_t*>(body.data()), body.size()}, {}, msg);
      } catch (const FormatError&) {
        ++result.bad_messages;
        continue;
      }
      const auto* r = std::get_if<net::WorkerReportMsg>(&msg.body);
      if (r == nullptr || msg.sender >= static_cast<std::uint32_t>(n)) continue;
      auto& s = im.workers[msg.sender];
      if (msg.epoch != s.epoch) continue;  // from an incarnation that has been replaced
      s.last_report = Clock::now();
      s.status = r->status;
      if (r->kind == net::ReportKind::kHello && !s.up) {
        s.up = true;
        changed = true;
        if (s.pending) {
          s.pending->recovery_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.killed_at).count();
          s.hello_ms = r->recovery.recovered_ms;
          s.said_hello = true;
        }
      }
      // The restarted worker finished recovering (replayed, compensated): complete the record with its details.
      if (s.pending && s.said_hello && r->recovery.done &&
          r->recovery.failure_count == static_cast<std::uint32_t>(s.pending->failure_count)) {
        auto& rec = *s.pending;
        rec.theta = r->recovery.theta;
        rec.l = r->recovery.l;
        rec.gamma = r->recovery.gamma;
        rec.alpha = r->recovery.alpha;
        rec.restore_ms = r->recovery.restore_ms;
        rec.replay_ms = r->recovery.replay_ms;
        // The worker measured from its start; the kill was recovery_ms - hello_ms before that.
        rec.first_item_ms =
            r->recovery.first_item_ms < 0 ? -1 : rec.recovery_ms - s.hello_ms + r->recovery.first_item_ms;
        rec.replayed_items = r->recovery.replayed_items;
        rec.missing_items = r->recovery.missing_items;
        result.failures.push_back(rec);
        s.pending.reset();
      }
      if (r->kind == net::ReportKind::kFinished) {
        s.finished = true;
        s.final_state = r->final_state;
        changed = true;
      }
    }

    // Processes that exited: normally after finishing, or a failure to recover from.
    for (int w = 0; w < n; ++w) {
      auto& s = im.workers[static_cast<std::size_t>(w)];
      if (s.pid <= 0) continue;
      int status = 0;
      const pid_t got = ::waitpid(s.pid, &status, WNOHANG);
      if (got == s.pid) {
        s.pid = -1;
        if (s.finished) {
          // It had finished for good (everything it sent acknowledged, its upstream done): nothing to redo, even
          // if it died while lingering.
          s.exited = true;
        } else {
          im.fail(w, im.source_items(), false, result);
          changed = true;
        }
      } else if (!s.finished && Clock::now() - s.last_report > im.options.heartbeat_timeout) {
        im.fail(w, im.source_items(), true, result,  // silent: presumed dead
                std::chrono::duration<double, std::milli>(Clock::now() - s.last_report).count());
        changed = true;
      }
    }
    if (im.server > 0 && ::waitpid(im.server, nullptr, WNOHANG) == im.server) {
      im.server = -1;
      if (!durable) throw RuntimeError("process runtime: the backup server (memory store) exited; backups are lost");
      // Durable: everything it acknowledged is on disk. Workers' RemoteStore calls retry until it is back.
      if (++im.server_restarts > 20) throw RuntimeError("process runtime: the backup server keeps exiting");
      start_server();
    }

    // The failure plan, at source positions.
    const auto items_now = im.source_items();
    for (const auto& e :
         plan.due(items_now, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0))) {
      for (int w : e.workers) {
        // As in the thread runtime, a worker that has finished its stream for good is not killed any more.
        if (w < 0 || w >= n || im.workers[static_cast<std::size_t>(w)].finished) continue;
        im.fail(w, items_now, true, result);
      }
      changed = true;
    }

    if (changed || Clock::now() - last_broadcast > std::chrono::milliseconds(200)) {
      broadcast();
      last_broadcast = Clock::now();
    }
    if (on_sample && Clock::now() - last_sample >= sample_every) {
      const auto t = im.totals();
      MetricsSample sample;
      sample.t = std::chrono::duration<double>(Clock::now() - t0).count();
      sample.source_items = items_now;
      sample.items_per_s = static_cast<double>(items_now - last_items) /
                           std::chrono::duration<double>(Clock::now() - last_sample).count();
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
      on_sample(sample);
      last_sample = Clock::now();
      last_items = items_now;
    }
    if (std::all_of(im.workers.begin(), im.workers.end(), [](const auto& s) { return s.exited; })) break;
  }

  for (auto& s : im.workers) {
    if (s.pending) result.failures.push_back(*s.pending);  // recovered, but its last report did not say so yet
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result.source_items = im.source_items();
  const auto t = im.totals();
  result.state_backups = t.state_backups;
  result.item_backups = t.item_backups;
  result.backup_bytes = t.backup_bytes;
  result.duplicates_dropped = t.duplicates_dropped;
  result.gaps = t.gaps;
  result.bad_messages += t.bad_messages;

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
  return result;
}

ProcessRunInfo ProcessCluster::info() const { return {impl_->server_restarts.load(), impl_->server.load()}; }

Operator* ProcessCluster::final_operator(int worker) {
  auto it = impl_->finals.find(worker);
  return it == impl_->finals.end() ? nullptr : it->second.get();
}

}  // namespace afs
