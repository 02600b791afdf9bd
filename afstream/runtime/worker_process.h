// One worker as an operating-system process (`afstream worker`; DESIGN sections 4 and 5): the same Worker as the
// in-process runtime, its peers reached at ipc:// (or tcp://) endpoints, its backups on a backup server
// (RemoteStore), and a controller (ProcessCluster) that announces which incarnation of every worker is up and
// restarts this one, with its failure count, when it dies.
//
// A side thread talks to the controller: `hello` once the worker has restored its state and bound its sockets,
// a `status` (counters, source position) every heartbeat, and `finished` at the end (with a sink's final state,
// for evaluation). It applies every Directory the controller broadcasts to the worker's PeerDirectory. A controller
// silent for controller_timeout stops the worker with RuntimeError; an unreachable backup server does so through
// RemoteStore's deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/config.h"

namespace afs {

struct WorkerProcessOptions {
  int worker = 0;
  std::uint32_t epoch = 1;              // incarnation: 1 + earlier failures
  std::vector<std::uint64_t> failures;  // items this worker had processed at each earlier failure
  std::string endpoint_prefix;          // where workers bind: prefix + "w<id>-e<epoch>-data|acks"
  std::string controller;               // the controller's report endpoint (ZeroMQ ROUTER)
  std::string directory;                // the controller's directory endpoint (ZeroMQ PUB)
  std::string store;                    // the backup server
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds controller_timeout{10000};
  std::chrono::milliseconds store_deadline{10000};  // a backup server call gives up (RuntimeError) after this
};

// Runs the worker until its stream is finished for good. Throws RuntimeError if the controller goes silent or the
// backup server cannot be reached, ConfigError for bad options. Never prints or exits.
void run_worker_process(const Topology& topology, const Registry& registry, const RunConfig& config,
                        const WorkerProcessOptions& options);

}  // namespace afs
