// The in-process runtime: every worker of a job runs as a thread of this process, connected by ZeroMQ inproc://
// sockets; a monitor (the controller's role) injects failures on the plan, restarts crashed workers with their
// failure count, and samples metrics once a second.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/cluster.h"
#include "afstream/runtime/config.h"
#include "afstream/runtime/failure_plan.h"
#include "afstream/runtime/metrics.h"
#include "afstream/store/backup_store.h"

namespace afs {

class LocalCluster final : public Cluster {
 public:
  // store: where backups go; nullptr uses an in-memory store owned by the cluster.
  LocalCluster(const Topology& topology, const Registry& registry, RunConfig config,
               std::shared_ptr<BackupStore> store = nullptr);
  ~LocalCluster();

  // Runs the job to the end. on_sample is called about once per sample_every with the latest metrics.
  RunResult run(const std::function<void(const MetricsSample&)>& on_sample = {},
                std::chrono::milliseconds sample_every = std::chrono::milliseconds(1000)) override;
  Operator* final_operator(int worker) override;
  // A worker's counters (all its incarnations'), for tests and tools that look inside a run.
  const WorkerCounters& counters(int worker) const;
  BackupStore& store() { return *store_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<BackupStore> store_;
};

}  // namespace afs
