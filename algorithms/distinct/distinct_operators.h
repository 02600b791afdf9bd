// Distinct counting on afstream, written against the operator API as a user would (issue 4):
//
//   distinct-hll   a HyperLogLog whose 2^p registers are a TrackedArray (max-abs divergence: the largest rise of a
//                  register since the last backup; registers only rise). alpha = the largest rank, 64 - p + 1 (one
//                  item can lift an empty register that far); beta = 0 (it emits only at the end: every non-empty
//                  register as (index, rank)). Parallel copies partitioned by key see disjoint keys, so their
//                  register-wise maximum is the sketch of the whole stream.
//   hll-merge      the sink: the register-wise maximum of what the copies emit, and its estimate.
//
// After a failure a restored register may lack at most theta + l * alpha of rank (DESIGN 3), so the estimate can
// only fall, never rise, because of failures (a register holds a maximum).
#pragma once

#include <cstdint>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/tracked_array.h"

namespace afs::distinct {

// The state both operators share: the 2^precision registers of a HyperLogLog in a tracked array (max-abs
// divergence, partial deltas), its backups and restores, alpha (the largest rank), beta 0, and the estimate.
class HllRegisters : public Operator {
 public:
  double alpha() const override;
  double beta() const override { return 0; }
  double divergence() const override { return registers_.divergence(); }
  void stop_tracking() override { registers_.stop_tracking(); }       // mode none: no backups, no bookkeeping for them
  bool divergence_bounded_by_alpha() const override { return true; }  // one register rises by at most max rank
  void snapshot_full(ByteWriter& out) const override { registers_.write_full(out); }
  void snapshot_delta(ByteWriter& out) const override { registers_.write_delta(out); }
  void mark_backed_up() override { registers_.mark_backed_up(); }
  double backup_partial_delta(ByteWriter& out, double residual) override {
    return registers_.backup_partial_delta(out, residual);
  }
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;  // other is an HllRegisters of the same precision

  int precision() const { return precision_; }
  double estimate() const;
  // The registers' ranks in index order, as HyperLogLog::estimate takes them (tests, proofs/hyperloglog.md).
  std::vector<std::uint8_t> ranks() const;

 protected:
  explicit HllRegisters(int precision);
  // Raises register i to rank if it is lower (registers hold maxima).
  void raise(std::size_t i, std::int64_t rank) {
    if (registers_[i] < rank) registers_.set(i, rank);
  }
  const TrackedArray<std::int64_t>& registers() const { return registers_; }

 private:
  int precision_;
  TrackedArray<std::int64_t> registers_;
};

// Parameters: precision (2^precision registers; or epsilon, a relative standard error that sizes it), seed.
class HllOperator final : public HllRegisters {
 public:
  explicit HllOperator(const Params& p);
  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

 private:
  std::uint64_t seed_;
};

// The sink: (register index, rank) items from the copies, merged by maximum. Parameters: precision.
class HllMerge final : public HllRegisters {
 public:
  explicit HllMerge(const Params& p);
  void process(const Item& item, Emitter& out) override;
};

// The precision given by a parameter set: precision, or the smallest one whose standard error is at most epsilon.
int precision_of(const Params& p);

void register_distinct(Registry& registry);

}  // namespace afs::distinct
