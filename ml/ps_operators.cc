// Parameter-server operators: ps-worker, ps-server and the ps-merge sink (ps_operators.h).
#include "ml/ps_operators.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/topology.h"
#include "ml/learner_operator.h"

namespace afs::ml {

namespace {

constexpr std::uint32_t kWorkerTag = 0x4B575350;  // "PSWK"
constexpr std::uint32_t kServerTag = 0x56535350;  // "PSSV"
constexpr std::uint32_t kMergeTag = 0x4D535350;   // "PSSM"
constexpr std::uint16_t kVersion = 1;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void check_header(ByteReader& in, std::uint32_t tag, const char* who) {
  if (in.get<std::uint32_t>("tag") != tag) throw FormatError(std::string(who) + ": not a " + who + " state");
  if (const auto v = in.get<std::uint16_t>("version"); v != kVersion) {
    throw FormatError(std::string(who) + ": unsupported state version " + std::to_string(v));
  }
}

std::uint64_t pack(std::int64_t clock, std::uint32_t worker, std::uint32_t index) {
  return static_cast<std::uint64_t>(clock) << 42 | static_cast<std::uint64_t>(worker) << 32 | index;
}

}  // namespace

std::string to_string(Consistency c) {
  switch (c) {
    case Consistency::kBsp:
      return "bsp";
    case Consistency::kSsp:
      return "ssp";
    case Consistency::kAsp:
      return "asp";
  }
  return "unknown";
}

Consistency parse_consistency(const std::string& s) {
  if (s == "bsp") return Consistency::kBsp;
  if (s == "ssp") return Consistency::kSsp;
  if (s == "asp") return Consistency::kAsp;
  throw ConfigError("consistency: expected bsp, ssp or asp, got '" + s + "'");
}

PsConfig ps_config_from(const Params& p, const DatasetInfo& info) {
  PsConfig c;
  c.learner = learner_config_from(p, info);
  if (weight_count(c.learner) > (std::size_t{1} << 32)) {
    throw ConfigError("ps: the model has " + std::to_string(weight_count(c.learner)) +
                      " weights; the parameter server takes at most 2^32");
  }
  c.clip = p.get_double("clip", 10);
  if (!(c.clip > 0) || !std::isfinite(c.clip)) {
    throw ConfigError("clip: the gradient bound H must be a finite number > 0, got " + std::to_string(c.clip));
  }
  const auto batch = p.get_int("batch", 16);
  if (batch < 1 || batch > (std::int64_t{1} << 30)) {
    throw ConfigError("batch: expected examples per clock in [1, 2^30], got " + std::to_string(batch));
  }
  c.batch = static_cast<std::uint64_t>(batch);
  const auto w = p.get_int("workers", 1), s = p.get_int("servers", 1);
  if (w < 1 || w > kMaxPsWorkers) throw ConfigError("workers: expected [1, 1024], got " + std::to_string(w));
  if (s < 1 || s > 65536) throw ConfigError("servers: expected [1, 65536], got " + std::to_string(s));
  c.workers = static_cast<int>(w);
  c.servers = static_cast<int>(s);
  c.consistency = parse_consistency(p.get_string("consistency", "bsp"));
  c.staleness = p.get_int("staleness", 5);
  if (c.staleness < 0 || c.staleness > 1'000'000) {
    throw ConfigError("staleness: expected clocks in [0, 1000000], got " + std::to_string(c.staleness));
  }
  return c;
}

std::size_t shard_of(std::uint64_t index, int servers) {
  return key_partition(index, static_cast<std::size_t>(servers));
}

// ---------------------------------------------------------------------------------------------------------------
// ps-worker

PsWorkerOperator::PsWorkerOperator(const Params& p, const InstanceInfo& at)
    : data_(dataset_from(p)),
      context_(example_context(p)),
      config_(ps_config_from(p, data_->info())),
      worker_(static_cast<std::uint32_t>(at.index)),
      block_timeout_ms_(p.get_int("block-timeout-ms", 200)),
      shard_clock_(static_cast<std::size_t>(config_.servers), 0),
      acc_(weight_count(config_.learner), Metric::L2),
      cache_(weight_count(config_.learner), Metric::L2) {
  if (at.index >= config_.workers) {
    throw ConfigError("workers: ps-worker instance " + std::to_string(at.index) +
                      " of a job with workers = " + std::to_string(config_.workers));
  }
  if (block_timeout_ms_ < 1) {
    throw ConfigError("block-timeout-ms: expected >= 1, got " + std::to_string(block_timeout_ms_));
  }
}

double PsWorkerOperator::beta() const {
  return static_cast<double>(weight_count(config_.learner)) + static_cast<double>(config_.servers);
}

std::int64_t PsWorkerOperator::server_clock() const {
  return *std::min_element(shard_clock_.begin(), shard_clock_.end());
}

bool PsWorkerOperator::ready() const {
  switch (config_.consistency) {
    case Consistency::kBsp:
      return server_clock() >= clock_;
    case Consistency::kSsp:
      return clock_ - server_clock() <= config_.staleness;
    case Consistency::kAsp:
      return true;
  }
  return true;
}

void PsWorkerOperator::process(const Item& item, Emitter& out) {
  if (item.key >= data_->size()) {
    throw InputError("ps-worker: example index " + std::to_string(item.key) + " is outside the dataset of " +
                     std::to_string(data_->size()) + " examples");
  }
  data_->example(item.key, x_);
  const auto& w = cache_.values();
  Prediction pred;
  double l = 0;
  double norm = 0;
  try {  // nothing has changed yet when the example is refused
    pred = predict(config_.learner, w, x_);
    l = loss(config_.learner, w, x_);
    gradient(config_.learner, w, x_, g_);
    norm = l2_norm_of([&](auto&& f) {
      for (const double v : g_.value) f(v);
    });
    if (!std::isfinite(norm)) throw InputError(kNonFiniteStep);
  } catch (const InputError& e) {
    rethrow_for_example("ps-worker", context_, item.key, e);
  }
  loss_sum_ += l;
  correct_ += correct(config_.learner, pred, x_) ? 1 : 0;
  ++count_;
  // The parameters are those of server clock server_clock(); this gradient belongs to clock clock_ + 1.
  max_staleness_ = std::max(max_staleness_, clock_ - server_clock());
  const double scale = norm > config_.clip ? config_.clip / norm * (1 - 1e-12) : 1.0;
  for (std::size_t k = 0; k < g_.size(); ++k) {
    const auto i = g_.index[k];
    if (acc_.get(i) == 0) touched_.push_back(i);
    acc_.add(i, g_.value[k] * scale);
  }
  if (++in_batch_ == config_.batch) push(out);
}

// The end of a clock: the summed gradient's nonzero coordinates in index order, then the tick.
void PsWorkerOperator::push(Emitter& out) {
  if (clock_ >= kMaxPsClock) {
    throw RuntimeError("ps-worker: clock " + std::to_string(clock_) + " reached the limit of " +
                       std::to_string(kMaxPsClock) + " (use a larger learn.batch)");
  }
  ++clock_;
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  const std::int64_t time = clock_ << 10 | worker_;
  const double n = static_cast<double>(in_batch_);
  for (const auto i : touched_) {
    const double v = acc_.get(i);
    if (v == 0) continue;
    out.emit(i, std::bit_cast<std::int64_t>(v / n), time);  // the mean over the clock's examples
    acc_.set(i, 0);
  }
  touched_.clear();
  in_batch_ = 0;
  out.broadcast(kTickBit | worker_, clock_, 0);
  last_tick_ns_ = now_ns();
}

void PsWorkerOperator::on_blocked(Emitter& out) {
  const auto now = now_ns();
  if (now - last_tick_ns_ < block_timeout_ms_ * 1'000'000) return;
  last_tick_ns_ = now;
  ++ticks_resent_;
  out.broadcast(kTickBit | worker_, clock_, 1);  // again, asking for whole shards
}

void PsWorkerOperator::on_feedback(std::span<const Item> items, Emitter&) {
  const auto n = cache_.size();
  for (const auto& it : items) {
    if (it.key & kClockBit) {
      const auto s = static_cast<std::size_t>(it.key & 0xffffffffu);
      if (s < shard_clock_.size()) shard_clock_[s] = std::max(shard_clock_[s], it.value);
    } else if (it.key < n) {
      // A weight of a shard clock older than one this worker already has from that shard comes from a restored
      // server that has not caught up yet (its clock rolled back to its backup): taking it would set the cache back
      // to older parameters than the clock this worker's consistency check counts on (BSP's determinism in the exact
      // modes, SSP's staleness bound). The server sends it again when it changes at a later clock, with the whole
      // shard every refresh-every clocks, or when a blocked worker asks.
      const auto s = shard_of(it.key, config_.servers);
      if (it.time < shard_clock_[s]) continue;
      const double v = std::bit_cast<double>(it.value);
      if (cache_.get(it.key) != v) cache_.set(it.key, v);
    }
  }
}

void PsWorkerOperator::finish(Emitter& out) {
  if (in_batch_ > 0) push(out);
  out.broadcast(kTickBit | worker_, kDoneClock, 0);
  const std::uint64_t base = kPsMetaBit | static_cast<std::uint64_t>(worker_) << 32;
  const auto meta = [&](PsField f, double v) { out.emit(base | f, std::bit_cast<std::int64_t>(v)); };
  meta(kPsCount, static_cast<double>(count_));
  meta(kPsCorrect, static_cast<double>(correct_));
  meta(kPsLossSum, loss_sum_);
  meta(kPsClock, static_cast<double>(clock_));
  meta(kPsMaxStaleness, static_cast<double>(max_staleness_));
  meta(kPsReported, 1);
}

void PsWorkerOperator::write_scalars(ByteWriter& out) const {
  out.put<std::uint32_t>(kWorkerTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::int64_t>(clock_);
  out.put<std::uint64_t>(in_batch_);
  out.put<std::uint64_t>(count_);
  out.put<std::uint64_t>(correct_);
  out.put<double>(loss_sum_);
  out.put<std::int64_t>(max_staleness_);
  out.put_array<std::int64_t>(shard_clock_);
}

void PsWorkerOperator::snapshot_full(ByteWriter& out) const {
  write_scalars(out);
  acc_.write_full(out);
  cache_.write_full(out);
}

void PsWorkerOperator::snapshot_delta(ByteWriter& out) const {
  write_scalars(out);
  acc_.write_delta(out);
  cache_.write_delta(out);
}

void PsWorkerOperator::stop_tracking() {
  acc_.stop_tracking();
  cache_.stop_tracking();
}

void PsWorkerOperator::mark_backed_up() {
  acc_.mark_backed_up();
  cache_.mark_backed_up();
}

// All or nothing: everything is read and checked before the state changes.
void PsWorkerOperator::read_into(ByteReader& in, bool full) {
  check_header(in, kWorkerTag, "ps-worker");
  const auto clock = in.get<std::int64_t>("ps-worker clock");
  const auto in_batch = in.get<std::uint64_t>("ps-worker batch position");
  const auto count = in.get<std::uint64_t>("ps-worker count");
  const auto correct = in.get<std::uint64_t>("ps-worker correct");
  const auto loss_sum = in.get<double>("ps-worker loss sum");
  const auto max_staleness = in.get<std::int64_t>("ps-worker max staleness");
  auto shard_clock = in.get_array<std::int64_t>("ps-worker shard clocks");
  if (shard_clock.size() != shard_clock_.size()) {
    throw FormatError("ps-worker: " + std::to_string(shard_clock.size()) + " shard clocks, expected " +
                      std::to_string(shard_clock_.size()));
  }
  if (clock < 0 || in_batch >= config_.batch || correct > count) {
    throw FormatError("ps-worker: inconsistent counters in the state");
  }
  // Read and checked here, applied in place below (no copy of the vectors per delta of a chain).
  auto acc = full ? acc_.read_full_values(in) : acc_.read_delta(in);
  auto cache = full ? cache_.read_full_values(in) : cache_.read_delta(in);
  in.expect_end(full ? "ps-worker snapshot" : "ps-worker delta");
  clock_ = clock;
  in_batch_ = in_batch;
  count_ = count;
  correct_ = correct;
  loss_sum_ = loss_sum;
  max_staleness_ = max_staleness;
  shard_clock_ = std::move(shard_clock);
  acc_.apply_delta(std::move(acc));
  cache_.apply_delta(std::move(cache));
  last_tick_ns_ = 0;  // restored: if blocked, ask the shards for their clocks and weights at once (on_blocked)
  touched_.clear();
  const auto& a = acc_.values();
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (a[i] != 0) touched_.push_back(static_cast<std::uint32_t>(i));
  }
}

void PsWorkerOperator::restore_full(ByteReader& in) { read_into(in, true); }
void PsWorkerOperator::apply_delta(ByteReader& in) { read_into(in, false); }

double PsWorkerOperator::distance(const Operator& other) const {
  return acc_.distance(dynamic_cast<const PsWorkerOperator&>(other).acc_);
}

// ---------------------------------------------------------------------------------------------------------------
// ps-server

PsServerOperator::PsServerOperator(const Params& p, const InstanceInfo& at)
    : config_(ps_config_from(p, dataset_from(p)->info())),
      shard_(at.index),
      refresh_every_(p.get_int("refresh-every", 64)),
      opt_(make_optimizer_state(config_.learner)),
      weights_(weight_count(config_.learner), Metric::L2),
      sum_sq_(config_.learner.optimizer == OptimizerKind::kAdaGrad ? TrackedVector(opt_.sum_sq, Metric::L2)
                                                                   : TrackedVector(0, Metric::L2)),
      worker_clock_(static_cast<std::size_t>(config_.workers), 0) {
  if (at.parallelism != config_.servers) {
    throw ConfigError("servers: the ps-server stage has " + std::to_string(at.parallelism) +
                      " instances, but servers = " + std::to_string(config_.servers));
  }
  if (refresh_every_ < 1) throw ConfigError("refresh-every: expected >= 1, got " + std::to_string(refresh_every_));
  for (std::uint64_t i = 0; i < weights_.size(); ++i) {
    if (shard_of(i, config_.servers) == static_cast<std::size_t>(shard_)) own_.push_back(static_cast<std::uint32_t>(i));
  }
}

double PsServerOperator::alpha() const {
  const double group = config_.learner.eta0 * config_.clip;
  return 2 * group * (config_.consistency == Consistency::kBsp ? config_.workers : 1);
}

double PsServerOperator::divergence() const {
  return weights_.divergence() + config_.learner.eta0 * buffer_.divergence();
}

std::int64_t PsServerOperator::shard_clock() const {
  return *std::min_element(worker_clock_.begin(), worker_clock_.end());
}

void PsServerOperator::process(const Item& item, Emitter& out) {
  if (item.key & kPsMetaBit) {  // a worker's counters, for the sink
    out.emit(item.key, item.value, item.time);
    return;
  }
  if (item.key & kTickBit) {
    const auto w = item.key & 0xffffffffu;
    if (w >= worker_clock_.size() || item.value < 0) {
      throw InputError("ps-server: tick of worker " + std::to_string(w) + " at clock " + std::to_string(item.value) +
                       " (workers = " + std::to_string(worker_clock_.size()) + ")");
    }
    const auto worker = static_cast<std::uint32_t>(w);
    const std::int64_t before = shard_clock();
    worker_clock_[worker] = std::max(worker_clock_[worker], item.value);
    // Every gradient of this worker up to the tick's clock that arrived before it is complete.
    for (const auto& [g, idx] : groups_) {
      if (g.second == worker && g.first <= item.value) complete_.insert(g);
    }
    const auto steps_before = steps_;
    release(false);
    if (item.time & 1) whole_pending_ = true;
    if (shard_clock() > before || steps_ > steps_before || (item.time & 1)) feed_back(out, false);
    return;
  }
  const auto index = item.key;
  const std::int64_t clock = item.time >> 10;
  const auto worker = static_cast<std::uint32_t>(item.time & 1023);
  if (index >= weights_.size() || worker >= worker_clock_.size() || clock < 1 || clock > kMaxPsClock) {
    throw InputError("ps-server: gradient item (index " + std::to_string(index) + ", clock " + std::to_string(clock) +
                     ", worker " + std::to_string(worker) + ") outside the model of " +
                     std::to_string(weights_.size()) + " weights, " + std::to_string(worker_clock_.size()) +
                     " workers");
  }
  // A clock whose tick came already is complete (its gradient went before the tick on the same channel): this one
  // comes from a recovered worker redoing it (its outputs are numbered as new: replays_outputs_exactly) and was
  // applied once.
  if (clock <= worker_clock_[worker]) {
    ++redone_dropped_;
    return;
  }
  // What it allowed: the gradient of clock c used parameters of at least clock c - 1 - gap.
  max_gap_ = std::max(max_gap_, clock - 1 - shard_clock());
  // The value is a coordinate of a mean of gradients each clipped to L2 norm clip.
  const double g = std::clamp(std::bit_cast<double>(item.value), -config_.clip, config_.clip);
  const auto key = pack(clock, worker, static_cast<std::uint32_t>(index));
  if (!buffer_.contains(key)) groups_[{clock, worker}].push_back(static_cast<std::uint32_t>(index));
  buffer_.add(key, g);
}

// Applies the complete groups in (clock, worker) order: under BSP only up to the shard clock; all = everything left.
void PsServerOperator::release(bool all) {
  if (all) {
    for (const auto& [g, idx] : groups_) complete_.insert(g);
  }
  const std::int64_t upto = shard_clock();
  while (!complete_.empty()) {
    const Group g = *complete_.begin();
    if (!all && config_.consistency == Consistency::kBsp && g.first > upto) break;
    complete_.erase(complete_.begin());
    apply_group(g);
  }
}

void PsServerOperator::apply_group(const Group& g) {
  auto it = groups_.find(g);
  if (it == groups_.end()) return;
  auto idx = std::move(it->second);
  groups_.erase(it);
  std::sort(idx.begin(), idx.end());
  step_.clear();
  for (const auto i : idx) {
    const auto key = pack(g.first, g.second, i);
    step_.push(i, buffer_.get(key));
    buffer_.erase(key);
  }
  make_step(config_.learner, opt_, step_);
  double sq = 0;
  for (const double v : step_.value) sq += v * v;
  const double cap = config_.learner.eta0 * config_.clip;
  if (sq > cap * cap) {
    const double scale = cap / std::sqrt(sq) * (1 - 1e-12);
    for (double& v : step_.value) v *= scale;
  }
  apply_step(step_, weights_);
  if (config_.learner.optimizer == OptimizerKind::kAdaGrad) {
    for (const auto i : step_.index) sum_sq_.set(i, opt_.sum_sq[static_cast<Eigen::Index>(i)]);
  }
  changed_.insert(changed_.end(), step_.index.begin(), step_.index.end());
  ++steps_;
}

// Feedback: the changed weights (or the whole shard), then the shard clock.
void PsServerOperator::feed_back(Emitter& out, bool whole) {
  const std::int64_t clock = shard_clock();
  whole = whole || whole_pending_ || (clock > fed_clock_ && clock % refresh_every_ == 0);
  const auto& w = weights_.values();
  if (whole) {
    for (const auto i : own_) out.feed_back(i, std::bit_cast<std::int64_t>(w[i]), clock);
  } else {
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    for (const auto i : changed_) out.feed_back(i, std::bit_cast<std::int64_t>(w[i]), clock);
  }
  changed_.clear();
  whole_pending_ = false;
  fed_clock_ = clock;
  out.feed_back(kClockBit | static_cast<std::uint64_t>(shard_), clock, 0);
}

void PsServerOperator::finish(Emitter& out) {
  release(true);
  const auto& w = weights_.values();
  for (const auto i : own_) {
    if (w[i] != 0) out.emit(i, std::bit_cast<std::int64_t>(w[i]));
  }
  std::int64_t clock = 0;  // the last clock below kDoneClock any worker reached
  for (const auto c : worker_clock_) {
    if (c < kDoneClock) clock = std::max(clock, c);
  }
  const std::uint64_t base = kPsMetaBit | kServerBit | static_cast<std::uint64_t>(shard_) << 32;
  const auto meta = [&](PsField f, double v) { out.emit(base | f, std::bit_cast<std::int64_t>(v)); };
  meta(kPsMaxGap, static_cast<double>(max_gap_));
  meta(kPsSteps, static_cast<double>(steps_));
  meta(kPsClock, static_cast<double>(clock));
  meta(kPsReported, 1);
}

void PsServerOperator::write_scalars(ByteWriter& out) const {
  out.put<std::uint32_t>(kServerTag);
  out.put<std::uint16_t>(kVersion);
  out.put<std::uint64_t>(opt_.t);
  out.put<std::int64_t>(max_gap_);
  out.put<std::uint64_t>(steps_);
  out.put_array<std::int64_t>(worker_clock_);
  std::vector<std::int64_t> complete;
  for (const auto& [c, w] : complete_) {
    complete.push_back(c);
    complete.push_back(w);
  }
  out.put_array<std::int64_t>(complete);
}

void PsServerOperator::snapshot_full(ByteWriter& out) const {
  write_scalars(out);
  weights_.write_full(out);
  sum_sq_.write_full(out);
  buffer_.write_full(out);
}

void PsServerOperator::snapshot_delta(ByteWriter& out) const {
  write_scalars(out);
  weights_.write_delta(out);
  sum_sq_.write_delta(out);
  buffer_.write_delta(out);
}

void PsServerOperator::stop_tracking() {
  weights_.stop_tracking();
  sum_sq_.stop_tracking();
}

void PsServerOperator::mark_backed_up() {
  weights_.mark_backed_up();
  sum_sq_.mark_backed_up();
  buffer_.mark_backed_up();
}

void PsServerOperator::read_into(ByteReader& in, bool full) {
  check_header(in, kServerTag, "ps-server");
  const auto t = in.get<std::uint64_t>("ps-server step counter");
  const auto max_gap = in.get<std::int64_t>("ps-server max gap");
  const auto steps = in.get<std::uint64_t>("ps-server steps");
  auto clocks = in.get_array<std::int64_t>("ps-server worker clocks");
  const auto complete = in.get_array<std::int64_t>("ps-server complete groups");
  if (clocks.size() != worker_clock_.size() || complete.size() % 2 != 0) {
    throw FormatError("ps-server: " + std::to_string(clocks.size()) + " worker clocks (expected " +
                      std::to_string(worker_clock_.size()) + ") or a malformed list of complete groups");
  }
  // Read and checked here, applied in place below (no copy of the weights per delta of a chain); a full snapshot's
  // buffer is read into a copy, once per restore.
  auto w = full ? weights_.read_full_values(in) : weights_.read_delta(in);
  auto q = full ? sum_sq_.read_full_values(in) : sum_sq_.read_delta(in);
  std::optional<TrackedMap<double>> b_full;
  TrackedMap<double>::Delta b;
  if (full) {
    b_full = buffer_;
    b_full->read_full(in);
  } else {
    b = buffer_.read_delta(in);
  }
  in.expect_end(full ? "ps-server snapshot" : "ps-server delta");
  opt_.t = t;
  max_gap_ = max_gap;
  steps_ = steps;
  worker_clock_ = std::move(clocks);
  complete_.clear();
  for (std::size_t k = 0; k < complete.size(); k += 2) {
    complete_.insert({complete[k], static_cast<std::uint32_t>(complete[k + 1])});
  }
  weights_.apply_delta(std::move(w));
  sum_sq_.apply_delta(std::move(q));
  if (sum_sq_.size() > 0) opt_.sum_sq = sum_sq_.values();
  if (b_full) {
    buffer_ = std::move(*b_full);
  } else {
    buffer_.apply_delta(b);
  }
  rebuild_groups();
  // Feedback after a restore: the whole shard (the workers' caches may be ahead of the restored weights).
  changed_.clear();
  whole_pending_ = true;
  fed_clock_ = -1;
}

void PsServerOperator::rebuild_groups() {
  groups_.clear();
  buffer_.for_each([&](std::uint64_t key, double) {
    const Group g{static_cast<std::int64_t>(key >> 42), static_cast<std::uint32_t>((key >> 32) & 1023)};
    groups_[g].push_back(static_cast<std::uint32_t>(key & 0xffffffffu));
  });
}

void PsServerOperator::restore_full(ByteReader& in) { read_into(in, true); }
void PsServerOperator::apply_delta(ByteReader& in) { read_into(in, false); }

double PsServerOperator::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const PsServerOperator&>(other);
  return weights_.distance(o.weights_) + config_.learner.eta0 * buffer_.distance(o.buffer_);
}

// ---------------------------------------------------------------------------------------------------------------
// ps-merge

PsMerge::PsMerge(const Params& p)
    : config_(ps_config_from(p, dataset_from(p)->info())), weights_(weight_count(config_.learner), Metric::L2) {}

void PsMerge::process(const Item& item, Emitter&) {
  const double v = std::bit_cast<double>(item.value);
  if (item.key & kPsMetaBit) {
    const std::uint64_t k = item.key & ~kPsMetaBit;
    const bool server = (k & kServerBit) != 0;
    const auto who = (k & ~kServerBit) >> 32;
    if (who >= static_cast<std::uint64_t>(server ? config_.servers : config_.workers)) {
      throw InputError("ps-merge: counter of " + std::string(server ? "server " : "worker ") + std::to_string(who) +
                       " (servers = " + std::to_string(config_.servers) +
                       ", workers = " + std::to_string(config_.workers) + ")");
    }
    if (fields_.contains(k) && fields_.get(k) == v) return;  // a resent duplicate
    fields_.set(k, v);
    return;
  }
  if (item.key >= weights_.size()) {
    throw InputError("ps-merge: weight index " + std::to_string(item.key) + " outside the model of " +
                     std::to_string(weights_.size()) + " weights");
  }
  if (weights_.get(item.key) != v) weights_.set(item.key, v);
}

double PsMerge::divergence() const {
  return weights_.dirty_count() > 0 || fields_.dirty_count() > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

void PsMerge::snapshot_full(ByteWriter& out) const {
  out.put<std::uint32_t>(kMergeTag);
  out.put<std::uint16_t>(kVersion);
  weights_.write_full(out);
  fields_.write_full(out);
}

void PsMerge::snapshot_delta(ByteWriter& out) const {
  out.put<std::uint32_t>(kMergeTag);
  out.put<std::uint16_t>(kVersion);
  weights_.write_delta(out);
  fields_.write_delta(out);
}

void PsMerge::mark_backed_up() {
  weights_.mark_backed_up();
  fields_.mark_backed_up();
}

void PsMerge::restore_full(ByteReader& in) {
  check_header(in, kMergeTag, "ps-merge");
  TrackedVector w = weights_;
  auto f = fields_;
  w.read_full(in);
  f.read_full(in);
  in.expect_end("ps-merge snapshot");
  weights_ = std::move(w);
  fields_ = std::move(f);
}

void PsMerge::apply_delta(ByteReader& in) {
  check_header(in, kMergeTag, "ps-merge");
  auto wd = weights_.read_delta(in);  // checked first, applied without copying the weights
  const auto fd = fields_.read_delta(in);
  in.expect_end("ps-merge delta");
  weights_.apply_delta(std::move(wd));
  fields_.apply_delta(fd);
}

double PsMerge::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const PsMerge&>(other);
  return weights_.distance(o.weights_) == 0 && fields_.size() == o.fields_.size() && fields_.distance(o.fields_) == 0
             ? 0.0
             : std::numeric_limits<double>::infinity();
}

double PsMerge::field(bool server, int who, PsField f) const {
  const std::uint64_t k = (server ? kServerBit : 0) | static_cast<std::uint64_t>(who) << 32 | f;
  return fields_.contains(k) ? fields_.get(k) : 0.0;
}

int PsMerge::workers_reported() const {
  int n = 0;
  for (int w = 0; w < config_.workers; ++w) n += field(false, w, kPsReported) > 0 ? 1 : 0;
  return n;
}

int PsMerge::servers_reported() const {
  int n = 0;
  for (int s = 0; s < config_.servers; ++s) n += field(true, s, kPsReported) > 0 ? 1 : 0;
  return n;
}

double PsMerge::worker_total(PsField f) const {
  double sum = 0;
  for (int w = 0; w < config_.workers; ++w) sum += field(false, w, f);
  return sum;
}

double PsMerge::max_of(PsField f, bool server) const {
  double m = -std::numeric_limits<double>::infinity();
  const int n = server ? config_.servers : config_.workers;
  for (int k = 0; k < n; ++k) m = std::max(m, field(server, k, f));
  return m;
}

void register_ps(Registry& registry) {
  registry.add_operator(
      "ps-worker",
      "parameter-server worker: mini-batch gradients pushed to ps-server shards, parameters fed back "
      "(batch, workers, servers, consistency bsp|ssp|asp, staleness; data and learner options as sgd-learner)",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<PsWorkerOperator>(p, at); });
  registry.add_operator(
      "ps-server", "parameter-server shard: applies pushed gradients, tracks clocks, feeds its weights back",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<PsServerOperator>(p, at); });
  registry.add_operator("ps-merge", "assembles the ps-server shards' weights and the counters (sink)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<PsMerge>(p); });
}

}  // namespace afs::ml
