// The online join on afstream, written against the operator API as a user would (issue 4, item 2; PAPER
// Theorem 3, proofs/theorem3-ripple-join.md):
//
//   join-streams  source: the two-stream workload of join_generator.h (side in the low bit of Item::time).
//   ripple-join   parallel, keyed by the join key (copies see disjoint keys). Bernoulli-samples each tuple with the
//                 hash coin of RippleJoin::sampled and keeps the per-key sampled statistics in TrackedMaps (a_k,
//                 b_k, A_k, Q_k). Divergence: the number of sampled tuples not yet backed up (the L1 change of the
//                 count maps, which only grow), plus the L1 change of its small recovery ledger. alpha = 1 (an item
//                 is at most one sample), beta = 0 (it emits only in finish: its JoinMoments, the samples a failure
//                 may have lost, and the failures it went through). After its k-th recovery (on_recovered) it adds
//                 theta_j + l_j * alpha for every failure j not yet counted to its lost-sample bound: the samples
//                 the recovered state may lack, which Theorem 3 subtracts from n.
//   join-merge    the sink: sums the copies' moments and lost-sample bounds (copies see disjoint keys, so their
//                 moments add up to those of the whole sample) and yields the estimate and the Theorem 3 interval.
//                 Every field it receives is backed up at once (divergence +infinity until then): losing one would
//                 lose a whole copy's share.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/tracked_array.h"
#include "afstream/state/tracked_map.h"
#include "algorithms/join/ripple_join.h"

namespace afs::join {

// What a ripple-join copy emits in finish, one item per field: key = copy * kFieldStride + field, value = the
// field's double, bit for bit (std::bit_cast), time = 0.
enum Field : std::uint64_t {
  kSamples = 0,
  kPairs,
  kPairsVar,
  kSumPairs,
  kSumVar,
  kSumQ,
  kLostBound,     // sum over this copy's failures j of theta_j + l_j * alpha (samples the state may lack)
  kMissingItems,  // measured: input items the recovered state never saw (RecoveryInfo::missing_by_failure)
  kFailures,      // recoveries this copy went through
  kFieldCount
};
inline constexpr std::uint64_t kFieldStride = 16;

// Parameters: rate (sample rate, (0, 1]), seed (of the coin). InstanceInfo::index numbers the emitted fields.
class RippleJoinOperator final : public Operator {
 public:
  RippleJoinOperator(const Params& p, const InstanceInfo& at);

  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  double alpha() const override { return 1; }  // one item, at most one sampled tuple
  double beta() const override { return 0; }   // emits only in finish
  double divergence() const override { return r_count_.divergence() + s_count_.divergence() + ledger_.divergence(); }
  // process() adds at most one sample to one count map (L1: the divergence rises by at most alpha = 1); only
  // on_recovered moves the ledger. The runtime may then skip the Theta check for items that cannot reach theta.
  bool divergence_bounded_by_alpha() const override { return true; }
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  void on_recovered(const RecoveryInfo& info) override;
  double distance(const Operator& other) const override;

  double sample_rate() const { return rate_; }
  JoinMoments moments() const;
  // The same statistics as an engine-free RippleJoin (tests compare the two).
  RippleJoin to_core() const;
  double lost_sample_bound() const { return static_cast<double>(ledger_[0]); }
  std::int64_t missing_items() const { return ledger_[1]; }
  std::int64_t failures() const { return ledger_[2]; }

 private:
  double rate_;
  std::uint64_t seed_;
  int copy_;
  TrackedMap<std::int64_t> r_count_{Metric::L1};  // a_k
  TrackedMap<std::int64_t> s_count_{Metric::L1};  // b_k
  TrackedMap<std::int64_t> r_sum_{Metric::L1};    // A_k (changes only with a_k: not counted in the divergence)
  TrackedMap<std::int64_t> r_sumsq_{Metric::L1};  // Q_k (likewise)
  // [0] lost-sample bound, [1] measured missing items, [2] failures counted. Part of the state, so that a crash
  // during recovery neither loses nor repeats a failure's term.
  TrackedArray<std::int64_t> ledger_{3, Metric::L1};
};

// Parameters: rate, confidence (in (0, 1), default 0.95), parallelism (copies expected), gamma (the Gamma term of
// Theorem 3: the join's upstream may lose up to Gamma unacknowledged tuples, each at most one sample; charged once
// any copy has failed; default 0).
// No received field may be lost: divergence +infinity while one is unbacked and alpha +infinity, so the runtime logs
// every item and backs the state up periodically (as model-merge, ml/learner_operator.h).
class JoinMerge final : public Operator {
 public:
  explicit JoinMerge(const Params& p);
  void process(const Item& item, Emitter& out) override;

  double alpha() const override { return std::numeric_limits<double>::infinity(); }
  double beta() const override { return 0; }
  double divergence() const override;  // +infinity while a received field is not backed up, else 0
  void snapshot_full(ByteWriter& out) const override { fields_.write_full(out); }
  void snapshot_delta(ByteWriter& out) const override { fields_.write_delta(out); }
  void mark_backed_up() override { fields_.mark_backed_up(); }
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;  // 0 if equal, +infinity otherwise

  // Whether every copy's every field arrived.
  bool complete() const;
  JoinMoments moments() const;       // summed over the copies
  double lost_sample_bound() const;  // Theorem 3's M: the copies' bounds, plus gamma once any copy failed
  double missing_items() const;      // measured, summed over the copies
  double failures() const;           // recoveries of the copies, summed
  JoinEstimate estimate(Aggregate aggregate = Aggregate::Count) const;
  // The Theorem 3 interval at the sink's confidence: n - M samples (M = 0 when no copy failed).
  Interval interval(Aggregate aggregate = Aggregate::Count) const;
  // The plain CLT interval, as if nothing had been lost.
  Interval unwidened_interval(Aggregate aggregate = Aggregate::Count) const;
  double confidence() const { return confidence_; }
  double sample_rate() const { return rate_; }

 private:
  double field_sum(Field f) const;
  double rate_;
  double confidence_;
  int parallelism_;
  double gamma_;
  TrackedMap<double> fields_{Metric::L1};  // copy * kFieldStride + field -> value
};

void register_join(Registry& registry);

}  // namespace afs::join
