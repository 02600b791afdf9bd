// One worker process: the Worker on the main thread, the controller link on a side thread (worker_process.h).
#include "afstream/runtime/worker_process.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/codec.h"
#include "afstream/net/endpoint.h"
#include "afstream/net/handoff.h"
#include "afstream/runtime/gatekeeper.h"
#include "afstream/runtime/worker.h"
#include "afstream/state/snapshot.h"
#include "afstream/store/local_recovery_store.h"
#include "afstream/store/remote_store.h"

namespace afs {

namespace {

net::WorkerStatusMsg status_of(const WorkerCounters& c, std::uint64_t source_offset) {
  net::WorkerStatusMsg s;
  s.items_in = c.items_in.load();
  s.items_out = c.items_out.load();
  s.input_position = c.input_position.load();
  s.state_backups = c.state_backups.load();
  s.item_backups = c.item_backups.load();
  s.backup_bytes = c.backup_bytes.load();
  s.duplicates_dropped = c.duplicates_dropped.load();
  s.trees_replayed = c.trees_replayed.load();
  s.latency.resize(kLatencyBuckets);
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) s.latency[b] = c.latency[b].load();
  s.gaps = c.gaps.load();
  s.outputs_after_end = c.outputs_after_end.load();
  s.bad_messages = c.bad_messages.load();
  s.unbacked = c.unbacked.load();
  s.unacked = c.unacked.load();
  s.divergence = c.divergence.load();
  s.source_offset = source_offset;
  s.unauthorized_connections = c.unauthorized_connections.load();
  s.checkpoints = c.checkpoints.load();
  s.checkpoints_abandoned = c.checkpoints_abandoned.load();
  s.checkpoint_ms = c.checkpoint_ms.load();
  s.checkpoint_ms_max = c.checkpoint_ms_max.load();
  s.checkpoint_bytes = c.checkpoint_bytes.load();
  s.alignments = c.alignments.load();
  s.alignment_ms = c.alignment_ms.load();
  s.alignment_ms_max = c.alignment_ms_max.load();
  s.items_held = c.items_held.load();
  return s;
}

// Whether the directory says the failure plan killed incarnation `epoch` of `self` (the next one is shown, marked
// killed).
bool killed_by_plan(const net::DirectoryMsg& d, int self, std::uint32_t epoch) {
  for (const auto& p : d.peers) {
    if (static_cast<int>(p.worker) == self) return p.killed && p.epoch == epoch + 1;
  }
  return false;
}

// Applies the controller's view to the directory. Returns the incarnation the directory shows for `self` (a newer
// one than this process's means the controller has replaced it).
std::uint32_t apply_directory(const net::DirectoryMsg& d, int self, PeerDirectory& directory) {
  std::uint32_t own = 0;
  for (const auto& p : d.peers) {
    const int w = static_cast<int>(p.worker);
    if (w == self) own = p.epoch;
    if (w == self || w < 0) continue;
    if (p.up) {
      if (const auto known = directory.state(w); !known.up || known.epoch != p.epoch) {
        directory.set_up(w, p.epoch, {p.data_endpoint, p.ack_endpoint, p.curve_key});
      }
    } else if (directory.up(w)) {
      directory.set_down(w);
    }
    if (p.finished && !directory.finished(w)) directory.set_finished(w);
  }
  return own;
}

}  // namespace

void check_server_keys(const WorkerProcessOptions& options) {
  // CURVE applies to tcp:// endpoints; each needs the public key of the server behind it.
  if (options.curve && net::is_tcp(options.controller) && options.controller_key.empty()) {
    throw ConfigError("worker.controller-key: needed with net.curve-secret to reach the controller at " +
                      options.controller + " (its public key, as `afstream controller` prints it)");
  }
  if (options.curve && net::is_tcp(options.store) && options.store_key.empty()) {
    throw ConfigError("worker.store-key: needed with net.curve-secret to reach the backup server at " + options.store);
  }
}

void run_worker_process(const Topology& topology, const Registry& registry, const RunConfig& config,
                        const WorkerProcessOptions& options) {
  const int n = topology.worker_count();
  if (options.worker < 0 || options.worker >= n) {
    throw ConfigError("worker.id: expected 0.." + std::to_string(n - 1) + ", got " + std::to_string(options.worker));
  }
  const auto& curve = options.curve;
  check_server_keys(options);
  auto client_of = [&](const std::string& endpoint, const std::string& server_key) -> std::optional<net::CurveClient> {
    if (!curve || !net::is_tcp(endpoint)) return std::nullopt;
    return net::CurveClient{curve->keys, server_key};
  };
  zmq::context_t zmq(1);
  PeerDirectory directory(options.bind, n);
  // On tcp:// the incarnation is not in the endpoint's name: the gatekeeper lets in only peers that mean this one
  // (and, with CURVE, only authorized keys). It answers before any socket binds.
  std::optional<Gatekeeper> gate;
  if (directory.binds_tcp()) gate.emplace(zmq, curve ? curve->authorized : std::set<std::string>{});
  RemoteStoreOptions store_options;
  store_options.deadline = options.store_deadline;
  store_options.incarnation = options.epoch;  // the backup server fences off older incarnations
  store_options.curve = client_of(options.store, options.store_key);
  RemoteStore store(options.store, store_options);
  // Local recovery: the worker's own copy of its chain, beside the server's (local_recovery_store.h).
  std::optional<LocalRecoveryStore> local;
  if (!options.local_state.empty()) local.emplace(store, options.local_state, options.store_reads_copies);
  BackupStore& backups = local ? static_cast<BackupStore&>(*local) : store;
  std::vector<std::atomic<std::uint64_t>> progress(static_cast<std::size_t>(n));
  ClusterContext ctx;
  ctx.topology = &topology;
  ctx.registry = &registry;
  ctx.config = config;
  ctx.store = &backups;
  ctx.zmq = &zmq;
  ctx.directory = &directory;
  ctx.source_progress = &progress;
  // A source's items are counted once, below the furthest offset it produced (Worker: produced_high_ starts at its
  // progress): on threads the progress outlives the incarnation; here the last failure's position carries it (the
  // items it had produced, as the controller last heard them), so a restarted source does not count its replayed
  // items as new ones, and ack mode counts them as replayed (trees_replayed stayed 0 on processes).
  if (topology.stages()[topology.workers()[static_cast<std::size_t>(options.worker)].stage].is_source &&
      !options.failures.empty()) {
    progress[static_cast<std::size_t>(options.worker)].store(options.failures.back());
  }
  ctx.progress_dir = options.local_state;  // the worker's input positions for its next incarnation
  if (gate) ctx.gate = &*gate;
  if (curve && directory.binds_tcp()) ctx.curve = &curve->keys;
  for (int i = 0; i < n; ++i) ctx.counters.push_back(std::make_unique<WorkerCounters>());

  // The origin of every duration this process reports (the controller adds its kill-to-start time).
  const auto started = Clock::now();
  // A recovering incarnation fetches its backups while it builds its operator and binds its sockets (the store is
  // thread-safe; each call has its own connection). Not in mode none (no backups) nor at a first start.
  if (!options.failures.empty() && config.mode != FtMode::None) {
    const int w = options.worker;
    ctx.prefetched_chain = std::async(std::launch::async, [&backups, w] { return backups.state_chain(w); }).share();
    ctx.prefetched_items = std::async(std::launch::async, [&store, w] { return store.item_records(w); }).share();
  }
  std::optional<CrashInfo> crash;
  if (!options.failures.empty()) {
    CrashInfo c;
    c.record.worker = options.worker;
    c.record.failure_count = static_cast<int>(options.failures.size());
    c.killed_at = started;
    c.observed = false;
    c.positions_known = false;  // unless its progress page says (Worker: ctx.progress_dir)
    crash = std::move(c);
  }
  Worker worker(ctx, options.worker, options.epoch, options.failures, std::move(crash));

  std::atomic<bool> done{false};
  std::atomic<bool> failed{false};  // run() threw: the link thread must not report it finished
  std::string error;                // what it threw, written before failed is set: the link thread reports it
  std::atomic<bool> lost{false};
  std::atomic<bool> link_failed{false};  // the link thread threw: link_error says what (written before the flag)
  std::string link_error;
  std::atomic<bool> refused{false};  // the controller refused this worker (another job's options): link_error says why
  std::atomic<std::uint32_t> replaced_by{0};  // a newer incarnation of this worker, seen in the directory
  std::vector<std::uint8_t> final_state;      // written by the main thread before done is set
  std::thread link([&] {
    try {
      const auto self = static_cast<std::uint32_t>(options.worker);
      zmq::socket_t report(zmq, zmq::socket_type::dealer);
      report.set(zmq::sockopt::routing_id, "w" + std::to_string(options.worker) + "-e" + std::to_string(options.epoch));
      report.set(zmq::sockopt::linger, 2000);
      if (auto c = client_of(options.controller, options.controller_key)) net::make_curve_client(report, *c);
      report.connect(options.controller);
      zmq::socket_t sub(zmq, zmq::socket_type::sub);
      sub.set(zmq::sockopt::subscribe, "");
      sub.set(zmq::sockopt::linger, 0);
      // The directory is the controller's too (same keypair).
      if (auto c = client_of(options.directory, options.controller_key)) net::make_curve_client(sub, *c);
      sub.connect(options.directory);
      net::Encoder encoder;
      net::Message msg;
      auto send = [&](const net::WorkerReportMsg& r) {
        auto frame = encoder.encode_worker_report(self, options.epoch, r);
        zmq::message_t m = net::outgoing(frame);
        (void)report.send(m, zmq::send_flags::dontwait);
      };
      // The failure this incarnation recovers from: done once it has recovered (replayed, compensated); before, what
      // its restore measured (restore_ms, replayed_items), which the controller records if it fails again first.
      auto recovery = [&] {
        net::RecoveryReportMsg m;
        const bool done = worker.recovery_complete();
        if (const auto rec = worker.recovered_from()) {
          m = {static_cast<std::uint32_t>(rec->failure_count),
               rec->theta,
               rec->l,
               rec->gamma,
               rec->alpha,
               rec->restore_ms,
               rec->recovery_ms,
               rec->replayed_items,
               rec->missing_items,
               done,
               rec->replay_ms,
               rec->residual,
               rec->first_item_ms,
               rec->caught_up_ms,
               rec->repeated_items,
               rec->lost_items,
               rec->lost_outputs};
        }
        return m;
      };
      auto last_heard = Clock::now();
      auto last_status = Clock::time_point{};
      bool hello_sent = false;
      bool recovery_reported = false;
      bool caught_up_reported = false;
      // The next message waiting on s, decoded into msg (one that does not decode is skipped); false when none is.
      const auto next = [&msg](zmq::socket_t& s) {
        zmq::message_t m;
        while (s.recv(m, zmq::recv_flags::dontwait)) {
          net::received(m);
          try {
            net::decode_into({static_cast<const std::uint8_t*>(m.data()), m.size()}, {}, msg);
            return true;
          } catch (const FormatError&) {
          }
        }
        return false;
      };
      for (;;) {
        zmq::pollitem_t items[] = {{static_cast<void*>(sub), 0, ZMQ_POLLIN, 0},
                                   {static_cast<void*>(report), 0, ZMQ_POLLIN, 0}};
        // Until the hello is out, look often: the worker's restore may end any moment, and its peers wait for it.
        zmq::poll(items, 2, std::chrono::milliseconds(hello_sent ? 10 : 1));
        // The controller answers a report only to refuse this worker (a hand-started one with another job's options).
        while (next(report)) {
          const auto* a = std::get_if<net::AssignmentMsg>(&msg.body);
          if (a == nullptr || a->worker != self || a->epoch != 0) continue;
          link_error = a->error;
          refused.store(true);
          worker.kill();
          return;
        }
        while (next(sub)) {
          if (auto* d = std::get_if<net::DirectoryMsg>(&msg.body)) {
            const auto shown = apply_directory(*d, options.worker, directory);
            last_heard = Clock::now();
            if (shown > options.epoch) {
              if (options.on_killed && killed_by_plan(*d, options.worker, options.epoch)) options.on_killed();
              replaced_by.store(shown);
              worker.kill();
              return;
            }
          }
        }
        const auto now = Clock::now();
        const auto offset = progress[static_cast<std::size_t>(options.worker)].load();
        if (gate) {
          ctx.counters[static_cast<std::size_t>(options.worker)]->unauthorized_connections = gate->unauthorized();
          if (options.on_refused) {
            for (const auto& r : gate->new_refusals()) options.on_refused(r);
          }
        }
        if (!hello_sent && directory.up(options.worker)) {
          net::WorkerReportMsg hello;
          hello.kind = net::ReportKind::kHello;
          hello.recovery = recovery();  // up only once restored: the restore's measurements are known
          hello.recovery.failure_count = static_cast<std::uint32_t>(options.failures.size());
          hello.recovery.recovered_ms = std::chrono::duration<double, std::milli>(now - started).count();
          hello.status = status_of(*ctx.counters[static_cast<std::size_t>(options.worker)], offset);
          const auto bound = directory.endpoints(options.worker);
          hello.data_endpoint = bound.data;
          hello.ack_endpoint = bound.acks;
          hello.curve_key = bound.key;
          hello.job_config = options.job_config;
          send(hello);
          hello_sent = true;
        }
        if (done.load()) {
          if (failed.load()) {
            // An error is not the end of its stream: it exits non-zero. A remote worker's exit is not seen by the
            // controller, nor its error, printed on its own host: the report carries it (linger delivers it).
            net::WorkerReportMsg f;
            f.kind = net::ReportKind::kFailed;
            f.status = status_of(*ctx.counters[static_cast<std::size_t>(options.worker)], offset);
            f.error = error;
            send(f);
            return;
          }
          net::WorkerReportMsg fin;
          fin.kind = net::ReportKind::kFinished;
          fin.status = status_of(*ctx.counters[static_cast<std::size_t>(options.worker)], offset);
          fin.final_state = final_state;
          fin.recovery = recovery();
          send(fin);
          return;  // linger delivers it
        }
        // A status at once when the recovery completes, not at the next heartbeat: on a short run the next failure
        // may come first, and the controller would record this one without its details.
        // Likewise when it is back where the crashed incarnation was, which may come after (caught_up_ms).
        bool recovery_news = !recovery_reported && worker.recovery_complete();
        if (recovery_news) recovery_reported = true;
        if (recovery_reported && !caught_up_reported) {
          const auto rec = worker.recovered_from();
          caught_up_reported = !rec || rec->caught_up_ms >= 0;
          recovery_news = recovery_news || caught_up_reported;
        }
        if (recovery_news || now - last_status >= options.heartbeat) {
          net::WorkerReportMsg st;
          st.kind = net::ReportKind::kStatus;
          st.status = status_of(*ctx.counters[static_cast<std::size_t>(options.worker)], offset);
          st.recovery = recovery();
          send(st);
          last_status = now;
        }
        if (now - last_heard > options.controller_timeout) {
          lost.store(true);
          worker.kill();
          return;
        }
      }
    } catch (const std::exception& e) {
      // Its sockets could not be made or used (too few file descriptors: a ZeroMQ error): the worker stops with
      // that error, not std::terminate and a core dump that the controller took for a crash of the input.
      link_error = e.what();
      link_failed.store(true);
      worker.kill();
    }
  });

  // The controller has moved on to a newer incarnation of this worker: this one was taken for failed (silent) or
  // another process registered as this worker. Either way it must stop.
  auto replaced = [&] {
    return RuntimeError(
        "worker " + std::to_string(options.worker) + ": replaced by incarnation " + std::to_string(replaced_by.load()) +
        " (the controller at " + options.controller + " took this one, incarnation " + std::to_string(options.epoch) +
        ", for failed, or another process registered as worker " + std::to_string(options.worker) + "); it stops");
  };
  auto refusal = [&] {
    return ConfigError("worker " + std::to_string(options.worker) + ": the controller at " + options.controller +
                       " refused it: " + link_error);
  };
  try {
    worker.run();
  } catch (...) {
    worker.kill();
    try {
      throw;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "an exception of an unknown type";
    }
    failed.store(true);
    done.store(true);
    link.join();
    if (replaced_by.load() != 0) throw replaced();  // the cause (a store call may have been refused first)
    if (refused.load()) throw refusal();
    throw;
  }
  // Checkpoint mode: the worker crashed on purpose to roll back with its peers (a peer restarted in a newer round).
  // It dies as a killed process would, and the controller restarts it like any failed worker.
  const bool link_down = lost.load() || link_failed.load() || refused.load() || replaced_by.load() != 0;
  if (worker.crashed() && !link_down) ::kill(::getpid(), SIGKILL);
  if (!link_down && worker.op() && topology.outputs_of(options.worker).empty()) {
    ByteWriter w;
    worker.op()->snapshot_full(w);
    const auto& stage = topology.stages()[topology.workers()[options.worker].stage];
    final_state = seal_snapshot(type_id_of(stage.kind), SnapshotKind::Full, w.buffer());
  }
  done.store(true);
  link.join();
  if (refused.load()) throw refusal();
  if (link_failed.load()) {
    throw RuntimeError("worker " + std::to_string(options.worker) +
                       ": its link to the controller failed: " + link_error);
  }
  if (replaced_by.load() != 0) throw replaced();
  if (lost.load()) {
    throw RuntimeError("worker " + std::to_string(options.worker) + ": controller at " + options.controller +
                       " silent for " + std::to_string(options.controller_timeout.count()) + " ms");
  }
}

}  // namespace afs
