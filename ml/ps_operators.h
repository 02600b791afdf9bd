// Parameter-server training on afstream (issue 5, item 3): data-parallel `ps-worker`s compute mini-batch gradients
// and push them to `ps-server` shards (the model sharded by weight index), which apply them with the learner's
// optimizer and feed their weights back upstream (Emitter::feed_back); consistency BSP, SSP (staleness bound s) or
// ASP. `ps-merge` (the sink) assembles the model from the shards' final weights. ml/README.md, "Parameter server".
//
// Item layout (keys, values, times):
//   worker -> server, gradient:  (weight index, bit_cast<int64>(mean gradient of the clock), clock << 10 | worker)
//   worker -> every server, tick (Emitter::broadcast): (kTickBit | worker, clock reached, flags: 1 = send me your
//                                whole shard); clock kDoneClock: the worker finished (the shards stop waiting for it)
//   worker -> server -> sink, counters: (kMetaBit | worker << 32 | PsField, bit_cast<int64>(double))
//   server -> sink, at finish: weights (index, bits) and counters (kMetaBit | kServerBit | server << 32 | PsField)
//   server -> workers, feedback: weights (index, bits, shard clock), then (kClockBit | server, shard clock)
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/tracked_map.h"
#include "afstream/state/tracked_vector.h"
#include "ml/dataset.h"
#include "ml/learner.h"

namespace afs::ml {

enum class Consistency : std::uint8_t {
  kBsp = 1,  // bulk synchronous: a worker starts clock c + 1 once every shard has every worker's clock c
  kSsp = 2,  // stale synchronous: own clock - server clock <= staleness
  kAsp = 3,  // asynchronous: never waits
};
std::string to_string(Consistency c);
// "bsp" / "ssp" / "asp"; ConfigError naming the choices otherwise.
Consistency parse_consistency(const std::string& s);

inline constexpr std::uint64_t kPsMetaBit = std::uint64_t{1} << 63;
inline constexpr std::uint64_t kTickBit = std::uint64_t{1} << 62;    // worker -> server ticks
inline constexpr std::uint64_t kClockBit = std::uint64_t{1} << 62;   // server -> worker feedback clock markers
inline constexpr std::uint64_t kServerBit = std::uint64_t{1} << 62;  // with kPsMetaBit: a server's counter
inline constexpr std::int64_t kDoneClock = std::int64_t{1} << 40;    // a finished worker's last tick
inline constexpr int kMaxPsWorkers = 1024;                           // worker ids fit in 10 bits of a time
inline constexpr std::int64_t kMaxPsClock = (std::int64_t{1} << 22) - 1;

// Counters the workers and servers report to the sink (PsMerge).
enum PsField : std::uint32_t {
  kPsCount = 0,         // worker: examples learned (progressive validation)
  kPsCorrect = 1,       // worker: predicted correctly before the update
  kPsLossSum = 2,       // worker: progressive loss sum
  kPsClock = 3,         // worker: clocks (ticks) it completed; server: its last shard clock below kDoneClock
  kPsMaxStaleness = 4,  // worker: max (own clock - server clock) of the parameters a gradient used
  kPsMaxGap = 5,        // server: max (gradient's clock - 1 - shard clock) when it arrived (what it allowed)
  kPsSteps = 6,         // server: mini-batch gradients applied (optimizer steps)
  kPsReported = 7,      // last: the worker or server reported all its counters
};

// What every ps operator reads from its parameters: the dataset's and learner's (dataset_from,
// learner_config_from), clip (H > 0: each example's gradient is clipped to L2 norm H), batch (examples per clock,
// >= 1), workers (W in [1, 1024]), servers (S >= 1), consistency and staleness (SSP's s >= 0).
struct PsConfig {
  LearnerConfig learner;
  double clip = 10;
  std::uint64_t batch = 16;
  int workers = 1;
  int servers = 1;
  Consistency consistency = Consistency::kBsp;
  std::int64_t staleness = 5;
};
PsConfig ps_config_from(const Params& p, const DatasetInfo& info);

// The shard that holds weight `index` among `servers` (the runtime's key partitioning: ps-workers emit gradients
// keyed by weight index).
std::size_t shard_of(std::uint64_t index, int servers);

// ps-worker: receives example indices (as sgd-learner), keeps the parameters of the last clock each shard fed
// back, predicts (progressive validation) and accumulates the gradient of each example (clipped to L2 norm clip)
// over `batch` examples, then pushes the mean gradient's nonzero coordinates (in index order) and broadcasts a
// tick, and is not ready() until the consistency model lets it start its next clock (BSP: server clock >= own
// clock; SSP: own clock - server clock <= s; ASP: always), the server clock being the minimum of the shards' fed-back
// clocks. Blocked longer than block-timeout-ms (default 200) since its last tick, or blocked at all after a restore,
// it sends its latest tick again, asking for whole shards (a tick or feedback may have been lost: failures, full
// queues). At finish it pushes its partial batch, a
// kDoneClock tick and its counters.
// State: clock, shard clocks, counters, the accumulator (TrackedVector, L2: divergence) and the parameter cache
// (TrackedVector, in every full and delta backup but not in the divergence: soft state the shards refresh).
// alpha = batch * clip (a clock's end empties the accumulator), beta = weights + servers.
class PsWorkerOperator final : public Operator {
 public:
  PsWorkerOperator(const Params& p, const InstanceInfo& at);

  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;
  void on_feedback(std::span<const Item> items, Emitter& out) override;
  bool ready() const override;
  bool waits_for_feedback() const override { return true; }
  void on_blocked(Emitter& out) override;

  double alpha() const override { return static_cast<double>(config_.batch) * config_.clip; }
  double beta() const override;
  double divergence() const override { return acc_.divergence(); }
  void stop_tracking() override;
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;  // L2 distance of the accumulators

  const PsConfig& config() const { return config_; }
  std::int64_t clock() const { return clock_; }
  std::int64_t server_clock() const;  // min over the shards' fed-back clocks
  std::int64_t max_staleness() const { return max_staleness_; }
  std::uint64_t count() const { return count_; }
  std::uint64_t correct_count() const { return correct_; }
  TrackedVector::ConstView parameters() const { return cache_.values(); }
  std::uint64_t ticks_resent() const { return ticks_resent_; }  // diagnostics, not state

 private:
  void push(Emitter& out);
  void write_scalars(ByteWriter& out) const;
  void read_into(ByteReader& in, bool full);

  std::shared_ptr<const Dataset> data_;
  std::string context_;  // example_context(p)
  PsConfig config_;
  std::uint32_t worker_;
  std::int64_t block_timeout_ms_;
  std::int64_t clock_ = 0;
  std::vector<std::int64_t> shard_clock_;
  std::uint64_t in_batch_ = 0, count_ = 0, correct_ = 0;
  double loss_sum_ = 0;
  std::int64_t max_staleness_ = 0;
  TrackedVector acc_;
  TrackedVector cache_;
  // Not state.
  std::vector<std::uint32_t> touched_;  // accumulator entries touched in this clock (rebuilt on restore)
  std::int64_t last_tick_ns_ = 0;
  std::uint64_t ticks_resent_ = 0;
  Example x_;
  SparseVector g_;
};

// ps-server: one shard of the weights (those with shard_of(index) == its index) in a TrackedVector (L2), the
// optimizer state (t; AdaGrad sums), each worker's clock (the highest tick: "worker j has reached at least clock c",
// idempotent) and the pushed gradients not applied yet, per (clock, worker). A worker's gradient of clock c is
// complete once a tick >= c of that worker arrives after it; complete gradients are applied (make_step, the step
// clipped to L2 norm eta0 * clip, apply_step) in (clock, worker) order: under BSP only once the shard clock
// (min over the workers' clocks) reaches their clock, so that BSP is deterministic; under SSP and ASP at once. After
// a tick that advanced the shard clock or applied something it feeds back the weights changed since its last
// feedback (the whole shard every refresh-every shard clocks, default 64, or when a tick asks), then its clock.
// It forwards workers' counters to the sink; at finish it applies what is left and emits its weights and counters.
// divergence = L2 divergence of the weights + eta0 * L2 divergence of the pending gradients (TrackedMap keyed by
// clock << 42 | worker << 32 | index), alpha = 2 * eta0 * clip * (W under BSP, else 1): a pushed coordinate is
// clamped to [-clip, clip] and a tick applies one clock of every worker (BSP) or one of its own (SSP, ASP) when no
// tick was lost; beta = 1.
class PsServerOperator final : public Operator {
 public:
  PsServerOperator(const Params& p, const InstanceInfo& at);

  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  double alpha() const override;
  double beta() const override { return 1; }
  double divergence() const override;
  void stop_tracking() override;  // the weights and AdaGrad sums (the pending gradients are few)
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;

  TrackedVector::ConstView weights() const { return weights_.values(); }
  std::int64_t shard_clock() const;
  std::int64_t max_gap() const { return max_gap_; }
  std::uint64_t steps() const { return steps_; }
  // Gradient items of clocks already complete, from recovered workers redoing them (diagnostics, not state).
  std::uint64_t redone_dropped() const { return redone_dropped_; }
  std::size_t pending() const { return buffer_.size(); }

 private:
  using Group = std::pair<std::int64_t, std::uint32_t>;  // (clock, worker)
  void release(bool all);
  void apply_group(const Group& g);
  void feed_back(Emitter& out, bool whole);
  void rebuild_groups();
  void write_scalars(ByteWriter& out) const;
  void read_into(ByteReader& in, bool full);

  PsConfig config_;
  int shard_;
  std::int64_t refresh_every_;
  std::vector<std::uint32_t> own_;  // the weight indices of this shard (not state)
  OptimizerState opt_;
  TrackedVector weights_;
  TrackedVector sum_sq_;  // AdaGrad sums (size 0 for SGD)
  std::vector<std::int64_t> worker_clock_;
  TrackedMap<double> buffer_{Metric::L2};  // pending gradients: clock << 42 | worker << 32 | index
  std::set<Group> complete_;               // complete groups waiting for the shard clock (BSP)
  std::int64_t max_gap_ = 0;
  std::uint64_t steps_ = 0;
  std::uint64_t redone_dropped_ = 0;
  // Not state.
  std::map<Group, std::vector<std::uint32_t>> groups_;  // pending indices per group (rebuilt from buffer_)
  std::vector<std::uint32_t> changed_;                  // weights changed since the last feedback
  std::int64_t fed_clock_ = -1;
  bool whole_pending_ = true;
  SparseVector step_;
};

// ps-merge (the sink): the weights the shards emit at finish and the workers' and servers' counters. No change may
// be lost: divergence +infinity while anything is unbacked and alpha +infinity, so the runtime logs every item and
// backs the state up periodically, as for model-merge (ml/learner_operator.h). beta 0.
class PsMerge final : public Operator {
 public:
  explicit PsMerge(const Params& p);
  void process(const Item& item, Emitter& out) override;
  double alpha() const override { return std::numeric_limits<double>::infinity(); }
  double beta() const override { return 0; }
  double divergence() const override;
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;

  TrackedVector::ConstView model() const { return weights_.values(); }
  int workers() const { return config_.workers; }
  int servers() const { return config_.servers; }
  int workers_reported() const;
  int servers_reported() const;
  // Sum over the workers of a worker field; max over the workers (server = false) or servers of a field.
  double worker_total(PsField f) const;
  double max_of(PsField f, bool server) const;

 private:
  double field(bool server, int who, PsField f) const;
  PsConfig config_;
  TrackedVector weights_;
  TrackedMap<double> fields_{Metric::L1};  // key without kPsMetaBit -> value
};

void register_ps(Registry& registry);

}  // namespace afs::ml
