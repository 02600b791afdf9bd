// One worker as an operating-system process (`afstream worker`; DESIGN sections 4 and 5): the same Worker as the
// in-process runtime, its peers reached at ipc:// or tcp:// endpoints, its backups on a backup server
// (RemoteStore), and a controller (ProcessCluster) that announces which incarnation of every worker is up and where
// it is, and restarts this one, with its failure count, when it dies (or, for a worker on another host, waits for
// its next incarnation to register: registration.h).
//
// A side thread talks to the controller: `hello` once the worker has restored its state and bound its sockets
// (with the endpoints it bound: on tcp:// the ports the operating system chose), a `status` (counters, source
// position) every heartbeat, and `finished` at the end (with a sink's final state, for evaluation). It applies every
// Directory the controller broadcasts to the worker's PeerDirectory. A controller silent for controller_timeout
// stops the worker with RuntimeError, and so does a directory that shows a newer incarnation of this worker (another
// process registered as it: this one has been replaced); an unreachable backup server does so through RemoteStore's
// deadline.
//
// CURVE (WorkerProcessOptions::curve): every tcp:// socket of the process is a CURVE socket. It connects to the
// controller (reports and directory) with controller_key, to the backup server with store_key and to its peers with
// the key each incarnation announced (carried by the directory); its own data and acknowledgement sockets serve with
// a keypair made for this incarnation, announced in the hello, and let in only the keys in curve->authorized
// (gatekeeper.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/net/curve.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/gatekeeper.h"

namespace afs {

struct WorkerProcessOptions {
  int worker = 0;
  std::uint32_t epoch = 1;              // incarnation: 1 + earlier failures
  std::vector<std::uint64_t> failures;  // items this worker had processed at each earlier failure
  // Where this worker binds (PeerDirectory): an ipc:// prefix (prefix + "w<id>-e<epoch>-data|acks") or tcp://IP
  // (ports chosen by the operating system; the sockets are fenced by incarnation, gatekeeper.h).
  std::string bind;
  std::string controller;  // the controller's report endpoint (ZeroMQ ROUTER)
  std::string directory;   // the controller's directory endpoint (ZeroMQ PUB)
  std::string store;       // the backup server
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds controller_timeout{10000};
  std::chrono::milliseconds store_deadline{10000};  // a backup server call gives up (RuntimeError) after this
  // Local recovery (afstream/store/local_recovery_store.h): a directory where this worker keeps a copy of its
  // state chain, from which its next incarnation restores as far as the backup server vouches for it. "": none.
  std::string local_state;
  // The backup server reads this worker's puts from its copy (it was started with local_state as its local
  // directory, on this host): puts name their records' place in the copy instead of carrying them.
  bool store_reads_copies = false;
  // CURVE on tcp:// (net.curve-secret, net.curve-authorized): this process's keypair and the keys let in. Applies to
  // the tcp:// endpoints only (ipc:// stays as it is).
  std::optional<net::CurveConfig> curve;
  std::string controller_key;  // CURVE: the controller's public key (Z85), needed when `controller` is tcp://
  std::string store_key;       // CURVE: the backup server's public key (Z85), needed when `store` is tcp://
  // The controller's failure plan killed this incarnation (it can kill only the processes it started itself; a
  // remote worker learns it from the directory). Called at once, from the directory's thread; the command line
  // raises SIGKILL, so that the process dies as a killed one does and its supervisor (--worker.restart) starts the
  // next incarnation. Unset: the worker stops with the "replaced" RuntimeError.
  std::function<void()> on_killed;
  // CURVE: a client whose key is not in net.curve-authorized was refused by this worker's sockets (each key once),
  // called from the directory's thread. Unset: only counted (WorkerStatus.unauthorizedConnections).
  std::function<void(const ZapRefusal&)> on_refused;
  // The job's options in force in this process ("key = value" lines), said in the hello so that the controller can
  // refuse a worker started by hand with another job or other job options. "": not said.
  std::string job_config;
};

// ConfigError if CURVE is on (options.curve) and a tcp:// server it must reach (controller, backup server) has no
// public key given. run_worker_process checks this first; a spare (registration.h, await_assignment) checks it
// before it waits, so that bad options stop it at once rather than at its takeover.
void check_server_keys(const WorkerProcessOptions& options);

// Runs the worker until its stream is finished for good. Throws RuntimeError if the controller goes silent or the
// backup server cannot be reached, ConfigError for bad options. Never prints or exits.
void run_worker_process(const Topology& topology, const Registry& registry, const RunConfig& config,
                        const WorkerProcessOptions& options);

}  // namespace afs
