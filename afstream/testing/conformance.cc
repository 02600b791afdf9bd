// The operator conformance kit (conformance.h): checks (a)-(g) of an operator's divergence, backups and restores.
#include "afstream/testing/conformance.h"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <random>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"

namespace afs::testing {

namespace {

using Bytes = std::vector<std::uint8_t>;

// A check failed: the message says which check, where, and the values that disagree.
struct CheckFailed {
  std::string message;
};

[[noreturn]] void fail(std::string message) { throw CheckFailed{std::move(message)}; }

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  return exact_text(v);
}

// The demangled dynamic type of an exception, for a failure message.
std::string type_name(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string s = status == 0 && name ? name : typeid(e).name();
  std::free(name);
  return s;
}

std::string describe(const Item& it) {
  return "(key=" + std::to_string(it.key) + ", value=" + std::to_string(it.value) +
         ", time=" + std::to_string(it.time) + ")";
}

std::string describe(const Emitted& e) {
  return "(key=" + std::to_string(e.key) + ", value=" + std::to_string(e.value) + ", time=" + std::to_string(e.time) +
         ")";
}

std::string at_item(std::span<const Item> items, std::size_t i) {
  return "item " + std::to_string(i) + " " + describe(items[i]);
}

Bytes full_of(const Operator& op) {
  ByteWriter w;
  op.snapshot_full(w);
  return w.take();
}

Bytes delta_of(const Operator& op) {
  ByteWriter w;
  op.snapshot_delta(w);
  return w.take();
}

void restore(Operator& op, const Bytes& full) {
  ByteReader r(full);
  op.restore_full(r);
}

void apply(Operator& op, const Bytes& delta) {
  ByteReader r(delta);
  op.apply_delta(r);
}

// "" when equal, otherwise where the two byte strings first differ.
std::string byte_difference(const Bytes& a, const Bytes& b) {
  if (a == b) return "";
  const auto n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  std::string s = std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " bytes, first difference at offset " +
                  std::to_string(i);
  if (i < n) s += " (" + std::to_string(a[i]) + " vs " + std::to_string(b[i]) + ")";
  return s;
}

// Two finite values agree when |reported - brute| <= tol * max(1, |brute|); infinities agree with themselves.
bool close(double reported, double brute, double tol) {
  if (std::isnan(reported) || std::isnan(brute)) return false;
  if (std::isinf(reported) || std::isinf(brute)) return reported == brute;
  return std::fabs(reported - brute) <= tol * std::max(1.0, std::fabs(brute));
}

// divergence() as an upper bound of the brute-force distance.
bool bounds(double reported, double brute, double tol) {
  if (std::isnan(reported) || std::isnan(brute)) return false;
  if (reported == std::numeric_limits<double>::infinity()) return true;
  if (std::isinf(brute)) return brute < 0;
  return reported >= brute - tol * std::max(1.0, std::fabs(brute));
}

// Prefix lengths of a buffer of size n to try in (d).
std::vector<std::size_t> prefix_lengths(std::size_t n, std::size_t max) {
  std::vector<std::size_t> v;
  if (n <= max) {
    for (std::size_t len = 0; len < n; ++len) v.push_back(len);
    return v;
  }
  const std::size_t edge = max / 4;
  for (std::size_t len = 0; len < edge; ++len) v.push_back(len);
  const std::size_t middle = max - 2 * edge;
  for (std::size_t k = 0; k < middle; ++k) v.push_back(edge + (n - 2 * edge) * k / middle);
  for (std::size_t len = n - edge; len < n; ++len) v.push_back(len);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Everything observable about an operator's state without feeding it items.
struct Fingerprint {
  Bytes full;
  Bytes delta;
  double divergence = 0;
};

Fingerprint fingerprint(const Operator& op) { return {full_of(op), delta_of(op), op.divergence()}; }

class Kit {
 public:
  Kit(const OperatorMaker& make, std::span<const Item> items, const ConformanceOptions& o)
      : make_(make), items_(items), o_(o) {}

  void run() {
    check_divergence_and_chain();
    check_partial_deltas();
    check_cut_points();
    check_truncations();
  }

  // Where the kit is, for an unexpected exception.
  std::string where() const { return where_; }

 private:
  std::unique_ptr<Operator> fresh() {
    auto op = make_();
    if (!op) fail("make() returned a null operator");
    return op;
  }

  // Feeds items [begin, end) to op; records the emitted items and, for each, the input that produced it.
  void feed(Operator& op, std::size_t begin, std::size_t end, RecordingEmitter& out, std::vector<std::size_t>& from) {
    for (std::size_t i = begin; i < end; ++i) {
      op.process(items_[i], out);
      from.resize(out.items.size(), i);
    }
  }

  // byte_difference of two snapshot_full payloads of equal states; "" when canonical_snapshots is off.
  std::string state_difference(const Bytes& a, const Bytes& b) const {
    return o_.canonical_snapshots ? byte_difference(a, b) : std::string();
  }

  void expect_zero_distance(const Operator& a, const Operator& b, const std::string& what) {
    const double ab = a.distance(b), ba = b.distance(a);
    if (!close(ab, 0, o_.tolerance) || !close(ba, 0, o_.tolerance)) {
      fail(what + ": distance is " + num(ab) + " one way and " + num(ba) + " the other, expected 0");
    }
  }

  // (a), (b) and (e) in one pass over the items.
  void check_divergence_and_chain() {
    where_ = "(a) setting up";
    auto op = fresh();
    auto backup = fresh();  // the state at the last backup, restored from that backup's snapshot_full
    auto chain = fresh();   // the first full snapshot plus every later delta
    const Bytes first = full_of(*op);
    restore(*backup, first);
    restore(*chain, first);
    last_full_ = first;
    delta_base_ = first;
    {
      const double d = op->divergence(), dist = op->distance(*backup);
      if (!close(d, 0, o_.tolerance) || !close(dist, 0, o_.tolerance)) {
        fail("(a) before any item: a fresh operator has divergence() = " + num(d) + " and distance " + num(dist) +
             " to its own snapshot, expected 0");
      }
    }
    std::mt19937_64 rng(o_.seed);
    std::uniform_int_distribution<std::size_t> gap(o_.backup_every_min, o_.backup_every_max);
    std::size_t next = gap(rng);
    std::ptrdiff_t last_backup = -1;  // index of the item after which the last backup was taken
    const double beta = op->beta();
    double last_alpha = op->alpha();
    RecordingEmitter out;
    for (std::size_t i = 0; i < items_.size(); ++i) {
      where_ = "(a) processing " + at_item(items_, i);
      const double before = op->divergence();
      const double alpha = op->alpha();               // the bound for this item (it may shrink as the state evolves)
      if (alpha > last_alpha * (1 + o_.tolerance)) {  // a bound the runtime read earlier would no longer hold
        fail("(e) alpha: before " + at_item(items_, i) + " alpha() grew from " + num(last_alpha) + " to " + num(alpha));
      }
      last_alpha = alpha;
      op->process(items_[i], out);
      const std::size_t emitted = out.items.size();
      out.items.clear();
      if (static_cast<double>(emitted) > beta) {
        fail("(e) beta: " + at_item(items_, i) + " emitted " + std::to_string(emitted) +
             " items but beta() = " + num(beta));
      }
      const double div = op->divergence();
      if (std::isfinite(before) && std::isfinite(div) && div - before > alpha + o_.tolerance * std::max(1.0, alpha)) {
        fail("(e) alpha: " + at_item(items_, i) + " raised divergence() from " + num(before) + " to " + num(div) +
             " (by " + num(div - before) + ") but alpha() = " + num(alpha));
      }
      const double dist = op->distance(*backup);
      const bool ok = o_.exact_divergence ? close(div, dist, o_.tolerance) : bounds(div, dist, o_.tolerance);
      if (!ok) {
        fail("(a) divergence: after " + at_item(items_, i) + ": divergence() = " + num(div) +
             (o_.exact_divergence ? " but " : " is below ") + "distance(backup copy) = " + num(dist) +
             (last_backup < 0 ? std::string(" (no backup yet)")
                              : " (last backup after item " + std::to_string(last_backup) + ")") +
             (o_.exact_divergence && div > dist
                  ? "; if divergence() is an upper bound by design (a high-water mark that changes cancelling out "
                    "do not lower), set ConformanceOptions::exact_divergence = false"
                  : ""));
      }
      if (i + 1 == next) {
        backup_point(*op, *backup, *chain, i);
        last_backup = static_cast<std::ptrdiff_t>(i);
        next += gap(rng);
      }
    }
    // The changes since the last backup, applied to the chain, give the operator's final state.
    where_ = "(b) applying the final delta";
    const Bytes delta = delta_of(*op);
    remember_delta(delta);
    apply(*chain, delta);
    const std::string when = "after the last item (final delta, not marked backed up)";
    check_chain(*op, *chain, full_of(*op), when);
    apply_again(*op, *chain, delta, full_of(*op), when);
  }

  // Every other backup point takes the whole delta with backup_delta (as the runtime does) instead of
  // snapshot_delta and mark_backed_up: the chain (b) then applies what backup_delta wrote.
  void backup_point(Operator& op, Operator& backup, Operator& chain, std::size_t i) {
    const std::string when = "at the backup after " + at_item(items_, i);
    where_ = "(a) " + when;
    const bool fused = backups_++ % 2 == 1;
    const Bytes full = full_of(op);
    const Bytes delta = [&] {
      if (!fused) {
        Bytes d = delta_of(op);
        op.mark_backed_up();
        return d;
      }
      ByteWriter w;
      op.backup_delta(w);
      return w.take();
    }();
    const char* marked = fused ? "backup_delta()" : "mark_backed_up()";
    if (op.divergence() != 0) {
      fail("(a) " + when + ": divergence() = " + num(op.divergence()) + " right after " + marked + ", expected 0");
    }
    if (const auto d = state_difference(full, full_of(op)); !d.empty()) {
      fail("(a) " + when + ": " + marked + " changed snapshot_full (" + d + ")");
    }
    restore(backup, full);
    if (backup.divergence() != 0) {
      fail("(a) " + when + ": divergence() = " + num(backup.divergence()) + " right after restore_full, expected 0");
    }
    expect_zero_distance(op, backup, "(a) " + when + ", operator vs the instance restored from its snapshot_full");
    where_ = "(b) " + when;
    remember_delta(delta);
    apply(chain, delta);
    if (chain.divergence() != 0) {
      fail("(b) " + when + ": divergence() = " + num(chain.divergence()) + " right after apply_delta, expected 0");
    }
    check_chain(op, chain, full, when);
    apply_again(op, chain, delta, full, when);
    last_full_ = full;
  }

  // The same delta applied a second time in a row changes nothing: a put resent to a restarted backup server may be
  // stored twice (Operator::snapshot_delta), and a recovery then applies it twice.
  void apply_again(const Operator& op, Operator& chain, const Bytes& delta, const Bytes& full,
                   const std::string& when) {
    where_ = "(b) " + when + ", applying the same delta again";
    apply(chain, delta);
    check_chain(op, chain, full,
                when +
                    ", the same delta applied a second time (a resent put is stored twice: a delta must set "
                    "values, not add increments)");
  }

  // (f): backup_partial_delta leaves the store within the residual it returns, and divergence() keeps bounding the
  // distance to what the store holds (the first full snapshot plus every partial delta).
  void check_partial_deltas() {
    where_ = "(f) setting up";
    auto op = fresh();
    auto store = fresh();
    restore(*store, full_of(*op));
    const double alpha = op->alpha();
    const double residual =
        o_.partial_residual > 0 ? o_.partial_residual : (std::isfinite(alpha) && alpha > 0 ? 4 * alpha : 0);
    if (residual <= 0) return;
    std::mt19937_64 rng(o_.seed + 1);
    // Ten times as often as (a): between partial backups most of the state moves by less than the residual.
    std::uniform_int_distribution<std::size_t> gap(o_.backup_every_min,
                                                   std::max(o_.backup_every_min, o_.backup_every_max / 10));
    std::size_t next = gap(rng);
    int round = 0;
    RecordingEmitter out;
    for (std::size_t i = 0; i < items_.size(); ++i) {
      where_ = "(f) processing " + at_item(items_, i);
      op->process(items_[i], out);
      out.items.clear();
      const double div = op->divergence(), dist = op->distance(*store);
      if (!bounds(div, dist, o_.tolerance)) {
        fail("(f) after " + at_item(items_, i) + ": divergence() = " + num(div) +
             " is below the distance to the state the partial backups stored (" + num(dist) + ")");
      }
      if (i + 1 != next) continue;
      next += gap(rng);
      // The residual asked for goes up and down, as the runtime's theta does after failures and resets.
      const double r = residual * (1 + round++ % 3) / 2;
      const std::string when = "at the partial backup (residual " + num(r) + ") after " + at_item(items_, i);
      where_ = "(f) " + when;
      ByteWriter w;
      const double left = op->backup_partial_delta(w, r);
      if (!(left >= 0 && left <= r + o_.tolerance * std::max(1.0, r))) {
        fail("(f) " + when + ": backup_partial_delta returned " + num(left) + ", expected 0 <= it <= the residual");
      }
      const Bytes delta = w.take();
      apply(*store, delta);
      const double after = op->divergence(), stored = op->distance(*store);
      if (!bounds(after, stored, o_.tolerance) || after > left + o_.tolerance * std::max(1.0, left)) {
        fail("(f) " + when + ": divergence() = " + num(after) + " right after it, expected between the distance to " +
             "the stored state (" + num(stored) + ") and the returned residual (" + num(left) + ")");
      }
    }
  }

  void remember_delta(const Bytes& delta) {
    if (delta.size() > delta_.size()) {
      delta_ = delta;
      delta_base_ = last_full_;
    }
  }

  void check_chain(const Operator& op, const Operator& chain, const Bytes& full, const std::string& when) {
    expect_zero_distance(op, chain, "(b) " + when + ", operator vs first full snapshot + every later delta");
    if (const auto d = state_difference(full, full_of(chain)); !d.empty()) {
      fail("(b) " + when + ": snapshot_full of first full snapshot + every later delta differs from the operator's (" +
           d + ")");
    }
  }

  // (c): snapshot, restore into a fresh instance (a full snapshot and a delta), continue == an uninterrupted run; and
  // the continued instance's delta applies on the chain it was restored from.
  void check_cut_points() {
    const std::size_t n = items_.size();
    where_ = "(c) the uninterrupted run";
    auto ref = fresh();
    RecordingEmitter ref_out;
    std::vector<std::size_t> ref_from;
    feed(*ref, 0, n, ref_out, ref_from);
    ref->finish(ref_out);
    ref_from.resize(ref_out.items.size(), n);
    const Bytes ref_full = full_of(*ref);
    final_full_ = ref_full;

    std::vector<std::size_t> cuts = {0, 1, n / 2, n == 0 ? 0 : n - 1, n};
    std::mt19937_64 rng(o_.seed ^ 0x9e3779b97f4a7c15ULL);
    std::uniform_int_distribution<std::size_t> any(0, n);
    for (std::size_t k = 0; k < o_.random_cut_points; ++k) cuts.push_back(any(rng));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    while (!cuts.empty() && cuts.back() > n) cuts.pop_back();

    for (std::size_t k = 0; k < cuts.size(); ++k) {
      const std::size_t cut = cuts[k];
      // The state at the cut as the runtime restores it: a full snapshot there, or (every other cut) a full snapshot
      // half way there and a delta.
      const bool with_delta = k % 2 == 1;
      const std::string run = "(c) cut after " + std::to_string(cut) + " of " + std::to_string(n) + " items" +
                              (with_delta ? " (restored from a full snapshot and a delta)" : "");
      where_ = run;
      auto first = fresh();
      RecordingEmitter out;
      std::vector<std::size_t> from;
      const std::size_t half = with_delta ? cut / 2 : cut;
      feed(*first, 0, half, out, from);
      const Bytes chain_full = full_of(*first);
      first->mark_backed_up();
      feed(*first, half, cut, out, from);
      const std::optional<Bytes> chain_delta = with_delta ? std::optional<Bytes>(delta_of(*first)) : std::nullopt;
      const Bytes snap = full_of(*first);
      const auto restored = [&] {  // a fresh instance with the chain applied, as a recovery restores it
        auto op = fresh();
        restore(*op, chain_full);
        if (chain_delta) apply(*op, *chain_delta);
        return op;
      };
      auto second = restored();
      if (second->divergence() != 0) {
        fail(run + ": divergence() = " + num(second->divergence()) + " right after the restore, expected 0");
      }
      expect_zero_distance(*first, *second, run + ", snapshotted instance vs the one restored from it");
      if (const auto d = state_difference(snap, full_of(*second)); !d.empty()) {
        fail(run + ": snapshot_full of the restored instance differs from the snapshot it was restored from (" + d +
             ")");
      }
      feed(*second, cut, n, out, from);
      // The restored state counts as backed up: its next delta goes on the chain it was restored from (a recovered
      // worker's first backup is a delta on that chain, not a full snapshot).
      {
        auto third = restored();
        const Bytes after = delta_of(*second);
        apply(*third, after);
        expect_zero_distance(*second, *third, run + ", restored and continued vs its chain plus its delta");
        if (const auto d = state_difference(full_of(*second), full_of(*third)); !d.empty()) {
          fail(run +
               ": the chain it was restored from plus its delta differs from the restored and continued instance (" +
               d + ")");
        }
        // Likewise what a recovery's compensation changes (Operator::on_recovered): it goes out in that delta.
        auto compensated = restored();
        RecoveryInfo info;
        info.failure_count = 1;
        info.theta = info.l = 1;
        info.alpha = std::isfinite(compensated->alpha()) ? compensated->alpha() : 1;
        info.theta_by_failure = {1};
        info.l_by_failure = {1};
        info.missing_by_failure = {std::uint64_t{3}};
        info.residual_by_failure = {0};
        compensated->on_recovered(info);
        auto chained = restored();
        const Bytes compensation = delta_of(*compensated);
        apply(*chained, compensation);
        expect_zero_distance(*compensated, *chained,
                             run + ", compensated after the restore vs its chain plus its delta");
        if (const auto d = state_difference(full_of(*compensated), full_of(*chained)); !d.empty()) {
          fail(run + ": the chain plus the delta taken after on_recovered differs from the compensated instance (" + d +
               ")");
        }
      }
      second->finish(out);
      from.resize(out.items.size(), n);
      expect_zero_distance(*ref, *second, run + ", uninterrupted vs snapshot/restore/continue at the end");
      compare_emitted(ref_out.items, ref_from, out.items, from, run);
      if (const auto d = state_difference(ref_full, full_of(*second)); !d.empty()) {
        fail(run + ": final snapshot_full differs from the uninterrupted run's (" + d + ")");
      }
    }
    check_untracked(*ref, ref_out.items, ref_from, ref_full);
  }

  // (g): mode none (Operator::stop_tracking before the first item) emits what the tracked run emits and ends in the
  // same state: only the bookkeeping for backups may stop. The sink's results on worker processes are read from an
  // operator rebuilt from its final snapshot_full, in mode none too.
  void check_untracked(const Operator& ref, const std::vector<Emitted>& ref_items,
                       const std::vector<std::size_t>& ref_from, const Bytes& ref_full) {
    const std::string run = "(g) mode none (stop_tracking() before the first item)";
    where_ = run;
    auto op = fresh();
    op->stop_tracking();
    RecordingEmitter out;
    std::vector<std::size_t> from;
    feed(*op, 0, items_.size(), out, from);
    op->finish(out);
    from.resize(out.items.size(), items_.size());
    compare_emitted(ref_items, ref_from, out.items, from, run, "mode none");
    const Bytes full = full_of(*op);
    if (const auto d = state_difference(ref_full, full); !d.empty()) {
      fail(run + ": final snapshot_full differs from the tracked run's (" + d + ")");
    }
    auto restored = fresh();
    restore(*restored, full);
    expect_zero_distance(ref, *restored,
                         run + ", the tracked run vs an instance restored from its final snapshot_full");
  }

  std::string origin(std::size_t from) const {
    return from >= items_.size() ? std::string("finish()") : at_item(items_, from);
  }

  // got is what `other` emitted (snapshot/restore/continue in (c), the untracked run in (g)).
  void compare_emitted(const std::vector<Emitted>& want, const std::vector<std::size_t>& want_from,
                       const std::vector<Emitted>& got, const std::vector<std::size_t>& got_from,
                       const std::string& run, const std::string& other = "snapshot/restore/continue") {
    const std::size_t n = std::min(want.size(), got.size());
    for (std::size_t e = 0; e < n; ++e) {
      if (want[e] == got[e]) continue;
      fail(run + ": emitted item #" + std::to_string(e) + " differs: the uninterrupted run emitted " +
           describe(want[e]) + " at " + origin(want_from[e]) + ", " + other + " emitted " + describe(got[e]) + " at " +
           origin(got_from[e]));
    }
    if (want.size() != got.size()) {
      const bool more = got.size() > want.size();
      const std::size_t e = n;
      fail(run + ": the uninterrupted run emitted " + std::to_string(want.size()) + " items, " + other + " " +
           std::to_string(got.size()) + "; the first extra one is " + describe(more ? got[e] : want[e]) + " at " +
           origin(more ? got_from[e] : want_from[e]) + " (" +
           (more ? (run.starts_with("(c)") ? std::string("only after restore") : "only in " + other)
                 : std::string("only uninterrupted")) +
           ")");
    }
  }

  // (d): truncated snapshots and deltas are rejected with FormatError and change nothing.
  void check_truncations() {
    if (o_.max_truncations == 0) return;
    const std::size_t half = items_.size() / 2;
    // restore_full target: the state after the first half of the items (it differs from the final state).
    where_ = "(d) setting up";
    auto target = fresh();
    auto twin = fresh();
    RecordingEmitter sink;
    std::vector<std::size_t> from;
    feed(*target, 0, half, sink, from);
    feed(*twin, 0, half, sink, from);
    expect_rejected(*target, *twin, final_full_, "restore_full", "the final full snapshot",
                    [](Operator& op, ByteReader& r) { op.restore_full(r); });
    where_ = "(d) restoring the untruncated snapshot";
    restore(*target, final_full_);
    if (const auto d = state_difference(final_full_, full_of(*target)); !d.empty()) {
      fail("(d) after rejecting truncations, restore_full of the whole snapshot gives different snapshot_full bytes (" +
           d + ")");
    }

    // apply_delta target: the backed-up state the largest delta was taken against.
    where_ = "(d) setting up the delta base";
    auto base = fresh();
    auto base_twin = fresh();
    restore(*base, delta_base_);
    restore(*base_twin, delta_base_);
    expect_rejected(*base, *base_twin, delta_, "apply_delta", "the largest delta of check (b)",
                    [](Operator& op, ByteReader& r) { op.apply_delta(r); });
  }

  template <typename Call>
  void expect_rejected(Operator& target, const Operator& twin, const Bytes& bytes, const char* call, const char* what,
                       Call&& call_fn) {
    const Fingerprint before = fingerprint(target);
    for (const std::size_t len : prefix_lengths(bytes.size(), o_.max_truncations)) {
      const std::string attempt = std::string("(d) ") + call + " of the first " + std::to_string(len) + " of " +
                                  std::to_string(bytes.size()) + " bytes of " + what;
      expect_rejected_once(target, twin, before, std::span<const std::uint8_t>(bytes.data(), len), attempt, call_fn);
    }
    // A whole snapshot followed by a byte more: a reader that stops where its payload ends without
    // ByteReader::expect_end would take a longer record (another operator's, another version's) as its own.
    Bytes longer = bytes;
    longer.push_back(0);
    expect_rejected_once(target, twin, before, longer,
                         std::string("(d) ") + call + " of " + what + " followed by one byte more (" +
                             std::to_string(longer.size()) + " bytes; a restore must end with ByteReader::expect_end)",
                         call_fn);
  }

  template <typename Call>
  void expect_rejected_once(Operator& target, const Operator& twin, const Fingerprint& before,
                            std::span<const std::uint8_t> bytes, const std::string& attempt, Call&& call_fn) {
    where_ = attempt;
    ByteReader r(bytes);
    try {
      call_fn(target, r);
    } catch (const FormatError&) {
      check_unchanged(target, twin, before, attempt);
      return;
    } catch (const std::exception& e) {
      fail(attempt + ": threw " + type_name(e) + " (" + e.what() + "), expected afs::FormatError");
    }
    fail(attempt + ": accepted, expected afs::FormatError");
  }

  void check_unchanged(const Operator& target, const Operator& twin, const Fingerprint& before,
                       const std::string& attempt) {
    expect_zero_distance(target, twin, attempt + ": threw FormatError but changed the state");
    const Fingerprint after = fingerprint(target);
    if (const auto d = byte_difference(before.full, after.full); !d.empty()) {
      fail(attempt + ": threw FormatError but changed snapshot_full (" + d + ")");
    }
    if (const auto d = byte_difference(before.delta, after.delta); !d.empty()) {
      fail(attempt + ": threw FormatError but changed snapshot_delta (" + d + ")");
    }
    if (!(before.divergence == after.divergence)) {
      fail(attempt + ": threw FormatError but changed divergence() from " + num(before.divergence) + " to " +
           num(after.divergence));
    }
  }

  const OperatorMaker& make_;
  std::span<const Item> items_;
  const ConformanceOptions& o_;
  std::string where_;
  Bytes last_full_;          // the full snapshot of the last backup in (a)
  Bytes delta_;              // the largest delta seen in (b) ...
  Bytes delta_base_;         // ... and the full snapshot of the state it applies to
  Bytes final_full_;         // the uninterrupted run's final snapshot_full in (c)
  std::size_t backups_ = 0;  // backup points in (a): every other one uses backup_delta
};

}  // namespace

ConformanceReport check_operator(const OperatorMaker& make, std::span<const Item> items,
                                 const ConformanceOptions& options) {
  const std::string seed = " [seed " + std::to_string(options.seed) + ", " + std::to_string(items.size()) + " items]";
  if (options.backup_every_min < 1 || options.backup_every_min > options.backup_every_max) {
    return {false, "options: expected 1 <= backup_every_min <= backup_every_max, got " +
                       std::to_string(options.backup_every_min) + " and " + std::to_string(options.backup_every_max)};
  }
  if (!(options.tolerance >= 0)) return {false, "options: tolerance must be >= 0, got " + num(options.tolerance)};
  if (!make) return {false, "options: make is empty"};
  Kit kit(make, items, options);
  try {
    kit.run();
  } catch (const CheckFailed& f) {
    return {false, f.message + seed};
  } catch (const std::exception& e) {
    return {false, kit.where() + ": unexpected " + type_name(e) + ": " + e.what() + seed};
  }
  return {true, ""};
}

::testing::AssertionResult OperatorConforms(const OperatorMaker& make, std::span<const Item> items,
                                            const ConformanceOptions& options) {
  const ConformanceReport r = check_operator(make, items, options);
  if (r.ok)
    return ::testing::AssertionSuccess() << "the operator passes checks (a)-(g) on " << items.size() << " items";
  return ::testing::AssertionFailure() << r.failure;
}

}  // namespace afs::testing
