// The Space-Saving heavy-hitter operator `space-saving-hh` (issue 4): the engine-free SpaceSaving summary run on
// afstream, with a divergence under which its guarantee survives failures (proofs/space-saving.md).
//
// State: the summary (capacity keys with count and error, the total weight and the floor) and the compensation
// record (the total added by on_recovered, and how many failures it covers).
// Divergence: the largest weight any one key has received since the last backup, plus the compensation added since
// then (max over keys of W_x; O(1) per item through a table of the keys touched since the backup). A failure then
// takes at most theta + l * alpha from any one key's weight (Lemma SS1), whatever the summary did with it.
// alpha = max-weight (the largest item weight; larger items are refused), beta = 0: it emits only at finish(), every
// monitored key whose count exceeds phi, as (key, count).
// Backups: full = the summary's versioned binary form plus the compensation record; delta = the entries of the keys
// touched since the last backup (set, or erased if no longer monitored), the totals and the compensation record, or,
// once more keys were touched than the capacity, every entry (a replacing delta).
// Compensation: after the k-th recovery, for every failure j not yet compensated, c_j = floor(theta_j) + l_j * alpha
// (or the smaller measured loss) is added to every count, every error and the floor (SpaceSaving::add_to_all): every
// count stays an upper bound of the true weight (no false negatives) and count - error stays a lower bound, i.e. the
// reported error widens by the compensation (Theorem SS, proofs/space-saving.md).
// Parallel copies partitioned by key hold disjoint keys; their reports are unioned by the sink (hh-merge).
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
  // One item raises one key's weight since the backup by its weight (at most alpha), or, after an overflow, the
  // weight added to the maximum: the divergence rises by at most alpha per item (touch).
  bool divergence_bounded_by_alpha() const override { return true; }
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  void on_recovered(const RecoveryInfo& info) override;
  // A lower bound of divergence() computed from the two states alone (proofs/space-saving.md, §2): over the keys
  // monitored here, count - count' when the other state monitors the key with the error it would have if the key had
  // stayed monitored, else count - error (the weight since the key last entered), and the compensation difference.
  double distance(const Operator& other) const override;

  const SpaceSaving& summary() const { return summary_; }
  double phi() const { return phi_; }
  std::int64_t compensation() const { return compensation_; }
  std::int64_t compensated_failures() const { return compensated_failures_; }

 private:
  // The keys touched since the last backup, with the weight each received and, as of its last touch, its entry or
  // that it is no longer monitored: the next delta is these slots as they stand (no lookup in the summary). Every
  // change of an entry is a touch (the updated key, the evicted key, the compensation), so they are current.
  // Open addressing, cleared in O(touched).
  class Touched {
   public:
    Touched();
    // Records key's entry (monitored) and returns the key's weight since the backup, weight included.
    std::int64_t add(const SpaceSaving::Entry& entry, std::int64_t weight);
    void erased(std::uint64_t key);  // key is no longer monitored
    void clear();
    template <typename Set, typename Erased>
    void for_each(Set&& set, Erased&& erased) const {  // in first-touch order, without a copy
      for (const std::size_t i : filled_) {
        const Slot& s = slots_[i];
        if (s.entry.error >= 0) {
          set(s.entry);
        } else {
          erased(s.entry.key);
        }
      }
    }
    std::size_t size() const { return filled_.size(); }

   private:
    // 32 bytes, two to a cache line: no flags of their own. A free slot has weight -1 (weights are >= 0); a key no
    // longer monitored has entry.error -1 (errors are >= 0).
    struct Slot {
      SpaceSaving::Entry entry;  // entry.key is the slot's key
      std::int64_t weight = -1;
      bool used() const { return weight >= 0; }
    };
    static_assert(sizeof(Slot) == 32);
    Slot& slot(std::uint64_t key);  // the key's slot, claimed if new
    void grow();
    std::vector<Slot> slots_;
    std::vector<std::size_t> filled_;  // the used slots, in first-touch order
    int shift_;
  };

  void touch(const SpaceSaving::Entry& entry, std::int64_t weight);
  void touch_erased(std::uint64_t key);
  void stop_tracking_if_over_capacity();  // see overflow_

  SpaceSaving summary_;
  double phi_;
  std::int64_t max_weight_;
  std::int64_t compensation_ = 0;          // total added to every count by on_recovered
  std::int64_t compensated_failures_ = 0;  // how many failures that total covers
  Touched touched_;
  std::int64_t max_since_backup_ = 0;  // max over keys of the weight received since the backup
  // More keys touched than the capacity: the next delta replaces every entry (it is no larger than the list of
  // touched keys would be), the table stops, and the divergence adds every later weight to the maximum so far (an
  // upper bound of every key's weight since the backup). Keeps mode none, which never backs up, cheap.
  bool overflow_ = false;
  std::int64_t weight_since_overflow_ = 0;
  std::int64_t compensated_since_backup_ = 0;  // compensation added since the backup
};

}  // namespace afs::hh
