// Parameter-server training on the threads runtime (LocalCluster; ml/ps_operators.h): BSP is deterministic for a
// seed (two runs, and none against approx, give the same weights bit for bit); SSP never lets a worker compute with
// parameters more than s clocks old (each worker's own check and each server's record); BSP, SSP and ASP reach
// held-out accuracies within 2 points of each other; and with 4 failures of every worker (approximate mode) the
// accuracy stays within 1 point of the failure-free run.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/local_cluster.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"
#include "ml/ps_operators.h"

namespace afs::ml {
namespace {

constexpr std::uint64_t kItems = 40000, kHoldout = 5000;
constexpr int kWorkers = 3, kServers = 2;

struct PsRun {
  Eigen::VectorXd model;
  double holdout_accuracy = 0;
  double max_staleness = 0, server_max_gap = 0;  // as the sink received them
  std::vector<std::int64_t> worker_staleness;    // each worker's own record
  std::vector<std::int64_t> server_gap;          // each server's record
  std::size_t failures = 0;
  double seconds = 0;
  std::uint64_t ticks_resent = 0;  // by blocked workers (ps-worker's on_blocked)
};

PsRun run_ps(const std::string& consistency, std::int64_t staleness, RunConfig config, std::uint64_t seed = 1) {
  Registry registry;
  register_ml(registry);
  register_ps(registry);
  Params p;
  p.set("data", "higgs").set("examples", kItems + kHoldout).set("seed", seed);
  p.set("task", "logistic").set("optimizer", "sgd").set("eta0", 0.5).set("l2", 1e-6).set("clip", 10.0);
  p.set("batch", std::int64_t{16}).set("workers", std::int64_t{kWorkers}).set("servers", std::int64_t{kServers});
  p.set("consistency", consistency).set("staleness", staleness);
  const Topology t = TopologyBuilder()
                         .source("source", "examples", Params().set("items", kItems))
                         .parallelism(kWorkers)
                         .stage("worker", "ps-worker", p)
                         .parallelism(kWorkers)
                         .forward()
                         .from("source")
                         .stage("server", "ps-server", p)
                         .parallelism(kServers)
                         .key_by()
                         .from("worker")
                         .stage("sink", "ps-merge", p)
                         .forward()
                         .from("server")
                         .build();
  // Failures: "all" means every worker of the job, sources included, killed at once.
  std::vector<FailureEvent> plan;
  for (const auto& f : config.failures) {
    FailureEvent e = f;
    for (int w = 0; w < static_cast<int>(t.workers().size()); ++w) e.workers.push_back(w);
    plan.push_back(e);
  }
  config.failures = plan;
  const bool with_failures = !plan.empty();
  LocalCluster cluster(t, registry, std::move(config));
  const RunResult result = cluster.run();
  PsRun out;
  out.failures = result.failures.size();
  out.seconds = result.seconds;
  const auto& merge = dynamic_cast<PsMerge&>(*cluster.final_operator(t.first_worker(t.stage_index("sink"))));
  // The workers' and servers' counters are items they emit at the end; under approximate fault tolerance a failure
  // may lose up to gamma + l * beta outputs (DESIGN 3): a server killed with a counter acknowledged but not yet
  // processed or logged loses it (seen once in about 15 runs of the failure test, ASP: a worker's count missing,
  // 26,667 of 40,000). Exact without failures; with them, what arrived is never more than what was sent.
  if (with_failures) {
    EXPECT_LE(merge.workers_reported(), kWorkers);
    EXPECT_LE(merge.servers_reported(), kServers);
    EXPECT_LE(merge.worker_total(kPsCount), static_cast<double>(kItems));
  } else {
    EXPECT_EQ(merge.workers_reported(), kWorkers);
    EXPECT_EQ(merge.servers_reported(), kServers);
    EXPECT_EQ(merge.worker_total(kPsCount), static_cast<double>(kItems));
  }
  out.model = merge.model();
  out.max_staleness = merge.max_of(kPsMaxStaleness, false);
  out.server_max_gap = merge.max_of(kPsMaxGap, true);
  for (int w = 0; w < kWorkers; ++w) {
    auto& op = dynamic_cast<PsWorkerOperator&>(*cluster.final_operator(t.first_worker(t.stage_index("worker")) + w));
    out.worker_staleness.push_back(op.max_staleness());
    out.ticks_resent += op.ticks_resent();
  }
  for (int s = 0; s < kServers; ++s) {
    auto& op = dynamic_cast<PsServerOperator&>(*cluster.final_operator(t.first_worker(t.stage_index("server")) + s));
    out.server_gap.push_back(op.max_gap());
  }
  const auto data = dataset_from(p);
  out.holdout_accuracy =
      evaluate(learner_config_from(p, data->info()), out.model, *data, kItems, kItems + kHoldout).accuracy;
  return out;
}

// Small queues: ASP's staleness is bounded only by what the queues between workers and servers hold (ml/README.md,
// "Parameter server"); with the defaults (16384 items queued, 65536 in flight) ASP workers run hundreds of clocks
// ahead of the servers.
RunConfig mode(FtMode m) {
  RunConfig c;
  c.mode = m;
  c.flow_window = 2048;
  c.queue_items = 2048;
  return c;
}

void expect_bitwise_equal(const Eigen::VectorXd& a, const Eigen::VectorXd& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a[i]), std::bit_cast<std::uint64_t>(b[i])) << what << ", weight " << i;
  }
}

TEST(PsTraining, BspIsDeterministicForASeed) {
  const auto a = run_ps("bsp", 0, mode(FtMode::Approx));
  const auto b = run_ps("bsp", 0, mode(FtMode::Approx));
  const auto c = run_ps("bsp", 0, mode(FtMode::None));
  expect_bitwise_equal(a.model, b.model, "approx twice");
  expect_bitwise_equal(a.model, c.model, "approx against none");
  EXPECT_EQ(a.max_staleness, 0);
  EXPECT_EQ(a.server_max_gap, 0);
  EXPECT_GT(a.holdout_accuracy, 0.62);  // logistic regression on the HIGGS-like data
  const auto other = run_ps("bsp", 0, mode(FtMode::Approx), 2);
  EXPECT_GT((other.model - a.model).norm(), 0);  // another seed, another model
}

TEST(PsTraining, SspNeverExceedsItsStalenessBound) {
  for (const std::int64_t s : {1, 3}) {
    const auto r = run_ps("ssp", s, mode(FtMode::Approx));
    for (const auto w : r.worker_staleness) EXPECT_LE(w, s) << "s = " << s;
    for (const auto g : r.server_gap) EXPECT_LE(g, s) << "s = " << s;
    EXPECT_LE(r.max_staleness, static_cast<double>(s));
    EXPECT_LE(r.server_max_gap, static_cast<double>(s));
    EXPECT_GT(r.holdout_accuracy, 0.62);
  }
}

TEST(PsTraining, BspSspAspReachTheSameAccuracy) {
  const auto bsp = run_ps("bsp", 0, mode(FtMode::Approx));
  const auto ssp = run_ps("ssp", 5, mode(FtMode::Approx));
  const auto asp = run_ps("asp", 0, mode(FtMode::Approx));
  EXPECT_NEAR(ssp.holdout_accuracy, bsp.holdout_accuracy, 0.02);
  EXPECT_NEAR(asp.holdout_accuracy, bsp.holdout_accuracy, 0.02);
  EXPECT_GE(asp.max_staleness, 0);
}

// Four failures of every worker, evenly from 10% to 90% of the input, approximate mode: Theta 10, L 100 (the
// servers' theta is below their alpha: they log every item and lose nothing) and Theta 1e5, L 1e3 (servers and
// workers back up rarely: a failure rolls a server back by hundreds of clocks, and the progress since is lost).
TEST(PsTraining, AccuracyAfterFourFailuresStaysWithinOnePoint) {
  for (const auto* c : {"bsp", "ssp", "asp"}) {
    // The failure-free run in approximate mode: mode none has no acknowledgements, so its senders may hold far more
    // in flight (up to the sockets' high-water marks) and ASP's staleness, so its accuracy, differs.
    const auto reference = run_ps(c, 3, mode(FtMode::Approx));
    for (const UserBounds bounds : {UserBounds{10, 100, 1000}, UserBounds{1e5, 1000, 1000}}) {
      RunConfig cfg = mode(FtMode::Approx);
      cfg.bounds = bounds;
      for (int k = 0; k < 4; ++k) {
        cfg.failures.push_back(FailureEvent{kItems / 10 + k * (kItems * 8 / 10) / 3, {}, std::nullopt});
      }
      const auto run = run_ps(c, 3, cfg);
      EXPECT_GE(run.failures, 4u) << c;
      std::printf("%s, Theta %g: holdout accuracy %.4f without failures, %.4f with %zu recoveries\n", c, bounds.theta,
                  reference.holdout_accuracy, run.holdout_accuracy, run.failures);
      EXPECT_NEAR(run.holdout_accuracy, reference.holdout_accuracy, 0.01) << c << ", Theta " << bounds.theta;
      if (std::string(c) == "ssp") {
        for (const auto w : run.worker_staleness) EXPECT_LE(w, 3) << "a restored worker checks its own staleness too";
      }
    }
  }
}

// The exact baselines run the ps job too (a probe of every mode found three of them stalling or wrong). Without
// failures each gives mode none's BSP model bit for bit: microbatch held the gradients the servers answer until the
// batch closed, which it never did, and ack mode's sink dropped its acknowledgements to the ps-workers' finish trees.
// With two failures of every worker the run ends, microbatch (a batch recomputed from its log) with none's model bit
// for bit, exact and ask (operators that wait for feedback renumber their outputs after a recovery) with its held-out
// accuracy: in ask mode, a failure of both ps-workers stalled. (Checkpoint mode: the ps job refuses it under BSP and
// SSP, whose feedback loop and aligned barriers can deadlock; PsCli.CheckpointModeIsRefusedUnderBspAndSsp.)
TEST(PsTraining, TheExactModesGiveModeNonesModel) {
  const auto none = run_ps("bsp", 0, mode(FtMode::None));
  for (const FtMode m : {FtMode::Exact, FtMode::MicroBatch, FtMode::Ask, FtMode::Ack}) {
    RunConfig cfg = mode(m);
    cfg.microbatch_interval = std::chrono::milliseconds(20);
    const auto run = run_ps("bsp", 0, cfg);
    expect_bitwise_equal(run.model, none.model, std::string(to_string(m)) + ", no failures");
    if (m == FtMode::Ack) continue;  // at least once: replayed trees count again
    cfg.failures = {FailureEvent{kItems / 3, {}, std::nullopt}, FailureEvent{kItems * 2 / 3, {}, std::nullopt}};
    const auto failed = run_ps("bsp", 0, cfg);
    EXPECT_GE(failed.failures, 2u) << to_string(m);
    if (m == FtMode::MicroBatch) {
      expect_bitwise_equal(failed.model, none.model, std::string(to_string(m)) + ", two failures of every worker");
    } else {
      EXPECT_NEAR(failed.holdout_accuracy, none.holdout_accuracy, 0.002) << to_string(m);
    }
  }
}

}  // namespace
}  // namespace afs::ml
