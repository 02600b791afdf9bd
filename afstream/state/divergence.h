// Divergence metrics: how far a tracked container's current state has drifted from its last backup.
//
// DESIGN.md section 3 (Theta): after each state update the runtime compares divergence() with the runtime
// threshold theta and backs the state up (or its delta) when it is exceeded. The divergence must therefore be
// maintained incrementally, O(1) per update; detail::DivergenceTracker below is the shared O(1) bookkeeping used by
// TrackedArray, TrackedMap and TrackedVector.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace afs {

// The distance between the current state and the last backed-up state (DESIGN.md sections 2-3).
//   MaxAbs:  largest |v_i - b_i| (tracked as a high-water mark since the last backup, see DivergenceTracker).
//   L1:      sum_i |v_i - b_i|.
//   L2:      sqrt(sum_i (v_i - b_i)^2).
//   NewKeys: number of keys present now that were not in the last backup (keyed containers only).
enum class Metric { MaxAbs, L1, L2, NewKeys };

// "max-abs", "l1", "l2", "new-keys".
const char* to_string(Metric m);

// Parses a metric name, case-insensitively, ignoring '-' and '_' ("max-abs", "MaxAbs", "max_abs", "l1", "L2",
// "new-keys", "newkeys"). Throws ConfigError naming the accepted values on anything else.
Metric parse_metric(std::string_view name);

namespace detail {

// |a - b| as an exact unsigned magnitude (no overflow for any pair of int64 values).
inline std::uint64_t abs_diff(std::int64_t a, std::int64_t b) {
  return a >= b ? static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b)
                : static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
}
inline double abs_diff(double a, double b) { return std::fabs(a - b); }

template <typename T>
struct DivergenceTraits;
// Integer counters: magnitudes are exact uint64; L1 and squared-L2 sums are exact in unsigned __int128 (updates use
// wrap-around arithmetic, which is exact as long as the true sum fits in 128 bits).
template <>
struct DivergenceTraits<std::int64_t> {
  using Mag = std::uint64_t;
  using Sum = unsigned __int128;
  static Sum square(Mag m) { return static_cast<Sum>(m) * m; }
};
template <>
struct DivergenceTraits<double> {
  using Mag = double;
  using Sum = double;
  static Sum square(Mag m) { return m * m; }
};

// A running sum of the per-slot contributions (|d| for L1, d^2 for L2).
//  - int64: exact, in unsigned __int128 with wrap-around updates (exact whenever the true sum fits in 128 bits).
//  - double: a plain running sum, recomputed from the dirty slots by the owner if cancellation ever makes it
//    negative. Its absolute error is about eps * (sum of |changes of the contributions| since the last backup);
//    under Theta-driven backups the contributions stay below (theta + alpha)^2, so the error is negligible next to
//    theta. A single excursion many orders of magnitude above theta between two backups (which the runtime backs up
//    at once) is the only way to lose precision. (Workers behind replayable sources with a remote store back up by
//    the cost rule instead, and may drift far past theta; their recoveries lose nothing whatever the divergence
//    says, Proposition S, so its precision decides nothing there.) Compensated (Neumaier/TwoSum) summation was
//    measured to cost 1-2 ns per update in cache and 5-7 ns on a 1e6-entry vector, so it is not used.
template <typename T>
class RunningSum;
template <>
class RunningSum<std::int64_t> {
 public:
  using Sum = unsigned __int128;
  void add(Sum plus, Sum minus) { s_ += plus - minus; }
  void add(Sum plus) { s_ += plus; }
  void set(Sum s) { s_ = s; }
  bool negative() const { return false; }
  double value() const { return static_cast<double>(s_); }
  double root() const { return static_cast<double>(std::sqrt(static_cast<long double>(s_))); }

 private:
  Sum s_ = 0;
};
template <>
class RunningSum<double> {
 public:
  void add(double plus, double minus) { s_ += plus - minus; }
  void add(double x) { s_ += x; }
  void set(double s) { s_ = s; }
  bool negative() const { return s_ < 0; }
  // A sum that is not a number (a NaN value, or an infinite one moved again: inf - inf) is infinite, not 0: it read
  // 0 until the next backup, so a NaN entry never triggered Theta and the finite drift beside it was not seen either.
  double value() const { return s_ > 0 ? s_ : s_ == s_ ? 0.0 : std::numeric_limits<double>::infinity(); }
  double root() const { return s_ > 0 ? std::sqrt(s_) : s_ == s_ ? 0.0 : std::numeric_limits<double>::infinity(); }

 private:
  double s_ = 0;
};

// O(1)-per-update divergence bookkeeping for one metric (DESIGN.md section 3). The owner reports every change of a
// slot as change(base, old, now), where base is the slot's backed-up value.
//
// MaxAbs is a high-water mark: the largest |v_i - b_i| any slot reached since the last reset(). It equals the
// current max_i |v_i - b_i| whenever every slot moved monotonically since the backup (e.g. Count-Min counters, which
// only increase) and is an upper bound on it otherwise -- which is the safe side for a Theta bound.
// L1 and L2 are exact for int64 and accurate to rounding for double (see RunningSum for the error bound).
template <typename T>
class DivergenceTracker {
 public:
  using Traits = DivergenceTraits<T>;
  using Mag = typename Traits::Mag;
  using Sum = typename Traits::Sum;

  explicit DivergenceTracker(Metric m) : metric_(m) {}

  Metric metric() const { return metric_; }

  // A slot whose backed-up value is `base` moved from `old` to `now`.
  void change(T base, T old, T now) {
    switch (metric_) {
      case Metric::MaxAbs: {
        const Mag d = not_nan(abs_diff(now, base));
        if (d > max_) max_ = d;
        break;
      }
      case Metric::L1:
        sum_.add(static_cast<Sum>(abs_diff(now, base)), static_cast<Sum>(abs_diff(old, base)));
        break;
      case Metric::L2:
        sum_.add(Traits::square(abs_diff(now, base)), Traits::square(abs_diff(old, base)));
        break;
      case Metric::NewKeys:
        break;
    }
  }

  // Adds one slot's whole contribution (for recomputation and brute-force distances).
  void accumulate(T base, T now) {
    const Mag d = abs_diff(now, base);
    switch (metric_) {
      case Metric::MaxAbs:
        if (not_nan(d) > max_) max_ = not_nan(d);
        break;
      case Metric::L1:
        sum_.add(static_cast<Sum>(d));
        break;
      case Metric::L2:
        sum_.add(Traits::square(d));
        break;
      case Metric::NewKeys:
        break;
    }
  }

  // Adds changes already summed by the owner (L1, L2: the sum of what change() would have added for each).
  void add_sum(Sum s) { sum_.add(s); }

  // True when a floating-point running sum came out negative; the owner then calls reset_sum() and accumulate()s
  // its dirty slots again. Always false for integer counters.
  bool drifted() const { return sum_.negative(); }

  // Forget everything: the current state is the backed-up state.
  void reset() {
    max_ = 0;
    sum_.set(0);
  }
  // MaxAbs after a partial backup: every slot is within m of its backed-up value (the high-water mark restarts at m).
  void reset_to(Mag m) {
    max_ = m;
    sum_.set(0);
  }
  // The MaxAbs high-water mark, exactly (value() is its conversion to double).
  Mag high_water() const { return max_; }
  // Forget the L1/L2 running sum only (the MaxAbs high-water mark is kept).
  void reset_sum() { sum_.set(0); }
  // Replace the L1/L2 running sum by a recomputed value (L1: sum |d|, L2: sum d^2).
  void set_sum(Sum s) { sum_.set(s); }

  // The divergence in the metric (0 for NewKeys, which keyed containers count themselves).
  double value() const {
    switch (metric_) {
      case Metric::MaxAbs:
        return static_cast<double>(max_);
      case Metric::L1:
        return sum_.value();
      case Metric::L2:
        return sum_.root();
      case Metric::NewKeys:
        return 0.0;
    }
    return 0.0;
  }

 private:
  // A NaN distance counts as infinite: a NaN entry must pass Theta (as a NaN running sum does), not slip under the
  // high-water mark (NaN > max_ is false).
  static Mag not_nan(Mag d) {
    if constexpr (std::is_floating_point_v<Mag>) {
      if (std::isnan(d)) return std::numeric_limits<Mag>::infinity();
    }
    return d;
  }

  Metric metric_;
  Mag max_ = 0;
  RunningSum<T> sum_;
};

}  // namespace detail
}  // namespace afs
