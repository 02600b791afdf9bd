// The process runtime (DESIGN sections 4 and 5): the controller of a job whose workers are operating-system
// processes on this machine. It starts a backup server (`afstream backup-server`) and one `afstream worker` per
// worker, all talking over ipc:// endpoints in a private directory; tracks them by their reports (hello, a
// status every heartbeat, finished); kills them for real (SIGKILL) on the failure plan, at source positions;
// detects a failure by process exit or a missed heartbeat; restarts the worker with its failure count; and
// broadcasts which incarnation of every worker is up so that its peers reconnect and resend. Recovery time is
// measured from the kill to the restarted worker's hello (state restored, sockets bound; the logged items are
// replayed after it), and to the first item it processed from upstream (FailureRecord::first_item_ms). With the
// RocksDB store the backup server's directory is in the private directory; its size on disk is in every metrics
// sample (MetricsSample::store_bytes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/cluster.h"
#include "afstream/runtime/config.h"

namespace afs {

struct ProcessClusterOptions {
  std::string program;                   // the afstream binary (it runs `worker` and `backup-server`)
  std::vector<std::string> worker_args;  // the job's options as given to `afstream run`, passed to every worker
  std::string store = "rocksdb";         // the backup server's store: rocksdb (restarted after a crash) or memory
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds heartbeat_timeout{5000};  // a worker silent this long is killed and restarted
  std::chrono::milliseconds run_timeout{std::chrono::minutes(30)};
};

struct ProcessRunInfo {
  int backup_server_restarts = 0;
  pid_t backup_server_pid = -1;  // the current one (tests kill it)
};

class ProcessCluster final : public Cluster {
 public:
  ProcessCluster(const Topology& topology, const Registry& registry, RunConfig config, ProcessClusterOptions options);
  ~ProcessCluster() override;  // kills whatever is still running and removes the private directory

  // Throws RuntimeError if a process cannot be started, the backup server dies with the memory store (a RocksDB one
  // is restarted on its directory, and the workers' RemoteStore retries carry them over), or the run exceeds
  // run_timeout.
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
