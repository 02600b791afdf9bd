// The online-join operators: ripple-join copies over tracked per-key samples, and the join-merge sink.
#include "algorithms/join/join_operators.h"

#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "afstream/core/errors.h"
#include "algorithms/join/join_generator.h"

namespace afs::join {

namespace {

double rate_of(const Params& p, const char* who) {
  const double rate = p.get_double("rate", 0.1);
  if (!(rate >= RippleJoin::kMinSampleRate && rate <= 1)) {
    throw ConfigError(std::string(who) + ": rate (the sample rate) must be in [2^-53, 1], got " + std::to_string(rate));
  }
  return rate;
}

}  // namespace

RippleJoinOperator::RippleJoinOperator(const Params& p, const InstanceInfo& at)
    : rate_(rate_of(p, "ripple-join")), seed_(p.get_uint("seed", 1)), copy_(at.index) {}

void RippleJoinOperator::process(const Item& item, Emitter&) {
  const Side side = side_of(item);
  if (!RippleJoin::sampled(rate_, seed_, side, static_cast<std::uint64_t>(item.time))) return;
  if (side == Side::R) {
    r_count_.add(item.key, 1);
    r_sum_.add(item.key, item.value);
    r_sumsq_.add(item.key, item.value * item.value);
  } else {
    s_count_.add(item.key, 1);
  }
}

JoinMoments RippleJoinOperator::moments() const {
  MomentAccumulator acc;
  // Keys with R samples carry every term; keys with S samples only add to n.
  r_count_.for_each([&](std::uint64_t key, std::int64_t a) {
    acc.add({a, s_count_.get(key), r_sum_.get(key), r_sumsq_.get(key)});
  });
  s_count_.for_each([&](std::uint64_t key, std::int64_t b) {
    if (!r_count_.contains(key)) acc.add({0, b, 0, 0});
  });
  return acc.result();
}

RippleJoin RippleJoinOperator::to_core() const {
  RippleJoin j(rate_, seed_);
  r_count_.for_each([&](std::uint64_t key, std::int64_t a) {
    j.add_statistics(key, {a, s_count_.get(key), r_sum_.get(key), r_sumsq_.get(key)});
  });
  s_count_.for_each([&](std::uint64_t key, std::int64_t b) {
    if (!r_count_.contains(key)) j.add_statistics(key, {0, b, 0, 0});
  });
  return j;
}

void RippleJoinOperator::finish(Emitter& out) {
  const JoinMoments m = moments();
  const double fields[kFieldCount] = {m.samples,
                                      m.pairs,
                                      m.pairs_var,
                                      m.sum_pairs,
                                      m.sum_var,
                                      m.sum_q,
                                      static_cast<double>(ledger_[0]),
                                      static_cast<double>(ledger_[1]),
                                      static_cast<double>(ledger_[2])};
  for (std::uint64_t f = 0; f < kFieldCount; ++f) {
    out.emit(static_cast<std::uint64_t>(copy_) * kFieldStride + f, std::bit_cast<std::int64_t>(fields[f]));
  }
}

void RippleJoinOperator::snapshot_full(ByteWriter& out) const {
  r_count_.write_full(out);
  s_count_.write_full(out);
  r_sum_.write_full(out);
  r_sumsq_.write_full(out);
  ledger_.write_full(out);
}

void RippleJoinOperator::snapshot_delta(ByteWriter& out) const {
  r_count_.write_delta(out);
  s_count_.write_delta(out);
  r_sum_.write_delta(out);
  r_sumsq_.write_delta(out);
  ledger_.write_delta(out);
}

void RippleJoinOperator::mark_backed_up() {
  r_count_.mark_backed_up();
  s_count_.mark_backed_up();
  r_sum_.mark_backed_up();
  r_sumsq_.mark_backed_up();
  ledger_.mark_backed_up();
}

// All or nothing: restore into copies, then move them in.
void RippleJoinOperator::restore_full(ByteReader& in) {
  auto a = r_count_, b = s_count_, s = r_sum_, q = r_sumsq_;
  auto l = ledger_;
  a.read_full(in);
  b.read_full(in);
  s.read_full(in);
  q.read_full(in);
  l.read_full(in);
  in.expect_end("ripple-join snapshot");
  r_count_ = std::move(a);
  s_count_ = std::move(b);
  r_sum_ = std::move(s);
  r_sumsq_ = std::move(q);
  ledger_ = std::move(l);
}

void RippleJoinOperator::apply_delta(ByteReader& in) {
  // Every part is read and checked before any changes, and applied in place (no copy of the maps per delta).
  const auto a = r_count_.read_delta(in);
  const auto b = s_count_.read_delta(in);
  const auto s = r_sum_.read_delta(in);
  const auto q = r_sumsq_.read_delta(in);
  const auto l = ledger_.read_delta(in);
  in.expect_end("ripple-join delta");
  r_count_.apply_delta(a);
  s_count_.apply_delta(b);
  r_sum_.apply_delta(s);
  r_sumsq_.apply_delta(q);
  ledger_.apply_delta(l);
}

// Theorem 3 (proofs/theorem3-ripple-join.md, Lemma J1): failure j loses at most theta_j sampled tuples that were not
// backed up (the divergence counts them) plus l_j items that were acknowledged but not processed, each at most
// alpha = 1 sample. The ledger adds that for every failure not counted yet, and the measured count of input items
// the state will never see, when the runtime could measure it.
void RippleJoinOperator::on_recovered(const RecoveryInfo& info) {
  const auto done = static_cast<std::size_t>(ledger_[2]);
  const std::size_t k = info.theta_by_failure.size();
  if (k <= done) return;
  double bound = 0;
  std::int64_t missing = 0;
  for (std::size_t j = done; j < k; ++j) {
    bound += info.theta_by_failure[j] + info.l_by_failure[j] * alpha();
    if (j < info.missing_by_failure.size() && info.missing_by_failure[j]) {
      missing += static_cast<std::int64_t>(*info.missing_by_failure[j]);
    }
  }
  ledger_.add(0, static_cast<std::int64_t>(std::ceil(bound)));
  ledger_.add(1, missing);
  ledger_.set(2, static_cast<std::int64_t>(k));
}

double RippleJoinOperator::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const RippleJoinOperator&>(other);
  return r_count_.distance(o.r_count_) + s_count_.distance(o.s_count_) + ledger_.distance(o.ledger_);
}

JoinMerge::JoinMerge(const Params& p)
    : rate_(rate_of(p, "join-merge")),
      confidence_(p.get_double("confidence", 0.95)),
      parallelism_(static_cast<int>(p.get_int("parallelism", 1))),
      gamma_(p.get_double("gamma", 0)) {
  (void)RippleJoin::z_for_confidence(confidence_);  // ConfigError naming the range
  if (parallelism_ < 1) throw ConfigError("join-merge: parallelism must be >= 1, got " + std::to_string(parallelism_));
  if (!(gamma_ >= 0)) throw ConfigError("join-merge: gamma must be >= 0");
}

void JoinMerge::process(const Item& item, Emitter&) {
  const std::uint64_t copy = item.key / kFieldStride, field = item.key % kFieldStride;
  if (copy >= static_cast<std::uint64_t>(parallelism_) || field >= kFieldCount) {
    throw FormatError("join-merge: item key " + std::to_string(item.key) + " is not a field of one of " +
                      std::to_string(parallelism_) + " ripple-join copies");
  }
  const double v = std::bit_cast<double>(item.value);
  if (fields_.contains(item.key) && fields_.get(item.key) == v) return;  // a resent duplicate: nothing changes
  fields_.set(item.key, v);
}

double JoinMerge::divergence() const {
  return fields_.dirty_count() > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

void JoinMerge::restore_full(ByteReader& in) {
  auto m = fields_;
  m.read_full(in);
  in.expect_end("join-merge snapshot");
  fields_ = std::move(m);
}

void JoinMerge::apply_delta(ByteReader& in) {
  const auto d = fields_.read_delta(in);  // checked first, applied without copying the map
  in.expect_end("join-merge delta");
  fields_.apply_delta(d);
}

double JoinMerge::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const JoinMerge&>(other);
  return fields_.size() == o.fields_.size() && fields_.distance(o.fields_) == 0
             ? 0.0
             : std::numeric_limits<double>::infinity();
}

bool JoinMerge::complete() const { return fields_.size() == static_cast<std::size_t>(parallelism_) * kFieldCount; }

double JoinMerge::field_sum(Field f) const {
  double s = 0;
  for (int c = 0; c < parallelism_; ++c) s += fields_.get(static_cast<std::uint64_t>(c) * kFieldStride + f);
  return s;
}

JoinMoments JoinMerge::moments() const {
  return {field_sum(kSamples),  field_sum(kPairs),  field_sum(kPairsVar),
          field_sum(kSumPairs), field_sum(kSumVar), field_sum(kSumQ)};
}

double JoinMerge::lost_sample_bound() const { return field_sum(kLostBound) + (failures() > 0 ? gamma_ : 0.0); }
double JoinMerge::missing_items() const { return field_sum(kMissingItems); }
double JoinMerge::failures() const { return field_sum(kFailures); }

JoinEstimate JoinMerge::estimate(Aggregate aggregate) const { return estimate_from(moments(), rate_, aggregate); }

Interval JoinMerge::interval(Aggregate aggregate) const {
  return interval_from(moments(), rate_, aggregate, confidence_, lost_sample_bound());
}

Interval JoinMerge::unwidened_interval(Aggregate aggregate) const {
  return interval_from(moments(), rate_, aggregate, confidence_, 0);
}

void register_join(Registry& registry) {
  registry.add_source("join-streams",
                      "two-stream join workload (r-items, s-items, keys, skew, seed, max-value; side = time & 1)",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<JoinSource>(p, at); });
  registry.add_operator(
      "ripple-join", "ripple join with Bernoulli sampling, keyed (rate, seed)",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<RippleJoinOperator>(p, at); });
  registry.add_operator("join-merge",
                        "sums ripple-join moments: estimate and Theorem 3 interval (sink; rate, confidence, "
                        "parallelism, gamma)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<JoinMerge>(p); });
}

}  // namespace afs::join
