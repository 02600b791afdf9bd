#include "afstream/runtime/local_cluster.h"

#include <sys/resource.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "afstream/core/errors.h"
#include "afstream/runtime/failure_plan.h"
#include "afstream/runtime/worker.h"
#include "afstream/store/memory_store.h"

namespace afs {

struct LocalCluster::Impl {
  struct Slot {
    std::unique_ptr<Worker> worker;
    std::thread thread;
    std::atomic<bool> exited{false};
    std::exception_ptr error;
    std::uint32_t epoch = 0;
    std::vector<std::uint64_t> failures;  // items the worker had processed at each of its failures
    bool done = false;
  };

  const Topology& topology;
  const Registry& registry;
  zmq::context_t zmq{1};
  PeerDirectory directory;
  ClusterContext ctx;
  std::vector<std::atomic<std::uint64_t>> progress;
  std::vector<std::unique_ptr<Slot>> slots;
  InputProgress input_progress;
  // A worker thread that exits notifies the run loop (which otherwise sleeps while no failure is pending).
  std::mutex exit_mu;
  std::condition_variable exit_cv;

  Impl(const Topology& t, const Registry& r, RunConfig config, BackupStore* store)
      : topology(t),
        registry(r),
        directory("inproc://afs-" + config.job_id + "-", t.worker_count()),
        progress(t.worker_count()),
        input_progress(t) {
    // One context serves every worker thread, and ZeroMQ's default is 1,023 sockets a context: a learn job of 256
    // copies (513 workers, a few sockets each) ended in "Too many open files" with 20,000 files allowed. Each socket
    // takes a file (its mailbox), so the open-file limit (raised to the hard one at start) is the real bound.
    if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
      const auto most = static_cast<rlim_t>(zmq.get(zmq::ctxopt::socket_limit));
      const auto want = files.rlim_cur == RLIM_INFINITY ? most : std::min(files.rlim_cur, most);
      if (want > 1023) zmq.set(zmq::ctxopt::max_sockets, static_cast<int>(want));
    }
    ctx.topology = &topology;
    ctx.registry = &registry;
    ctx.config = std::move(config);
    ctx.store = store;
    ctx.zmq = &zmq;
    ctx.directory = &directory;
    ctx.source_progress = &progress;
    for (int i = 0; i < t.worker_count(); ++i) {
      ctx.counters.push_back(std::make_unique<WorkerCounters>());
      slots.push_back(std::make_unique<Slot>());
    }
  }

  void start(int id, std::optional<CrashInfo> crash) {
    auto& s = *slots[id];
    s.epoch++;
    s.exited = false;
    // The new incarnation is built before the old one is dropped: what its operators share with it while either
    // holds it (a source's Zipf table, hh::ZipfGenerator) is not built again.
    s.worker = std::make_unique<Worker>(ctx, id, s.epoch, s.failures, std::move(crash));
    s.thread = std::thread([this, &s] {
      try {
        s.worker->run();
      } catch (...) {
        s.error = std::current_exception();
      }
      {
        std::lock_guard lock(exit_mu);
        s.exited.store(true, std::memory_order_release);
      }
      exit_cv.notify_one();
    });
  }

  std::uint64_t source_items() const {
    std::uint64_t n = 0;
    for (const auto& p : progress) n += p.load(std::memory_order_relaxed);
    return n;
  }

  std::uint64_t input_items() const {
    return input_progress(source_items(),
                          [&](int w) { return ctx.counters[static_cast<std::size_t>(w)]->input_position.load(); });
  }

  void stop_all() {
    for (auto& s : slots) {
      if (s->worker && !s->done) s->worker->kill();
    }
    for (auto& s : slots) {
      if (s->thread.joinable()) s->thread.join();
    }
  }
};

LocalCluster::LocalCluster(const Topology& topology, const Registry& registry, RunConfig config,
                           std::shared_ptr<BackupStore> store)
    : store_(store ? std::move(store) : std::make_shared<MemoryStore>()) {
  config.bounds.validate();
  validate_transport(config);
  for (const auto& f : config.failures) {
    for (int w : f.workers) {
      if (w < 0 || w >= topology.worker_count()) {
        throw ConfigError("fail.target: no worker " + std::to_string(w) + " (the job has " +
                          std::to_string(topology.worker_count()) + " workers, 0.." +
                          std::to_string(topology.worker_count() - 1) + ")");
      }
    }
  }
  impl_ = std::make_unique<Impl>(topology, registry, std::move(config), store_.get());
}

LocalCluster::~LocalCluster() {
  if (impl_) impl_->stop_all();
}

namespace {
constexpr std::chrono::milliseconds kIdleWait{20};
}  // namespace

RunResult LocalCluster::run(const std::function<void(const MetricsSample&)>& on_sample,
                            std::chrono::milliseconds sample_every) {
  auto& im = *impl_;
  FailurePlan plan(im.ctx.config.failures);
  RunResult result;
  const auto t0 = Clock::now();
  auto last_sample = t0;
  std::uint64_t last_items = 0, last_input = 0;
  double last_recovery_ms = 0;

  for (int i = 0; i < im.topology.worker_count(); ++i) im.start(i, std::nullopt);

  auto sample = [&](Clock::time_point now) {
    MetricsSample m;
    m.t = std::chrono::duration<double>(now - t0).count();
    m.source_items = im.source_items();
    const double dt = std::chrono::duration<double>(now - last_sample).count();
    m.items_per_s = dt > 0 ? static_cast<double>(m.source_items - last_items) / dt : 0;
    m.input_items = im.input_items();
    m.input_per_s = dt > 0 ? static_cast<double>(m.input_items - std::min(m.input_items, last_input)) / dt : 0;
    for (int i = 0; i < im.topology.worker_count(); ++i) {
      const auto& c = *im.ctx.counters[i];
      if (!im.topology.stages()[im.topology.workers()[i].stage].is_source) m.items_out += c.items_out.load();
      m.state_backups += c.state_backups.load();
      m.item_backups += c.item_backups.load();
      m.backup_bytes += c.backup_bytes.load();
      m.divergence += c.divergence.load();
      m.unbacked += c.unbacked.load();
      m.unacked += c.unacked.load();
      m.trees_replayed += c.trees_replayed.load();
    }
    m.failures = result.failures.size();
    m.last_recovery_ms = last_recovery_ms;
    last_items = m.source_items;
    last_input = m.input_items;
    last_sample = now;
    return m;
  };

  std::exception_ptr error;
  for (;;) {
    // Failure plan.
    // An event due while one of its workers restarts waits until it has restored (FailurePlan::due).
    const auto ready = [&](int w) {
      const auto& s = *im.slots[static_cast<std::size_t>(w)];
      return s.done || (s.worker && s.worker->restored() && !s.worker->kill_requested());
    };
    for (const auto& e : plan.due(im.input_items(), im.source_items(),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0), ready)) {
      bool killed = false;
      for (int w : e.workers) {
        auto& s = *im.slots[w];
        if (!s.done && s.worker && !s.exited.load()) {
          s.worker->kill();
          killed = true;
        }
      }
      if (killed) ++result.failure_events;
    }
    // Exits: finished, crashed (restart), or failed (abort the run).
    bool all_done = true;
    for (int i = 0; i < im.topology.worker_count(); ++i) {
      auto& s = *im.slots[i];
      if (s.done) continue;
      all_done = false;
      if (!s.exited.load(std::memory_order_acquire)) continue;
      s.thread.join();
      if (s.error) {
        error = s.error;
        break;
      }
      if (auto rec = s.worker->recovered_from()) {
        // Killed again before it completed its recovery: still a failure (FailureRecord::recovered).
        rec->recovered = s.worker->recovery_complete();
        if (!rec->recovered) rec->missing_items = -1;
        result.failures.push_back(*rec);
        if (rec->recovered) last_recovery_ms = rec->recovery_ms;
      }
      if (s.worker->crashed()) {
        auto crash = s.worker->take_crash_info();
        crash.record.at_items = im.input_items();
        s.failures.push_back(im.ctx.counters[i]->items_in.load());
        im.start(i, std::move(crash));
      } else {
        s.done = true;
      }
    }
    if (error) break;
    if (all_done) break;
    const auto now = Clock::now();
    if (on_sample && now - last_sample >= sample_every) on_sample(sample(now));
    // Wake for an exit (a restart: at once) or, while failure points are pending, to poll them every 0.5 ms;
    // otherwise for the next sample, not 2,000 times a second (each wake-up took a core from a worker on a 2-core
    // machine).
    const auto wait = plan.pending() ? std::chrono::microseconds(500)
                      : on_sample
                          ? std::chrono::microseconds(std::min<std::chrono::milliseconds>(sample_every, kIdleWait))
                          : std::chrono::microseconds(kIdleWait);
    std::unique_lock lock(im.exit_mu);
    im.exit_cv.wait_for(lock, wait, [&] {
      return std::any_of(im.slots.begin(), im.slots.end(),
                         [](const auto& s) { return !s->done && s->exited.load(std::memory_order_acquire); });
    });
  }
  if (error) {
    im.stop_all();
    std::rethrow_exception(error);
  }
  const auto t1 = Clock::now();
  if (on_sample) on_sample(sample(t1));
  result.seconds = std::chrono::duration<double>(t1 - t0).count();
  result.source_items = im.source_items();
  for (const auto& c : im.ctx.counters) {
    result.state_backups += c->state_backups.load();
    result.item_backups += c->item_backups.load();
    result.backup_bytes += c->backup_bytes.load();
    result.duplicates_dropped += c->duplicates_dropped.load();
    result.trees_replayed += c->trees_replayed.load();
    result.latency_buckets.resize(kLatencyBuckets);
    for (std::size_t b = 0; b < kLatencyBuckets; ++b) result.latency_buckets[b] += c->latency[b].load();
    result.gaps += c->gaps.load();
    result.outputs_after_end += c->outputs_after_end.load();
    result.bad_messages += c->bad_messages.load();
  }
  summarize_checkpoints(im.ctx.counters, result);
  return result;
}

const WorkerCounters& LocalCluster::counters(int worker) const {
  return *impl_->ctx.counters.at(static_cast<std::size_t>(worker));
}

Operator* LocalCluster::final_operator(int worker) {
  auto& s = *impl_->slots.at(static_cast<std::size_t>(worker));
  return s.worker ? s.worker->op() : nullptr;
}

}  // namespace afs
