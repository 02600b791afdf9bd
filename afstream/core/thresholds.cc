#include "afstream/core/thresholds.h"

#include <cmath>

#include "afstream/core/errors.h"

namespace afs {

const char* to_string(FtMode m) {
  switch (m) {
    case FtMode::None: return "none";
    case FtMode::Approx: return "approx";
    case FtMode::Exact: return "exact";
  }
  return "?";
}

FtMode parse_ft_mode(std::string_view s) {
  if (s == "none") return FtMode::None;
  if (s == "approx") return FtMode::Approx;
  if (s == "exact") return FtMode::Exact;
  throw ConfigError("ft.mode: expected none, approx or exact, got '" + std::string(s) + "'");
}

const char* to_string(ResetPolicy p) {
  switch (p) {
    case ResetPolicy::Fixed: return "fixed";
    case ResetPolicy::Hopping: return "hopping";
    case ResetPolicy::Sliding: return "sliding";
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

RuntimeThresholds runtime_thresholds(const UserBounds& user, const ThresholdScope& scope, int failures) {
  user.validate();
  if (scope.copies < 1) throw ConfigError("threshold scope: copies must be >= 1");
  if (scope.downstream_beta_product < 1) throw ConfigError("threshold scope: beta product must be >= 1");
  const double halving = std::ldexp(1.0, failures + 1);  // 2^(k+1): start at half, halve per failure
  RuntimeThresholds r;
  r.theta = user.theta / (halving * scope.copies * scope.downstream_beta_product);
  r.l = static_cast<std::uint64_t>(std::floor(user.l / (halving * scope.copies * scope.downstream_beta_product)));
  r.gamma = static_cast<std::uint64_t>(std::floor(user.gamma / (halving * scope.copies)));
  return r;
}

ThresholdSchedule::ThresholdSchedule(UserBounds user, ThresholdScope scope, ResetPolicy policy,
                                     std::uint64_t window_items)
    : user_(user), scope_(scope), policy_(policy), window_(window_items) {
  if (policy_ != ResetPolicy::Fixed && window_ == 0) {
    throw ConfigError(std::string("ft.reset ") + to_string(policy_) + " needs a window length (items) > 0");
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
