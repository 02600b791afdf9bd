// The process runtime (DESIGN sections 4 and 5): the controller of a job whose workers are operating-system
// processes. It starts a backup server (`afstream backup-server`) and one `afstream worker` per worker, all talking
// over ipc:// endpoints in a private directory (`afstream run --runtime processes`) or over tcp:// (`afstream
// controller`, options.bind); tracks them by their reports (hello with the endpoints each bound, a status every
// heartbeat, finished); kills them for real (SIGKILL) on the failure plan, at source positions; detects a failure by
// process exit or a missed heartbeat; restarts the worker with its failure count; and broadcasts which incarnation
// of every worker is up, and where, so that its peers reconnect and resend. Recovery time is measured from the kill
// to the restarted worker's hello (state restored, sockets bound; the logged items are replayed after it), and to
// the first item it processed from upstream (FailureRecord::first_item_ms). With the RocksDB store the backup
// server's directory is in the private directory; its size on disk is in every metrics sample
// (MetricsSample::store_bytes).
//
// Across hosts, the workers in options.remote_workers are not started here: each is started by hand on its host and
// registers (registration.h). The controller cannot start or kill a process there, so for those it detects a failure
// by missed heartbeats (or by a new process registering as the same worker), marks the worker down, and waits for
// its next incarnation to register (`afstream worker --worker.restart` starts one whenever the worker dies); their
// recovery time runs from the detection to the new incarnation's hello.
//
// CURVE (options.curve, with a tcp:// bind): the report and directory sockets serve with the controller's keypair and
// let in only the authorized keys (gatekeeper.h); the backup server it starts and the workers it starts get the same
// key files (options.curve_args), the controller's public key and the backup server's; the directory carries the key
// each worker incarnation serves with, and an assignment the backup server's. Connections refused for their key are
// counted (RunResult::unauthorized_connections: the controller's and every worker's) and each refused key is
// reported once to options.on_refused.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/ft/compactor.h"
#include "afstream/net/curve.h"
#include "afstream/runtime/cluster.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/gatekeeper.h"

namespace afs {

// Where a controller is reached, once it is ready (printed by `afstream controller` so that workers started by hand
// can be pointed at it).
struct ControllerEndpoints {
  std::string reports;    // ROUTER: the workers' reports and registrations (worker.controller)
  std::string directory;  // PUB: the directory (worker.directory)
  std::string store;      // the backup server (worker.store)
  std::string key;        // CURVE: the controller's public key (worker.controller-key); "" without CURVE
  std::string store_key;  // CURVE: the backup server's public key; "" without CURVE
};

struct ProcessClusterOptions {
  std::string program;                   // the afstream binary (it runs `worker` and `backup-server`)
  std::vector<std::string> worker_args;  // the job's options, passed to every worker (registering ones included)
  std::string store = "rocksdb";         // the backup server's store: rocksdb (restarted after a crash) or memory
  // The backup server's --store.compact-ratio (0: it never compacts). 0 by default: the server shares the host's
  // cores with the workers, which keep their chains under five times their state by writing full snapshots
  // themselves (as on the threads runtime, whose store does not compact); compacting at 1x cost the join 35% more
  // CPU than none, word count and NEXMark 14-16%, with no shorter recoveries (experiments/results/process-runtime/
  // README.md, "The backup server's compactions").
  double store_compact_ratio = 0;
  bool store_quiet = false;  // the backup server's --quiet: no lines at its start (a `run --quiet`)
  // Spare worker processes kept started on this host (`afstream worker --worker.standby SLOT`: the job parsed and
  // built, no state, waiting; registration.h, await_assignment). A failed local worker is taken over by a ready one
  // at once (told its id, incarnation and failures; it restores from the backup server as a new process would)
  // instead of waiting for a new process to start; the controller starts a new spare once every worker it started
  // is up again (has said hello, its state restored). 0: every failure starts a new process. Workers started by
  // hand on other hosts are not covered (with none started here, no spare is started).
  int standby = 0;
  // Restart failed local workers through a fork server (fork_server.h: one process with the program loaded and the
  // job built, started once every local worker is up, which forks each new worker process) instead of starting the
  // program anew: a restart then skips the program's loading and the job's setup
  // (experiments/results/fork-server/README.md). On by default; spares, when ready, are used first. A server that
  // fails a request is killed and the restarts start the program from then on.
  bool fork_server = true;
  // Local recovery (afstream/store/local_recovery_store.h): each local worker keeps a copy of its state chain in a
  // private directory of this run (under /dev/shm when it is a writable directory, else beside the ipc:// sockets;
  // removed at the end), and a restarted worker restores from that copy as far as the backup server vouches for
  // it, instead of receiving the chain from the server. Workers started by hand on other hosts are not covered.
  bool local_recovery = true;
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds heartbeat_timeout{5000};  // a worker silent this long is killed and restarted
  // A worker process that has sent no report this long after its start: RuntimeError (a restart would meet the
  // same). Before its first report a worker loads the program and builds the job, which reads any input file (every
  // worker does, and on a shared host at once): seconds for a file of 1e7 items, which the heartbeat timeout, counted
  // from the start, took for a dead worker and restarted without end. Remote workers: from their registration.
  std::chrono::milliseconds start_timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds run_timeout{std::chrono::minutes(30)};
  // Set to a signal number (by the caller's signal handler: SIGTERM, SIGINT, ...): run() stops at its next step with
  // a RuntimeError, and destroying the cluster then stops its processes and removes its private directories (a run
  // stopped by `timeout` left /tmp/afs-* and /dev/shm/afs-local-* behind).
  const std::atomic<int>* stop_signal = nullptr;

  // Across hosts (`afstream controller`).
  // "": ipc:// endpoints in a private directory, every process on this host. tcp://IP[:PORT]: the controller's report
  // and directory sockets, the backup server it starts and the workers it starts bind on IP (which the other hosts
  // must reach): reports on PORT, the directory on PORT + 1, the backup server on PORT + 2, or ports the operating
  // system chooses when PORT is absent or 0.
  std::string bind;
  // "": start a backup server (restarted if it dies, with the RocksDB store). Else the endpoint of one started by
  // hand (`afstream backup-server`), used as it is and never restarted.
  std::string backup_server;
  // Workers started by hand (`afstream worker` with no --job, on any host), which register; needs a tcp bind.
  std::vector<int> remote_workers;
  // The job's options in force here (afs::cli::job_config: "key = value" lines). A worker's hello says its own; one
  // that differs (a worker started by hand with --job and other job options, or another job) ends the run with an
  // error naming the first option that differs. "": not checked.
  std::string job_config;
  // A remote worker that has not registered this long after the start, or after its last failure: RuntimeError.
  std::chrono::milliseconds register_timeout{std::chrono::minutes(5)};
  // Called once the sockets are bound and the backup server listens, before any worker is started.
  std::function<void(const ControllerEndpoints&)> on_ready;

  // CURVE on tcp:// (only with a tcp bind; ignored for ipc://): the controller's keypair and the keys let in.
  std::optional<net::CurveConfig> curve;
  // The options that gave `curve` (--net.curve-secret=FILE, --net.curve-authorized=PATH), passed to the backup server
  // and the workers it starts on this host (which so serve with the same keypair).
  std::vector<std::string> curve_args;
  // CURVE with a backup server started by hand (backup_server): its public key (Z85).
  std::string backup_server_key;
  // Called from run() once for each client key the controller refused (CURVE), e.g. to log it.
  std::function<void(const ZapRefusal&)> on_refused;
  // Called from run() when a remote worker is down: silent past heartbeat_timeout and presumed dead, or killed by the
  // failure plan (why says which). The run waits for its next incarnation to register (up to register_timeout).
  // start_command: how to start it on its host.
  std::function<void(int worker, const std::string& why, const std::string& start_command)> on_remote_down;
  // Called from run() when the backup server it started (RocksDB store) was killed or stopped by a signal (how: which
  // signal, or exit status 0 after a SIGTERM it handled) and is started again on its directory.
  std::function<void(const std::string& how)> on_backup_server_restart;
};

struct ProcessRunInfo {
  int backup_server_restarts = 0;
  pid_t backup_server_pid = -1;  // the current one (tests kill it)
  int standby_takeovers = 0;     // failed workers taken over by a spare process (options.standby)
  int standbys_started = 0;
  int forked_restarts = 0;  // failed workers restarted through the fork server (options.fork_server)
};

class ProcessCluster final : public Cluster {
 public:
  ProcessCluster(const Topology& topology, const Registry& registry, RunConfig config, ProcessClusterOptions options);
  ~ProcessCluster() override;  // kills whatever is still running and removes the private directory

  // Throws RuntimeError if a process cannot be started, a socket cannot be bound, the backup server dies with the
  // memory store (a RocksDB one is restarted on its directory, and the workers' RemoteStore retries carry them over),
  // a remote worker does not register in time, or the run exceeds run_timeout; ConfigError for options that do not
  // fit (a malformed bind address, a remote worker out of range or on the failure plan). A run that returns has
  // stopped its processes and removed its private directories: what is left is its results (final_operator).
  RunResult run(const std::function<void(const MetricsSample&)>& on_sample = {},
                std::chrono::milliseconds sample_every = std::chrono::milliseconds(1000)) override;
  // A sink's operator restored from the final state it reported; nullptr for other workers.
  Operator* final_operator(int worker) override;
  // While run() is in progress, from another thread (tests): the backup server's pid; after it, its restarts.
  ProcessRunInfo info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace afs
