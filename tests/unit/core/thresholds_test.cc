// Unit tests of the runtime thresholds (afstream/core/thresholds.h; DESIGN.md section 3; proofs/general-bounds.md
// sections 4, 6, 7 and 8): the start at half the user bounds, halving per recovery, the split across copies and
// pipeline stages, sums over any number of failures, exactness at zero, the reset policies and the input errors.
#include "afstream/core/thresholds.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// Exact sums of doubles: a fixed-point number with 2^-1200 as its unit, wide enough for every finite
// non-negative double (and sums of a few thousand of them), so that "< Theta + L*alpha" is checked on the real
// values of the thresholds, not on a rounded sum (proofs/general-bounds.md section 4, last paragraph).
class ExactSum {
 public:
  ExactSum& add(double v) {
    EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
    if (v == 0) return *this;
    int e = 0;
    const double m = std::frexp(v, &e);                               // v = m * 2^e, 0.5 <= m < 1
    const auto mant = static_cast<std::uint64_t>(std::ldexp(m, 53));  // v = mant * 2^(e - 53), exactly
    add_bits(mant, e - 53 + kOffset);
    return *this;
  }
  // a < b, exactly.
  friend bool operator<(const ExactSum& a, const ExactSum& b) {
    for (std::size_t i = kWords; i-- > 0;) {
      if (a.w_[i] != b.w_[i]) return a.w_[i] < b.w_[i];
    }
    return false;
  }
  friend bool operator==(const ExactSum& a, const ExactSum& b) { return a.w_ == b.w_; }

 private:
  static constexpr int kOffset = 1200;  // bit i of the number has weight 2^(i - kOffset)
  static constexpr std::size_t kWords = (kOffset + 1024 + 64) / 32 + 1;
  void add_bits(std::uint64_t mant, int bit) {
    ASSERT_GE(bit, 0);
    std::size_t word = static_cast<std::size_t>(bit) / 32;
    const int shift = bit % 32;
    // mant << shift spans at most three 32-bit words.
    unsigned __int128 carry = static_cast<unsigned __int128>(mant) << shift;
    for (; carry != 0 && word < kWords; ++word) {
      carry += w_[word];
      w_[word] = static_cast<std::uint32_t>(carry);
      carry >>= 32;
    }
    ASSERT_EQ(carry, 0u) << "ExactSum overflow";
  }
  std::array<std::uint32_t, kWords> w_{};
};

TEST(Thresholds, StartAtHalfAndHalveOnEachRecovery) {
  const UserBounds user{1000, 64, 32};
  const RuntimeThresholds start = runtime_thresholds(user, {}, 0);
  EXPECT_EQ(start.theta, 500);
  EXPECT_EQ(start.l, 32u);
  EXPECT_EQ(start.gamma, 16u);
  const RuntimeThresholds k3 = runtime_thresholds(user, {}, 3);
  EXPECT_EQ(k3.theta, 62.5);
  EXPECT_EQ(k3.l, 4u);
  EXPECT_EQ(k3.gamma, 2u);
  // theta_k = Theta / 2^(k+1) exactly; l_k = floor(L / 2^(k+1)) (integer halving of l_(k-1), Lemma 2(1)).
  for (int k = 0; k <= 60; ++k) {
    const RuntimeThresholds r = runtime_thresholds(user, {}, k);
    EXPECT_EQ(r.theta, std::ldexp(1000.0, -(k + 1))) << k;
    EXPECT_EQ(r.l, std::uint64_t{64} >> (k + 1)) << k;
    EXPECT_EQ(r.gamma, std::uint64_t{32} >> (k + 1)) << k;
    if (k > 0) {
      const RuntimeThresholds prev = runtime_thresholds(user, {}, k - 1);
      EXPECT_EQ(r.theta, prev.theta / 2) << k;
      EXPECT_EQ(r.l, prev.l / 2) << k;
      EXPECT_EQ(r.gamma, prev.gamma / 2) << k;
    }
  }
  // L odd: floor(floor(L/2)/2) == floor(L/4).
  EXPECT_EQ(runtime_thresholds({10, 7, 7}, {}, 0).l, 3u);
  EXPECT_EQ(runtime_thresholds({10, 7, 7}, {}, 1).l, 1u);
  EXPECT_EQ(runtime_thresholds({10, 7, 7}, {}, 2).gamma, 0u);

  // The schedule starts there and halves at each failure.
  ThresholdSchedule s(user, {});
  EXPECT_EQ(s.current().theta, 500);
  EXPECT_EQ(s.failures(), 0);
  for (int k = 1; k <= 5; ++k) {
    s.on_failure(100 * static_cast<std::uint64_t>(k));
    EXPECT_EQ(s.failures(), k);
    EXPECT_EQ(s.total_failures(), k);
    EXPECT_EQ(s.current().theta, std::ldexp(1000.0, -(k + 1)));
    EXPECT_EQ(s.current().l, 64u >> (k + 1));
    EXPECT_EQ(s.current().gamma, 32u >> (k + 1));
  }
}

// Corollary P(3): copies whose divergences combine by max (key-partitioned, max-abs) each use all of Theta; L and
// Gamma are still split n ways.
TEST(Thresholds, CopiesCombiningByMaxShareNoTheta) {
  const UserBounds user{1200, 96, 48};
  ThresholdScope scope{4, 1};
  scope.theta_shared_by_copies = false;
  const RuntimeThresholds r = runtime_thresholds(user, scope, 0);
  EXPECT_EQ(r.theta, 600);
  EXPECT_EQ(r.l, 12u);
  EXPECT_EQ(r.gamma, 6u);
  // Pipeline scaling and halving apply as before: theta = 1200 / 2 / 2^3, l = floor(96 / (4 * 2) / 2^3).
  scope.downstream_beta_product = 2;
  const RuntimeThresholds k2 = runtime_thresholds(user, scope, 2);
  EXPECT_EQ(k2.theta, 75);
  EXPECT_EQ(k2.l, 1u);
}

TEST(Thresholds, SplitAcrossCopiesAndStages) {
  const UserBounds user{1200, 96, 48};
  // n = 4 copies: Theta / (2n), floor(L / (2n)), floor(Gamma / (2n)).
  const RuntimeThresholds c4 = runtime_thresholds(user, {4, 1}, 0);
  EXPECT_EQ(c4.theta, 150);
  EXPECT_EQ(c4.l, 12u);
  EXPECT_EQ(c4.gamma, 6u);
  // n = 5: 96 / 10 and 48 / 10 round down.
  const RuntimeThresholds c5 = runtime_thresholds(user, {5, 1}, 0);
  EXPECT_EQ(c5.theta, 120);
  EXPECT_EQ(c5.l, 9u);
  EXPECT_EQ(c5.gamma, 4u);
  // Stage i of an m-stage pipeline with beta = 2 and m - i = 2 stages below: every bound divided by beta^(m-i) = 4
  // (Corollary S(3): stage i starts at Theta/(2 beta^(m-i)), L/(2 beta^(m-i)), Gamma/(2 beta^(m-i))).
  const RuntimeThresholds st = runtime_thresholds(user, {1, 4}, 0);
  EXPECT_EQ(st.theta, 150);
  EXPECT_EQ(st.l, 12u);
  EXPECT_EQ(st.gamma, 6u);
  // Both, and one failure: 1200 / (2^2 * 3 * 2) = 50, floor(96 / 24) = 4, floor(48 / 24) = 2.
  const RuntimeThresholds both = runtime_thresholds(user, {3, 2}, 1);
  EXPECT_EQ(both.theta, 50);
  EXPECT_EQ(both.l, 4u);
  EXPECT_EQ(both.gamma, 2u);
  // A non-integer beta product (beta = 1.5, two stages below).
  const RuntimeThresholds frac = runtime_thresholds(user, {1, 2.25}, 0);
  EXPECT_LE(frac.theta * 2 * 2.25, 1200.0);
  EXPECT_NEAR(frac.theta, 1200 / 4.5, 1e-12);
  EXPECT_EQ(frac.l, 21u);  // floor(96 / 4.5) = floor(21.33)
  EXPECT_EQ(frac.gamma, 10u);

  // Corollary S: a lost output of stage i costs beta^(m-i) final outputs; with the split, each stage's share of
  // lost final outputs over any number of failures stays below Gamma + L * beta.
  const double beta = 2, bp = 4;
  std::uint64_t outputs_lost = 0;
  for (int k = 0; k < 40; ++k) {
    const RuntimeThresholds r = runtime_thresholds(user, {1, bp}, k);
    outputs_lost += static_cast<std::uint64_t>(bp) * (r.gamma + r.l * static_cast<std::uint64_t>(beta));
  }
  EXPECT_LT(static_cast<double>(outputs_lost), user.gamma + user.l * beta);

  // The scope is checked.
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([&] {
                         runtime_thresholds(user, {0, 1}, 0);
                       }),
                       "copies must be >= 1"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([&] {
                         runtime_thresholds(user, {1, 0.5}, 0);
                       }),
                       "beta product"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([&] {
                         runtime_thresholds(user, {1, std::nan("")}, 0);
                       }),
                       "beta product"));
}

TEST(Thresholds, SumOverAnyFailuresStaysBelowUserBound) {
  struct Case {
    UserBounds user;
    double alpha;
    int copies;
    double beta_product;
  };
  const std::vector<Case> cases = {
      {{1000, 64, 32}, 1, 1, 1},  {{1000, 0, 0}, 1, 1, 1},   {{0, 100, 10}, 1500, 1, 1},  {{1, 0, 0}, 1, 5, 1},
      {{1, 0, 0}, 1, 3, 1},       {{3.7, 9, 9}, 2.5, 7, 1},  {{1e6, 1e5, 1e3}, 1, 10, 1}, {{0.3, 5, 5}, 0.1, 6, 2.25},
      {{123.456, 1, 1}, 3, 2, 3}, {{1e-300, 0, 0}, 1, 3, 1}, {{7, 1000003, 17}, 1, 9, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("Theta=" + std::to_string(c.user.theta) + " L=" + std::to_string(c.user.l) +
                 " alpha=" + std::to_string(c.alpha) + " n=" + std::to_string(c.copies));
    ExactSum bound;  // Theta + L * alpha (both terms exact: alpha * L is computed exactly below)
    bound.add(c.user.theta);
    ExactSum one_copy_theta, all_copies_theta;
    std::uint64_t one_copy_l = 0;
    for (int k = 0; k <= 60; ++k) {
      // After k failures: sum over j = 1..k of theta_j + l_j * alpha, theta_j and l_j in force at failure j.
      if (k > 0) {
        const RuntimeThresholds r = runtime_thresholds(c.user, {c.copies, c.beta_product}, k - 1);
        one_copy_theta.add(r.theta);
        for (int copy = 0; copy < c.copies; ++copy) all_copies_theta.add(r.theta);
        one_copy_l += r.l;
      }
      // l terms: sum_j l_j * alpha < L * alpha  <=>  sum_j l_j < L (integers, alpha > 0), and likewise for n copies.
      const double per_copy_l = static_cast<double>(one_copy_l);
      const double all_l = per_copy_l * c.copies;
      EXPECT_LE(all_l, c.user.l) << k;
      if (c.user.l >= 1) {
        EXPECT_LT(all_l, c.user.l) << k;
      }
      // theta terms: the exact sums stay strictly below Theta (when Theta > 0) for one copy and for all n copies.
      ExactSum theta_bound;
      theta_bound.add(c.user.theta);
      if (c.user.theta > 0) {
        EXPECT_TRUE(one_copy_theta < theta_bound) << k;
        EXPECT_TRUE(all_copies_theta < theta_bound) << "n copies, k = " << k;
      } else {
        EXPECT_TRUE(all_copies_theta == theta_bound) << k;
      }
      // And the combined bound, in plain floating point too: sum theta_j + alpha * sum l_j < Theta + L * alpha.
      long double total = 0;
      for (int j = 0; j < k; ++j) {
        const RuntimeThresholds r = runtime_thresholds(c.user, {c.copies, c.beta_product}, j);
        total += c.copies * (static_cast<long double>(r.theta) + static_cast<long double>(r.l) * c.alpha);
      }
      const long double user_bound = c.user.theta + static_cast<long double>(c.user.l) * c.alpha;
      if (user_bound > 0 && (c.user.l >= 1 || k < 50)) {
        EXPECT_LT(total, user_bound) << k;
      }
    }
    // The closed form of Lemma 2(3) for integer L and one copy: sum_j floor(L / 2^j) = L - popcount(L).
    if (c.copies == 1 && c.beta_product == 1) {
      const auto L = static_cast<std::uint64_t>(c.user.l);
      EXPECT_EQ(one_copy_l, L - static_cast<std::uint64_t>(__builtin_popcountll(L)));
    }
  }
}

TEST(Thresholds, ZeroMeansExact) {
  const UserBounds zero{0, 0, 0};
  for (int copies : {1, 2, 7}) {
    for (double bp : {1.0, 3.0, 8.0}) {
      for (int k = 0; k <= 60; ++k) {
        const RuntimeThresholds r = runtime_thresholds(zero, {copies, bp}, k);
        EXPECT_EQ(r.theta, 0);
        EXPECT_EQ(r.l, 0u);
        EXPECT_EQ(r.gamma, 0u);
      }
    }
  }
  // Every policy keeps them at zero, through failures and resets.
  ThresholdSchedule hopping(zero, {2, 1}, ResetPolicy::Hopping, 100);
  ThresholdSchedule sliding(zero, {1, 1}, ResetPolicy::Sliding, 100);
  ThresholdSchedule fixed(zero, {1, 1});
  for (std::uint64_t i = 0; i < 1000; i += 37) {
    for (ThresholdSchedule* s : {&hopping, &sliding, &fixed}) {
      if (i % 3 == 0) s->on_failure(i);
      s->on_progress(i);
      EXPECT_EQ(s->current().theta, 0);
      EXPECT_EQ(s->current().l, 0u);
      EXPECT_EQ(s->current().gamma, 0u);
    }
  }
  // A bound of zero in one dimension only: that dimension is exact, the others are not.
  const RuntimeThresholds mixed = runtime_thresholds({0, 10, 0}, {}, 0);
  EXPECT_EQ(mixed.theta, 0);
  EXPECT_EQ(mixed.l, 5u);
  EXPECT_EQ(mixed.gamma, 0u);
}

TEST(ThresholdSchedule, HoppingResetsAtTheNextWindow) {
  ThresholdSchedule s({800, 80, 40}, {}, ResetPolicy::Hopping, 100);
  s.on_failure(150);
  s.on_failure(170);
  EXPECT_EQ(s.failures(), 2);
  EXPECT_EQ(s.current().theta, 100);
  s.on_progress(171);
  s.on_progress(199);
  EXPECT_EQ(s.failures(), 2);  // still in window [100, 200)
  s.on_progress(200);          // the next window starts: back to the start values
  EXPECT_EQ(s.failures(), 0);
  EXPECT_EQ(s.total_failures(), 2);
  EXPECT_EQ(s.current().theta, 400);
  EXPECT_EQ(s.current().l, 40u);
  EXPECT_EQ(s.current().gamma, 20u);
  // A failure right at a window start counts in that window only.
  s.on_failure(300);
  s.on_progress(399);
  EXPECT_EQ(s.failures(), 1);
  s.on_progress(400);
  EXPECT_EQ(s.failures(), 0);
  EXPECT_EQ(s.total_failures(), 3);
}

TEST(ThresholdSchedule, SlidingResetsOnceTheLastFailureLeftTheWindow) {
  ThresholdSchedule s({800, 80, 40}, {}, ResetPolicy::Sliding, 100);
  s.on_failure(150);
  s.on_progress(249);
  EXPECT_EQ(s.failures(), 1);
  s.on_failure(240);  // a second failure before the first left the window
  s.on_progress(250);
  s.on_progress(339);
  EXPECT_EQ(s.failures(), 2);  // the last failure (240) is still in the window
  EXPECT_EQ(s.current().theta, 100);
  s.on_progress(340);
  EXPECT_EQ(s.failures(), 0);
  EXPECT_EQ(s.total_failures(), 2);
  EXPECT_EQ(s.current().theta, 400);
}

TEST(ThresholdSchedule, FixedNeverResets) {
  ThresholdSchedule s({800, 80, 40}, {});
  s.on_failure(10);
  s.on_failure(20);
  s.on_progress(1'000'000'000);
  EXPECT_EQ(s.failures(), 2);
  EXPECT_EQ(s.current().theta, 100);
  EXPECT_EQ(s.current().l, 10u);
}

TEST(ThresholdSchedule, WindowedPoliciesNeedAWindow) {
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         ThresholdSchedule({1, 1, 1}, {}, ResetPolicy::Hopping, 0);
                       }),
                       "ft.reset hopping needs a window length"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         ThresholdSchedule({1, 1, 1}, {}, ResetPolicy::Sliding, 0);
                       }),
                       "ft.reset sliding needs a window length: give --ft.reset-window"));
  EXPECT_EQ(testing::error_message<ConfigError>([] { ThresholdSchedule({1, 1, 1}, {}, ResetPolicy::Fixed, 0); }), "");
}

TEST(UserBounds, ValidateNamesTheBadBound) {
  EXPECT_EQ(testing::error_message<ConfigError>([] { UserBounds{0, 0, 0}.validate(); }), "");
  EXPECT_EQ(testing::error_message<ConfigError>([] { UserBounds{1e9, 5, 7}.validate(); }), "");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         UserBounds{-1, 0, 0}.validate();
                       }),
                       "ft.state-divergence-max (theta)"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([&] {
                         UserBounds{inf, 0, 0}.validate();
                       }),
                       "ft.state-divergence-max"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         UserBounds{1, std::nan(""), 0}.validate();
                       }),
                       "ft.unbacked-items-max (l)"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         UserBounds{1, 1, -0.5}.validate();
                       }),
                       "ft.unacked-items-max (gamma)"));
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         UserBounds{1, 1, -0.5}.validate();
                       }),
                       "expected a finite number >= 0"));
  // runtime_thresholds validates too.
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] {
                         runtime_thresholds({-1, 0, 0}, {}, 0);
                       }),
                       "ft.state-divergence-max"));
}

TEST(FtMode, ParseAndPrint) {
  for (FtMode m : {FtMode::None, FtMode::Approx, FtMode::Exact, FtMode::MicroBatch, FtMode::Ack, FtMode::Ask,
                   FtMode::Checkpoint}) {
    EXPECT_EQ(parse_ft_mode(to_string(m)), m);
  }
  EXPECT_STREQ(to_string(FtMode::Approx), "approx");
  const std::string e = testing::error_message<ConfigError>([] { parse_ft_mode("Approx"); });
  EXPECT_EQ(e, "ft.mode: expected none | approx | exact | microbatch | ack | ask | checkpoint, got 'Approx'");
  EXPECT_STREQ(to_string(FtMode::Checkpoint), "checkpoint");
  EXPECT_TRUE(contains(testing::error_message<ConfigError>([] { parse_ft_mode(""); }), "got ''"));
  for (ResetPolicy p : {ResetPolicy::Fixed, ResetPolicy::Hopping, ResetPolicy::Sliding}) {
    EXPECT_EQ(parse_reset_policy(to_string(p)), p);
  }
  EXPECT_EQ(testing::error_message<ConfigError>([] { parse_reset_policy("tumbling"); }),
            "ft.reset: expected fixed, hopping or sliding, got 'tumbling'");
}

}  // namespace
}  // namespace afs
