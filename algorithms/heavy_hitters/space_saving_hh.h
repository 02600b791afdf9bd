// The Space-Saving heavy-hitter operator `space-saving-hh` (issue 4): the engine-free SpaceSaving summary run on
// afstream, with a divergence under which its guarantee survives failures (proofs/space-saving.md).
//
// State: the summary (capacity keys with count and error, the total weight and the floor) and the compensation
// record (the total added by on_recovered, and how many failures it covers).
// Divergence: an upper bound of the largest weight any one key has received since the last backup, plus the
// compensation added since then: each key's weight since the backup is counted in a small Count-Min sketch of
// kSinceRows x kSinceWidth counters (32 KB, cleared at each backup), and the divergence is the largest estimate any
// key had when it was updated (O(1) per item, and never below the key's true weight since the backup). A failure
// then takes at most theta + l * alpha from any one key's weight (Lemma SS1), whatever the summary did with it.
// alpha = max-weight (the largest item weight; larger items are refused), beta = 0: it emits only at finish(), every
// monitored key whose count exceeds phi, as (key, count).
// Backups: full = the summary's versioned binary form, the compensation record and the count of items processed;
// delta = the updates processed since the last backup, in order (key, weight as varints: the summary is a deterministic
// function of its entries and the updates, ties broken by key, so replaying them rebuilds the state exactly), or, once
// more updates were logged than the capacity or a compensation was added, every entry (a replacing delta). A delta
// names the item counts it goes from and to, so one stored twice is applied once, and one applied to a state it does
// not follow is refused. Compensation: after the k-th recovery, for every failure j not yet compensated, c_j =
// floor(theta_j) + l_j * alpha (or the smaller measured loss) is added to every count, every error and the floor
// (SpaceSaving::add_to_all): every count stays an upper bound of the true weight (no false negatives) and count - error
// stays a lower bound, i.e. the reported error widens by the compensation (Theorem SS, proofs/space-saving.md).
// Parallel copies partitioned by key hold disjoint keys; their reports are unioned by the sink (hh-merge). Their
// divergences combine by max: each copy fed by key uses all of Theta (Corollary SS-P).
#pragma once

#include <cstdint>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "algorithms/heavy_hitters/space_saving.h"

namespace afs::hh {

// Parameters: capacity (monitored keys; 0 or absent: from epsilon, default 1e-4, as ceil(1 / epsilon)), phi
// (report keys whose count exceeds it), max-weight (the largest item weight: alpha, and the per-item term of the
// compensation).
class SpaceSavingHeavyHitters final : public Operator {
 public:
  explicit SpaceSavingHeavyHitters(const Params& p);
  // Throws ConfigError for the parameters the constructor rejects.
  static void validate(const Params& p);
  // The capacity a parameter set asks for: capacity, or ceil(1 / epsilon).
  static std::size_t capacity_of(const Params& p);

  // Throws InputError for an item whose weight is negative or above max-weight (alpha would not bound it).
  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  double alpha() const override { return static_cast<double>(max_weight_); }
  double beta() const override { return 0; }
  double divergence() const override {
    return static_cast<double>(max_since_backup_ + weight_since_overflow_ + compensated_since_backup_);
  }
  // One item adds its weight (at most alpha) to one key's weight since the backup, which the divergence bounds from
  // above: that bound, D = max_x W_x + C, rises by at most alpha per item, which is what the skipped checks need
  // (divergence() itself may jump further: a key's first update takes in what colliding keys put in its counters;
  // proofs/space-saving.md).
  bool divergence_bounded_by_alpha() const override { return true; }
  // Corollary P' (proofs/general-bounds.md §6; proofs/space-saving.md, Corollary SS-P): the divergence is a maximum
  // over keys, and a key's report comes from the one copy its key is routed to, so copies fed by key may each use
  // all of Theta (each starts at Theta / 2; L and Gamma are still split n ways).
  bool divergence_combines_by_max() const override { return true; }
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  // A log delta is applied by replaying its updates: a store compacting the chain would do the summary's work again.
  bool store_compacts_deltas() const override { return false; }
  void on_recovered(const RecoveryInfo& info) override;
  // A lower bound of divergence() computed from the two states alone (proofs/space-saving.md, §2): over the keys
  // monitored here, count - count' when the other state monitors the key with the error it would have if the key had
  // stayed monitored, else count - error (the weight since the key last entered), and the compensation difference.
  double distance(const Operator& other) const override;

  const SpaceSaving& summary() const { return summary_; }
  double phi() const { return phi_; }
  std::int64_t compensation() const { return compensation_; }
  std::int64_t compensated_failures() const { return compensated_failures_; }

  // The counters of the divergence sketch: key's counter in row r (tests recompute the divergence by brute force).
  static constexpr int kSinceRows = 2;
  static constexpr std::size_t kSinceWidth = 2048;
  static std::size_t since_counter(std::uint64_t key, int row);

 private:
  // An update since the last backup, as logged for the next delta (written as it lies in memory).
  struct Logged {
    std::uint64_t key;
    std::int64_t weight;
  };
  static_assert(sizeof(Logged) == 16);

  void clear_since();  // zero the sketch counters the logged updates raised (all of them after an overflow)
  void overflow();     // see overflow_

  SpaceSaving summary_;
  double phi_;
  std::int64_t max_weight_;
  std::int64_t compensation_ = 0;          // total added to every count by on_recovered
  std::int64_t compensated_failures_ = 0;  // how many failures that total covers
  std::int64_t items_ = 0;                 // items processed (in every snapshot: a delta says which state it follows)
  std::int64_t items_at_backup_ = 0;       // items_ at the last backup
  std::vector<Logged> log_;                // the updates since the last backup (until an overflow)
  std::vector<std::int64_t> since_;        // the divergence sketch, kSinceRows rows of kSinceWidth counters
  std::int64_t max_since_backup_ = 0;      // the largest estimate a key had at its update since the backup
  // More updates logged than the capacity, or a compensation since the backup: the next delta replaces every entry
  // (it is no larger than the log would be), the log and the sketch stop, and the divergence adds every later weight
  // to the maximum so far (an upper bound of every key's weight since the backup). Keeps mode none, which never
  // backs up, cheap: after `capacity` items it only adds weights.
  bool overflow_ = false;
  std::int64_t weight_since_overflow_ = 0;
  std::int64_t compensated_since_backup_ = 0;  // compensation added since the backup
};

}  // namespace afs::hh
