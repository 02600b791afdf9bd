// Heavy hitters on afstream, written against the operator API exactly as a user would (PAPER: Theorem 2).
//
//   zipf            source: a seeded Zipf stream (ZipfGenerator), split across the source's parallel instances.
//   count-min-hh    a Count-Min sketch whose counters are a BlockTrackedArray (max-abs divergence bounded per block
//                   of counters, alpha = the largest item weight); reports a key (emits key, estimate) the first time
//                   its estimate exceeds phi, and at the end emits the final estimate of every reported or watched key
//                   above phi. The set of reported keys is protected exactly (a new one makes the divergence infinite,
//                   so it is backed up at once); keys watched from phi - watch-margin ride along with the next backup.
//                   After its k-th recovery it adds floor(theta_j) + l_j to every counter for every failure j not yet
//                   compensated (Theorem 2, proofs/theorem2-count-min.md), so no heavy hitter is missed.
//   space-saving-hh the Space-Saving alternative to count-min-hh (space_saving_hh.h; registered here too).
//   hh-merge        the sink: the latest estimate of every reported key, merged over the parallel instances.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <unordered_map>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/block_tracked_array.h"
#include "afstream/state/tracked_array.h"
#include "afstream/state/tracked_map.h"
#include "algorithms/heavy_hitters/count_min.h"
#include "algorithms/heavy_hitters/zipf.h"

namespace afs::hh {

// Parameters: items, keys, skew, seed (see ZipfParams).
ZipfParams zipf_params(const Params& p);

// Item weights: unit (every item counts 1) or packet (a packet size in bytes, 40..1500, drawn per position from
// the seed, as in the paper's packet trace where heavy hitters are flows with many bytes).
enum class Weights { Unit, Packet };
Weights parse_weights(const std::string& s);  // throws ConfigError
std::int64_t max_weight(Weights w);
std::int64_t packet_bytes(std::uint64_t seed, std::uint64_t position);

// The Zipf stream with weights; parameters as zipf_params plus weights=unit|packet.
class ZipfSource final : public Source {
 public:
  ZipfSource(const Params& p, const InstanceInfo& at);
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;
  const ZipfGenerator& generator() const { return gen_; }

 private:
  ZipfGenerator gen_;
  Weights weights_;
  std::uint64_t begin_ = 0;
  std::uint64_t end_ = 0;
};

// Exact ground truth of the whole stream (all source instances): key -> total weight. Counted by rank in a flat
// array when the key space is small enough (up to 2^25 keys, or twice the stream's items), as hashing every item
// into the map took about twice the job's own run time.
std::unordered_map<std::uint64_t, std::int64_t> exact_weights(const Params& source_params);

// A job's Zipf options (keys, skew), checked before any worker starts, with the options named in the ConfigError
// (a worker process that built the generator stopped with "ZipfGenerator: skew must be ...", and the run with
// "worker 0 stopped with exit status 2"): keys in [1, ZipfGenerator::kMaxKeys], skew finite and >= 0.
void check_zipf_options(const std::string& keys_option, std::uint64_t keys, const std::string& skew_option,
                        double skew);

// Writes every item of the Zipf stream source_params names (ZipfSource's parameters, all instances' items in order)
// as the file source reads them back: a "key,value" line each (`afstream gen`; `path` names out in errors). Calls
// progress(items written, total) after each chunk when given. Returns the items written.
std::uint64_t write_zipf_stream(const Params& source_params, std::ostream& out, const std::string& path,
                                const std::function<void(std::uint64_t, std::uint64_t)>& progress);

// The watch-margin a job gives count-min-hh in approximate mode: the most that failures can take from one copy's
// counters (proofs/theorem2-count-min.md, CM-R'). In general theta + l * alpha / copies (the key-partitioned copies
// each use all of Theta; L is split among them). Behind replayable sources nothing acknowledged is lost
// (Proposition S): a recovered copy lacks only what its partial backups left unwritten, which backup_partial_delta
// caps at residual-share * phi <= phi / 4 over all failures (CM2'), so a margin of phi / 4 covers it and
// the margin is the smaller of the two. With phi far below Theta
// (NEXMark hot items: phi ~ 400 bids, Theta 1e5) the general margin watched every key.
double count_min_watch_margin(double theta, double l, double alpha, int copies, double phi,
                              bool behind_replayable_sources);

// The default divergence-block of count-min-hh: counters per block of its BlockTrackedArray. One: each counter's
// drift exactly, the same backups as per-counter tracking, and no backed-up copy. Bigger blocks make the bound
// array smaller but backups more frequent and larger, each comparing the blocks' slots with a backed-up copy; on the
// heavy-hitter job's sketch (4 x 8,000, Zipf 0.9, packet weights, hh_benchmark BM_CountMinHhProcess/50000/B) every
// block above 1 costs more (experiments/results/count-min-blocks, count-min-bounds).
inline constexpr std::uint64_t kCountMinDivergenceBlock = 1;

// The default residual-share of count-min-hh: its partial deltas leave at most share * phi / 2^(k + 1) unwritten in
// the incarnation that has compensated k failures, so that the residuals added back to every counter after any number
// of failures sum to at most share * phi: phi / 256, which keeps keys just below phi from being lifted past it (at
// 1/4, Count-Min at the heavy-hitter job's setting A lost 2-4 points of precision after 10 failures on streams of 1e6
// and 3e6 items, 5 seeds: experiments/results/residual-cap). Long streams, whose phi is far above the residual the
// runtime asks, are not affected; on 1e7 items it costs the heavy-hitter job about 4 points of approx's throughput
// (81% -> 77% of none, 1.5 times the backup bytes), which --hh.residual-share 0.25 gives back.
inline constexpr double kResidualShare = 1.0 / 256;
// ConfigError naming hh.residual-share unless share is in (0, 0.25] (NaN included): the watch margin behind
// replayable sources (count_min_watch_margin, phi / 4) must cover it.
void check_residual_share(double share);

// Parameters: width and depth (or epsilon and delta), seed, phi (report keys whose count exceeds phi), max-weight
// (the largest item value: alpha, and the per-item term of the compensation), watch-margin (keys are watched from
// phi - watch-margin so that one whose crossing item was lost in a failure is still re-checked at the end),
// residual-share (in (0, 1/4], default kResidualShare: the most the residuals of partial deltas add back over all
// failures, as a share of phi), divergence-block (a power of two, default kCountMinDivergenceBlock: the divergence
// bounds each run of that many counters of a row by the sum of what they moved; 1: each counter exactly). It is lowered
// to the largest power of two that divides the width, so that rows never share a block and one item moves the
// divergence by at most alpha.
class CountMinHeavyHitters final : public Operator {
 public:
  explicit CountMinHeavyHitters(const Params& p);
  // Throws ConfigError for the parameters the constructor rejects, without allocating the counters.
  static void validate(const Params& p);

  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  double alpha() const override { return static_cast<double>(max_weight_); }  // one item moves a counter this much
  double beta() const override { return 1; }                                  // a key is reported at most once per item
  // The counters move by at most alpha per item; a report (which emits) jumps to infinity to force a backup.
  bool divergence_bounded_by_alpha() const override { return true; }
  // Max-abs over the counters, and a key's estimate comes from its own copy's counters only (Corollary P(3) of
  // proofs/general-bounds.md): key-partitioned copies each use all of Theta.
  bool divergence_combines_by_max() const override { return true; }
  double divergence() const override {
    return reported_since_backup_ ? std::numeric_limits<double>::infinity() : counters_.divergence();
  }
  void stop_tracking() override { counters_.stop_tracking(); }  // mode none: no backups, no bookkeeping for them
  // The counters' divergence measured by a pass at each backup instead of a bound per counter kept at every update.
  void measure_divergence_at_backups() override { counters_.measure_at_backups(); }
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  // A whole delta (what the runtime asks when the residual is 0: ft.delta-residual 0, or thresholds halved below
  // the room for one) through the counters' whole-delta path: one pass when measured at backups (snapshot_delta and
  // mark_backed_up make three), and the list of every block changed when tracked. The same payload.
  void backup_delta(ByteWriter& out) override { backup_partial_delta(out, 0); }
  double backup_partial_delta(ByteWriter& out, double residual) override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  void on_recovered(const RecoveryInfo& info) override;
  double distance(const Operator& other) const override;

  std::int64_t estimate(std::uint64_t key) const { return hash_.estimate(counters_, key); }
  const CountMinHash& hash() const { return hash_; }
  std::size_t divergence_block() const { return counters_.block(); }         // as used: divergence-block, lowered
  std::vector<std::int64_t> counters() const { return counters_.values(); }  // a copy, row-major
  std::vector<std::uint64_t> reported_keys() const;                          // sorted
  double phi() const { return phi_; }
  std::int64_t compensation() const { return compensation_.get(0); }

 private:
  CountMinHash hash_;
  double phi_;
  std::int64_t max_weight_;
  double watch_from_;      // keys are watched (candidates) once their estimate exceeds this: phi - watch-margin
  double residual_share_;  // the residuals added back over all failures stay below residual_share_ * phi
  BlockTrackedArray<std::int64_t> counters_;
  // Watched (1) and reported (2) keys. Both are part of every backup; a new report is backed up at once
  // (divergence() is infinite until then), a new watched key with the next backup (proofs/theorem2-count-min.md,
  // Proposition CM-R': the watch set only has to follow the state's own history). Behind replayable sources with a
  // remote store the runtime backs up by its cost rule instead, and a restore before a report makes the replay
  // report the key again (Proposition CM-R, the exception in the proof of (1)).
  TrackedMap<std::int64_t> candidates_;
  bool reported_since_backup_ = false;
  // [0]: total added to every counter by on_recovered; [1]: how many failures that covers. Part of the state, so
  // a crash during recovery never loses or repeats a compensation.
  TrackedArray<std::int64_t> compensation_{2, Metric::MaxAbs};
};

// The sink: key -> latest estimate. Divergence: L1 of the estimate changes since the last backup. No report may be
// lost (a copy that has finished never sends its reports again, and a lost one is a false negative, against Theorem
// 2): alpha +infinity, so the runtime logs every report and backs the state up periodically, as for join-merge and
// ps-merge. (alpha was the stream size, which a Theta of twice the NEXMark job's bids passed: a sink failure at the
// end of the stream then lost reports within its theta, and recall fell to 0.48.)
class HeavyHitterMerge final : public Operator {
 public:
  explicit HeavyHitterMerge(const Params& p);
  void process(const Item& item, Emitter& out) override;
  double alpha() const override { return std::numeric_limits<double>::infinity(); }
  double beta() const override { return 0; }
  double divergence() const override { return estimates_.divergence(); }
  void snapshot_full(ByteWriter& out) const override { estimates_.write_full(out); }
  void snapshot_delta(ByteWriter& out) const override { estimates_.write_delta(out); }
  void mark_backed_up() override { estimates_.mark_backed_up(); }
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;

  std::unordered_map<std::uint64_t, std::int64_t> results() const;

 private:
  TrackedMap<std::int64_t> estimates_;
};

void register_heavy_hitters(Registry& registry);

}  // namespace afs::hh
