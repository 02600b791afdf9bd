// The operator conformance kit: a test a user runs on their own operator to check that its divergence, backups
// and restores agree (DESIGN.md sections 2, 3 and 9; like abseil's hash_testing.h). In a GoogleTest:
//
//   auto make = [] { return std::make_unique<MyOperator>(params); };
//   std::vector<afs::Item> items = ...;  // a few thousand items that exercise the state
//   EXPECT_TRUE(afs::testing::OperatorConforms(make, items));
//
// make() must return a fresh instance in the same initial state every time; items are fed in order. The checks,
// each named in the failure message by its letter:
//   (a) divergence vs brute force: the state at the last backup is kept as a second instance, restored from
//       snapshot_full at each backup point (backups at seeded random intervals, calling mark_backed_up on the
//       operator). After every item divergence() must equal distance(backup copy) (exact_divergence) or at least
//       bound it from above. +infinity on both sides (a change that must be backed up at once) agrees.
//       Right after mark_backed_up and restore_full, divergence() is 0.
//   (b) delta chain: restoring the first full snapshot and applying every later delta in order gives a state at
//       distance 0 from the operator whose snapshot_full bytes equal the operator's. Every other backup point takes
//       its delta with backup_delta (as the runtime does), the others with snapshot_delta and mark_backed_up. Each
//       delta is then applied a second time and must change nothing (a resent put is stored twice).
//   (c) snapshot/restore/continue equals an uninterrupted run, for several cut points: the state at the cut is
//       restored from its full snapshot, or at every other cut from a full snapshot taken half way there and a
//       delta; same final snapshot_full bytes, distance 0,
//       and the same emitted items (key, value, time, in order, including finish()); and the restored instance's
//       delta after its last item, applied to that chain, gives its state (a recovered worker's first backup is a
//       delta on the chain it restored). Equal bytes are required unless canonical_snapshots is off: an operator
//       whose snapshot (and iteration) order depends on history can also emit in a different order after a
//       recovery.
//   (d) restore_full of truncated full snapshots and apply_delta of truncated deltas, and of both followed by one
//       byte more, throw afs::FormatError and leave the target unchanged (distance 0 to its prior state, same
//       snapshot bytes and divergence).
//   (e) alpha and beta: no item raises a finite divergence() by more than alpha() read just before it, alpha()
//       never grows while items are processed, and no item emits more than beta() items (DESIGN.md section 2; the
//       bounds of section 3 rest on both).
//   (f) partial backups: at seeded points (ten times as often as (a)) backup_partial_delta(residual) returns at most
//   the residual, the state
//       the store then holds (first full snapshot plus every partial delta) is within what it returned, and
//       divergence() never falls below the distance to that stored state. Skipped when alpha() is not a positive
//       finite number and no partial_residual is given. An operator without partial deltas passes (whole deltas).
//   (g) mode none: an instance told stop_tracking() before its first item emits the same items as the tracked run and
//       ends with the same snapshot_full (the bytes the sink's results are read from on worker processes).
//
// Inside namespace afs, `testing::` names this namespace: write `::testing::` for GoogleTest there.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "afstream/core/item.h"
#include "afstream/core/operator.h"

namespace afs::testing {

struct ConformanceOptions {
  std::uint64_t seed = 1;  // picks the backup points and the random cut points; reported with every failure
  // Backups happen after a uniformly drawn number of items in [backup_every_min, backup_every_max].
  std::size_t backup_every_min = 1, backup_every_max = 500;
  // true: divergence() == distance(backup copy); false: divergence() >= distance(backup copy) (an upper bound,
  // e.g. a max-abs high-water mark over counters that move both ways).
  bool exact_divergence = true;
  // true: equal states have equal snapshot_full bytes, so (b) and (c) compare bytes, and mark_backed_up() must not
  // change them. false: only distances are compared (for states whose layout depends on their history, e.g. a hash
  // table written in slot order; TrackedMap writes its keys sorted), so state outside distance() goes unchecked
  // except through the emitted items. Either way (d) checks that a rejected snapshot leaves the bytes unchanged.
  bool canonical_snapshots = true;
  // Agreement of two finite values a (reported) and b (brute force): |a - b| <= tolerance * max(1, |b|).
  double tolerance = 1e-9;
  // (f): the residual asked of backup_partial_delta (it varies between half and 1.5 times this); 0: 4 * alpha().
  double partial_residual = 0;
  // (c): cut points tried besides 0, 1, n/2, n-1 and n (drawn from the seed).
  std::size_t random_cut_points = 3;
  // (d): most prefix lengths tried per snapshot; shorter snapshots try every prefix. Longer ones try the first and
  // last quarter of this many and spread the rest evenly.
  std::size_t max_truncations = 2048;
};

struct ConformanceReport {
  bool ok = true;
  std::string failure;  // the first failure: which check, the item index, and the values that disagree
};

using OperatorMaker = std::function<std::unique_ptr<Operator>()>;

// Runs checks (a)-(g) on the operators make() returns, fed with items. Stops at the first failure. An exception
// escaping the operator where none is expected is reported as a failure, not rethrown.
ConformanceReport check_operator(const OperatorMaker& make, std::span<const Item> items,
                                 const ConformanceOptions& options = {});

// check_operator as a GoogleTest assertion: EXPECT_TRUE(afs::testing::OperatorConforms(make, items)).
::testing::AssertionResult OperatorConforms(const OperatorMaker& make, std::span<const Item> items,
                                            const ConformanceOptions& options = {});

// One item an operator emitted.
struct Emitted {
  std::uint64_t key = 0;
  std::int64_t value = 0;
  std::int64_t time = 0;
  friend bool operator==(const Emitted&, const Emitted&) = default;
  // How GoogleTest prints it.
  friend void PrintTo(const Emitted& e, std::ostream* os) {
    *os << "(key=" << e.key << ", value=" << e.value << ", time=" << e.time << ")";
  }
};

// An Emitter that records everything, in order. Feedback (Emitter::feed_back) is recorded apart and not compared:
// it is soft state, lossy by design.
class RecordingEmitter final : public Emitter {
 public:
  void emit(std::uint64_t key, std::int64_t value, std::int64_t time) override { items.push_back({key, value, time}); }
  void feed_back(std::uint64_t key, std::int64_t value, std::int64_t time) override {
    fed_back.push_back({key, value, time});
  }
  std::vector<Emitted> items;
  std::vector<Emitted> fed_back;
};

}  // namespace afs::testing
