// Tests of the conformance kit itself: a small correct operator passes, and each kind of broken operator is caught
// by the check meant for it, with a message naming the check, the item and the values.
#include "afstream/testing/conformance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

namespace afs::testing {
namespace {

// What is wrong with a ToyCounter.
enum class Flaw {
  None,
  HalfDivergence,        // divergence() reports half the distance
  DoubleDivergence,      // divergence() reports twice the distance (an upper bound, not exact)
  LossyDelta,            // snapshot_delta leaves out slot 0
  NotAtomicRestore,      // restore_full writes values while it reads them
  AcceptsTruncated,      // restore_full fills missing values with 0 instead of throwing
  WrongException,        // a truncated snapshot throws std::out_of_range
  HiddenState,           // a count that is not in the snapshot changes what is emitted
  SmallAlpha,            // alpha() = 1 while items carry values up to 9
  SmallBeta,             // beta() = 0 while items emit
  MarkChangesState,      // mark_backed_up() zeroes slot 15
  AllOrNothing,          // divergence and distance are +inf once anything changed (correct: inf agrees with inf)
  InfiniteDistanceOnly,  // distance is +inf when anything differs, divergence stays finite
  HistoryOrderBytes,     // snapshot_full lists the slots most recently used first: equal states, different bytes
  PartialClaimsWhole,    // backup_partial_delta writes only the slots past the residual but returns 0
  GrowingAlpha,          // alpha() grows with the items seen (a bound the runtime read earlier would not hold)
  IncrementDelta,        // snapshot_delta writes each slot's increment and apply_delta adds it: right once, not twice
  UntrackedOverwrites,   // after stop_tracking() (mode none) process sets the slot to the item's value, not adds it
  NoExpectEnd,           // restore_full stops where its values end, without in.expect_end
};

// 16 counters, L1 divergence, hand-written snapshots (so that each flaw is easy to inject).
class ToyCounter final : public Operator {
 public:
  explicit ToyCounter(Flaw flaw) : flaw_(flaw), values_(kSlots, 0), base_(kSlots, 0) {
    for (std::uint32_t s = 0; s < kSlots; ++s) order_.push_back(s);
  }

  void stop_tracking() override { untracked_ = true; }
  void process(const Item& item, Emitter& out) override {
    const std::size_t s = item.key % kSlots;
    if (untracked_ && flaw_ == Flaw::UntrackedOverwrites) {  // a fast path without the bookkeeping, written wrong
      values_[s] = item.value;
      return;
    }
    std::erase(order_, static_cast<std::uint32_t>(s));
    order_.insert(order_.begin(), static_cast<std::uint32_t>(s));
    const std::int64_t old = values_[s];
    values_[s] += item.value;
    l1_ += std::llabs(values_[s] - base_[s]) - std::llabs(old - base_[s]);
    ++seen_;
    if (old / 50 != values_[s] / 50) {
      out.emit(s, values_[s] + (flaw_ == Flaw::HiddenState ? seen_ : 0), item.time);
    }
  }
  void finish(Emitter& out) override {
    for (std::size_t s = 0; s < kSlots; ++s) {
      if (values_[s] != 0) out.emit(s, values_[s]);
    }
  }
  double alpha() const override {
    if (flaw_ == Flaw::GrowingAlpha) return 9 + static_cast<double>(seen_);
    return flaw_ == Flaw::SmallAlpha ? 1 : flaw_ == Flaw::DoubleDivergence ? 18 : 9;  // the most one item adds
  }
  double beta() const override { return flaw_ == Flaw::SmallBeta ? 0 : 1; }
  double divergence() const override {
    const double d = static_cast<double>(l1_);
    switch (flaw_) {
      case Flaw::HalfDivergence:
        return d / 2;
      case Flaw::DoubleDivergence:
        return d * 2;
      case Flaw::AllOrNothing:
        return d > 0 ? kInf : 0;
      default:
        return d;
    }
  }
  void snapshot_full(ByteWriter& out) const override {
    out.put<std::uint32_t>(kFullMagic);
    if (flaw_ == Flaw::HistoryOrderBytes) {
      std::vector<std::int64_t> v;
      for (auto s : order_) v.push_back(values_[s]);
      out.put_array<std::uint32_t>(order_);
      out.put_array<std::int64_t>(v);
      return;
    }
    out.put_array<std::int64_t>(values_);
  }
  void snapshot_delta(ByteWriter& out) const override {
    out.put<std::uint32_t>(kDeltaMagic);
    std::vector<std::uint32_t> idx;
    std::vector<std::int64_t> val;
    for (std::size_t s = 0; s < kSlots; ++s) {
      if (values_[s] == base_[s] || (flaw_ == Flaw::LossyDelta && s == 0)) continue;
      idx.push_back(static_cast<std::uint32_t>(s));
      val.push_back(flaw_ == Flaw::IncrementDelta ? values_[s] - base_[s] : values_[s]);
    }
    out.put_array<std::uint32_t>(idx);
    out.put_array<std::int64_t>(val);
  }
  // Only the flawed toy writes partial deltas: the slots that moved more than the residual; it then forgets the
  // others' changes (divergence 0) although the store lacks them.
  double backup_partial_delta(ByteWriter& out, double residual) override {
    if (flaw_ != Flaw::PartialClaimsWhole) return Operator::backup_partial_delta(out, residual);
    out.put<std::uint32_t>(kDeltaMagic);
    std::vector<std::uint32_t> idx;
    std::vector<std::int64_t> val;
    for (std::size_t s = 0; s < kSlots; ++s) {
      if (static_cast<double>(std::llabs(values_[s] - base_[s])) <= residual) continue;
      idx.push_back(static_cast<std::uint32_t>(s));
      val.push_back(values_[s]);
      base_[s] = values_[s];
    }
    out.put_array<std::uint32_t>(idx);
    out.put_array<std::int64_t>(val);
    l1_ = 0;
    return 0;
  }
  void mark_backed_up() override {
    if (flaw_ == Flaw::MarkChangesState) values_[15] = 0;
    base_ = values_;
    l1_ = 0;
  }
  void restore_full(ByteReader& in) override {
    if (in.get<std::uint32_t>("toy magic") != kFullMagic) throw FormatError("toy: bad magic");
    if (flaw_ == Flaw::HistoryOrderBytes) {
      auto order = in.get_array<std::uint32_t>("toy order");
      const auto v = in.get_array<std::int64_t>("toy values");
      in.expect_end("toy snapshot");
      auto sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (std::uint32_t s = 0; s < kSlots; ++s) {
        if (sorted.size() != kSlots || sorted[s] != s || v.size() != kSlots) throw FormatError("toy: bad order");
      }
      for (std::size_t k = 0; k < kSlots; ++k) values_[order[k]] = v[k];
      order_ = std::move(order);
    } else if (flaw_ == Flaw::NotAtomicRestore || flaw_ == Flaw::AcceptsTruncated || flaw_ == Flaw::WrongException) {
      const auto n = in.get<std::uint64_t>("toy count");
      for (std::size_t s = 0; s < kSlots; ++s) {
        if (in.rest().size() < sizeof(std::int64_t)) {
          if (flaw_ == Flaw::AcceptsTruncated) {
            values_[s] = 0;
            continue;
          }
          if (flaw_ == Flaw::WrongException) throw std::out_of_range("toy: short");
        }
        values_[s] = in.get<std::int64_t>("toy value");
      }
      if (n != kSlots) throw FormatError("toy: bad count");
    } else {
      auto v = in.get_array<std::int64_t>("toy values");
      if (v.size() != kSlots) throw FormatError("toy: bad count");
      if (flaw_ != Flaw::NoExpectEnd) in.expect_end("toy snapshot");
      values_ = std::move(v);
    }
    base_ = values_;
    l1_ = 0;
  }
  void apply_delta(ByteReader& in) override {
    if (in.get<std::uint32_t>("toy magic") != kDeltaMagic) throw FormatError("toy: bad delta magic");
    const auto idx = in.get_array<std::uint32_t>("toy indices");
    const auto val = in.get_array<std::int64_t>("toy values");
    in.expect_end("toy delta");
    if (idx.size() != val.size()) throw FormatError("toy: index and value counts differ");
    for (auto i : idx) {
      if (i >= kSlots) throw FormatError("toy: index out of range");
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (flaw_ == Flaw::IncrementDelta) {
        values_[idx[k]] += val[k];
      } else {
        values_[idx[k]] = val[k];
      }
    }
    base_ = values_;
    l1_ = 0;
  }
  double distance(const Operator& other) const override {
    const auto& o = dynamic_cast<const ToyCounter&>(other);
    std::int64_t d = 0;
    for (std::size_t s = 0; s < kSlots; ++s) d += std::llabs(values_[s] - o.values_[s]);
    if (flaw_ == Flaw::AllOrNothing || flaw_ == Flaw::InfiniteDistanceOnly) return d > 0 ? kInf : 0;
    return static_cast<double>(d);
  }

 private:
  static constexpr std::size_t kSlots = 16;
  static constexpr std::uint32_t kFullMagic = 0x59594f54, kDeltaMagic = 0x44594f54;
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  Flaw flaw_;
  std::vector<std::int64_t> values_, base_;
  std::vector<std::uint32_t> order_;  // slots, most recently used first
  std::int64_t l1_ = 0;
  std::int64_t seen_ = 0;
  bool untracked_ = false;
};

std::vector<Item> toy_items(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint64_t> key(0, 1000);
  std::uniform_int_distribution<std::int64_t> value(1, 9);
  std::vector<Item> items(n);
  for (std::size_t i = 0; i < n; ++i) items[i] = {key(rng), value(rng), static_cast<std::int64_t>(i), 0};
  return items;
}

OperatorMaker maker(Flaw flaw) {
  return [flaw] { return std::make_unique<ToyCounter>(flaw); };
}

// The failure message of check_operator, which must have failed.
std::string failure_of(Flaw flaw, const ConformanceOptions& o = {}) {
  const auto items = toy_items(1500, 3);
  const ConformanceReport r = check_operator(maker(flaw), items, o);
  EXPECT_FALSE(r.ok) << "flaw " << static_cast<int>(flaw) << " was not detected";
  return r.failure;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

TEST(Conformance, CorrectOperatorPasses) {
  const auto items = toy_items(1500, 3);
  const ConformanceReport r = check_operator(maker(Flaw::None), items);
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.failure, "");
  EXPECT_TRUE(OperatorConforms(maker(Flaw::None), items));
  ConformanceOptions every_item;
  every_item.backup_every_min = every_item.backup_every_max = 1;
  EXPECT_TRUE(OperatorConforms(maker(Flaw::None), items, every_item));
  EXPECT_TRUE(OperatorConforms(maker(Flaw::None), {}));  // no items at all
}

TEST(Conformance, InfinityAgreesWithInfinity) {
  EXPECT_TRUE(OperatorConforms(maker(Flaw::AllOrNothing), toy_items(1500, 3)));
  const std::string f = failure_of(Flaw::InfiniteDistanceOnly);
  EXPECT_TRUE(contains(f, "(a) divergence")) << f;
  EXPECT_TRUE(contains(f, "distance(backup copy) = +inf")) << f;
}

TEST(Conformance, WrongDivergenceNamesTheItemAndTheValues) {
  const std::string f = failure_of(Flaw::HalfDivergence);
  // The first item moves the divergence from 0 to its value v; half of it is reported.
  const auto first = toy_items(1, 3)[0];
  const std::string half = std::to_string(first.value / 2) + (first.value % 2 ? ".5" : "");
  const std::string prefix = "(a) divergence: after item 0 (key=" + std::to_string(first.key) +
                             ", value=" + std::to_string(first.value) + ", time=0): divergence() = " + half + " but ";
  EXPECT_EQ(f.rfind(prefix, 0), 0u) << f;
  EXPECT_TRUE(contains(f, "distance(backup copy) = " + std::to_string(first.value))) << f;
  EXPECT_TRUE(contains(f, "[seed 1, 1500 items]")) << f;

  ConformanceOptions bound;
  bound.exact_divergence = false;
  EXPECT_TRUE(contains(failure_of(Flaw::HalfDivergence, bound), "is below distance(backup copy)"));
}

TEST(Conformance, UpperBoundDivergencePassesOnlyWhenExactnessIsNotRequired) {
  EXPECT_TRUE(contains(failure_of(Flaw::DoubleDivergence), "(a) divergence"));
  ConformanceOptions bound;
  bound.exact_divergence = false;
  EXPECT_TRUE(OperatorConforms(maker(Flaw::DoubleDivergence), toy_items(1500, 3), bound));
}

TEST(Conformance, LossyDeltaBreaksTheChain) {
  const std::string f = failure_of(Flaw::LossyDelta);
  EXPECT_EQ(f.rfind("(b) ", 0), 0u) << f;
  EXPECT_TRUE(contains(f, "first full snapshot + every later delta")) << f;
}

TEST(Conformance, PartialDeltaMustReportWhatItLeftOut) {
  const std::string f = failure_of(Flaw::PartialClaimsWhole);
  EXPECT_EQ(f.rfind("(f) ", 0), 0u) << f;
  EXPECT_TRUE(contains(f, "partial backup")) << f;
}

TEST(Conformance, MarkBackedUpMustNotChangeTheState) {
  EXPECT_TRUE(contains(failure_of(Flaw::MarkChangesState), "mark_backed_up() changed snapshot_full"));
}

TEST(Conformance, HistoryDependentSnapshotBytesFailUnlessDeclared) {
  const std::string f = failure_of(Flaw::HistoryOrderBytes);
  EXPECT_TRUE(f.rfind("(b) ", 0) == 0 || f.rfind("(c) ", 0) == 0) << f;
  EXPECT_TRUE(contains(f, "bytes, first difference at offset")) << f;
  ConformanceOptions lenient;
  lenient.canonical_snapshots = false;
  EXPECT_TRUE(OperatorConforms(maker(Flaw::HistoryOrderBytes), toy_items(1500, 3), lenient));
  // Lenient about bytes, still strict about everything else.
  EXPECT_TRUE(contains(failure_of(Flaw::LossyDelta, lenient), "(b) "));
  EXPECT_TRUE(contains(failure_of(Flaw::HiddenState, lenient), "(c) "));
  EXPECT_TRUE(contains(failure_of(Flaw::NotAtomicRestore, lenient), "threw FormatError but changed"));
}

TEST(Conformance, HiddenStateChangesTheEmittedItems) {
  const std::string f = failure_of(Flaw::HiddenState);
  EXPECT_EQ(f.rfind("(c) cut after ", 0), 0u) << f;
  EXPECT_TRUE(contains(f, "differs: the uninterrupted run emitted (key=")) << f;
}

TEST(Conformance, TruncatedSnapshotsMustThrowFormatErrorAndChangeNothing) {
  const std::string partial = failure_of(Flaw::NotAtomicRestore);
  EXPECT_TRUE(contains(partial, "(d) restore_full of the first ")) << partial;
  EXPECT_TRUE(contains(partial, "threw FormatError but changed")) << partial;
  const std::string accepted = failure_of(Flaw::AcceptsTruncated);
  EXPECT_TRUE(contains(accepted, "accepted, expected afs::FormatError")) << accepted;
  const std::string wrong = failure_of(Flaw::WrongException);
  EXPECT_TRUE(contains(wrong, "threw std::out_of_range (toy: short), expected afs::FormatError")) << wrong;
}

TEST(Conformance, AlphaAndBetaAreBounds) {
  const std::string a = failure_of(Flaw::SmallAlpha);
  EXPECT_EQ(a.rfind("(e) alpha: item ", 0), 0u) << a;
  EXPECT_TRUE(contains(a, "but alpha() = 1")) << a;
  const std::string b = failure_of(Flaw::SmallBeta);
  EXPECT_EQ(b.rfind("(e) beta: item ", 0), 0u) << b;
  EXPECT_TRUE(contains(b, "emitted 1 items but beta() = 0")) << b;
  const std::string g = failure_of(Flaw::GrowingAlpha);  // it may shrink (Operator::alpha_may_shrink), never grow
  EXPECT_EQ(g.rfind("(e) alpha: before item ", 0), 0u) << g;
  EXPECT_TRUE(contains(g, "alpha() grew from 9 to 10")) << g;
}

TEST(Conformance, BadOptionsAndNullOperatorsAreReported) {
  const auto items = toy_items(10, 1);
  ConformanceOptions o;
  o.backup_every_min = 10;
  o.backup_every_max = 5;
  EXPECT_TRUE(contains(check_operator(maker(Flaw::None), items, o).failure, "backup_every_min <= backup_every_max"));
  o = {};
  o.backup_every_min = 0;
  EXPECT_FALSE(check_operator(maker(Flaw::None), items, o).ok);
  o = {};
  o.tolerance = -1;
  EXPECT_TRUE(contains(check_operator(maker(Flaw::None), items, o).failure, "tolerance"));
  const auto null = check_operator([] { return std::unique_ptr<Operator>(); }, items);
  EXPECT_FALSE(null.ok);
  EXPECT_TRUE(contains(null.failure, "null operator")) << null.failure;
  const ::testing::AssertionResult r = OperatorConforms(maker(Flaw::LossyDelta), toy_items(1500, 3));
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "(b) ")) << r.message();
}

TEST(Conformance, ADeltaAppliedTwiceMustChangeNothing) {
  // A delta of increments rebuilds the chain when applied once, which is all (b) used to try; a put resent to a
  // restarted backup server is stored twice, and the recovery then counts those increments twice.
  const std::string f = failure_of(Flaw::IncrementDelta);
  EXPECT_EQ(f.rfind("(b) ", 0), 0u) << f;
  EXPECT_TRUE(contains(f, "the same delta applied a second time")) << f;
}

TEST(Conformance, ModeNoneMustEmitAndEndAsTheTrackedRun) {
  const std::string f = failure_of(Flaw::UntrackedOverwrites);
  EXPECT_EQ(f.rfind("(g) mode none", 0), 0u) << f;
  EXPECT_TRUE(contains(f, "mode none emitted")) << f;
}

TEST(Conformance, AWholeSnapshotWithTrailingBytesIsRejected) {
  const std::string f = failure_of(Flaw::NoExpectEnd);
  EXPECT_TRUE(contains(f, "(d) restore_full of the final full snapshot followed by one byte more")) << f;
  EXPECT_TRUE(contains(f, "accepted, expected afs::FormatError")) << f;
}

TEST(Conformance, SeedPicksTheBackupPoints) {
  // The lossy delta is caught at the first backup after slot 0 changed: where that is depends on the seed.
  ConformanceOptions a, b;
  a.seed = 1;
  b.seed = 2;
  const std::string fa = failure_of(Flaw::LossyDelta, a), fb = failure_of(Flaw::LossyDelta, b);
  EXPECT_NE(fa, fb);
  EXPECT_EQ(fa, failure_of(Flaw::LossyDelta, a));  // deterministic
}

}  // namespace
}  // namespace afs::testing
