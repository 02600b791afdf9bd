#include "afstream/core/thresholds.h"

#include <cmath>
#include <cstdint>

#include "afstream/core/errors.h"

namespace afs {

const char* to_string(FtMode m) {
  switch (m) {
    case FtMode::None:
      return "none";
    case FtMode::Approx:
      return "approx";
    case FtMode::Exact:
      return "exact";
    case FtMode::MicroBatch:
      return "microbatch";
    case FtMode::Ack:
      return "ack";
    case FtMode::Ask:
      return "ask";
    case FtMode::Checkpoint:
      return "checkpoint";
  }
  return "?";
}

namespace {
constexpr FtMode kModes[] = {FtMode::None, FtMode::Approx, FtMode::Exact,     FtMode::MicroBatch,
                             FtMode::Ack,  FtMode::Ask,    FtMode::Checkpoint};
}

std::string ft_mode_names() {
  std::string s;
  for (auto m : kModes) s += (s.empty() ? "" : " | ") + std::string(to_string(m));
  return s;
}

FtMode parse_ft_mode(std::string_view s) {
  for (auto m : kModes) {
    if (s == to_string(m)) return m;
  }
  throw ConfigError("ft.mode: expected " + ft_mode_names() + ", got '" + std::string(s) + "'");
}

const char* to_string(ResetPolicy p) {
  switch (p) {
    case ResetPolicy::Fixed:
      return "fixed";
    case ResetPolicy::Hopping:
      return "hopping";
    case ResetPolicy::Sliding:
      return "sliding";
  }
  return "?";
}

ResetPolicy parse_reset_policy(std::string_view s) {
  if (s == "fixed") return ResetPolicy::Fixed;
  if (s == "hopping") return ResetPolicy::Hopping;
  if (s == "sliding") return ResetPolicy::Sliding;
  throw ConfigError("ft.reset: expected fixed, hopping or sliding, got '" + std::string(s) + "'");
}

void UserBounds::validate() const {
  auto check = [](double v, const char* name) {
    if (!std::isfinite(v) || v < 0) {
      throw ConfigError(std::string(name) + ": expected a finite number >= 0, got " + std::to_string(v));
    }
  };
  check(theta, "ft.state-divergence-max (theta)");
  check(l, "ft.unbacked-items-max (l)");
  check(gamma, "ft.unacked-items-max (gamma)");
}

namespace {
// a / b rounded toward zero (a >= 0, b >= 1), so that quotient * b <= a holds exactly: sums of thresholds then stay
// strictly below the user bounds in floating point too (proofs/general-bounds.md section 4, last paragraph).
double div_down(double a, double b) {
  double q = a / b;
  if (std::fma(q, b, -a) > 0) q = std::nextafter(q, 0.0);  // the sign of fma's single rounding is exact
  return q;
}

std::uint64_t floor_to_u64(double v) {
  constexpr double kTwo64 = 18446744073709551616.0;
  return v >= kTwo64 ? UINT64_MAX : static_cast<std::uint64_t>(std::floor(v));
}
}  // namespace

RuntimeThresholds runtime_thresholds(const UserBounds& user, const ThresholdScope& scope, int failures) {
  user.validate();
  if (scope.copies < 1) throw ConfigError("threshold scope: copies must be >= 1");
  if (!(scope.downstream_beta_product >= 1) || !std::isfinite(scope.downstream_beta_product)) {
    throw ConfigError("threshold scope: beta product must be finite and >= 1, got " +
                      std::to_string(scope.downstream_beta_product));
  }
  if (failures < 0) throw ConfigError("threshold scope: failure count must be >= 0");
  // Theta / (n * beta^(m-i)) / 2^(k+1), each division rounded toward zero (halving is exact above subnormals), and
  // the same split for L and Gamma (Corollaries P and S of proofs/general-bounds.md section 6), rounded down.
  auto split = [&](double bound, int copies) {
    return std::ldexp(div_down(div_down(bound, copies), scope.downstream_beta_product), -(failures + 1));
  };
  RuntimeThresholds r;
  r.theta = split(user.theta, scope.theta_shared_by_copies ? scope.copies : 1);
  r.l = floor_to_u64(split(user.l, scope.copies));
  r.gamma = floor_to_u64(split(user.gamma, scope.copies));
  return r;
}

ThresholdSchedule::ThresholdSchedule(UserBounds user, ThresholdScope scope, ResetPolicy policy,
                                     std::uint64_t window_items)
    : user_(user), scope_(scope), policy_(policy), window_(window_items) {
  if (policy_ != ResetPolicy::Fixed && window_ == 0) {
    throw ConfigError(std::string("ft.reset ") + to_string(policy_) +
                      " needs a window length: give --ft.reset-window ITEMS (> 0)");
  }
  recompute();
}

void ThresholdSchedule::on_failure(std::uint64_t at_item) {
  ++failures_;
  ++total_;
  last_failure_at_ = at_item;
  recompute();
}

void ThresholdSchedule::on_progress(std::uint64_t item) {
  if (failures_ == 0) return;
  bool reset = false;
  if (policy_ == ResetPolicy::Hopping) {
    // A new hopping window started since the last failure.
    reset = item / window_ != last_failure_at_ / window_;
  } else if (policy_ == ResetPolicy::Sliding) {
    reset = item >= last_failure_at_ + window_;  // the last failure has left the window
  }
  if (reset) {
    failures_ = 0;
    recompute();
  }
}

void ThresholdSchedule::recompute() { current_ = runtime_thresholds(user_, scope_, failures_); }

}  // namespace afs
