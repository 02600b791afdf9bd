// Numerical check of Theorem 1 (proofs/theorem1-sgd.md): projected online gradient descent with
// eta = eta0 / sqrt(tau) on convex losses (logistic, squared) over the L2 ball of radius rho (diameter F = 2 rho)
// keeps its regret within the proved bound, with its explicit constants, when failures move the weights (restore
// jumps of size delta_j) and drop examples. Engine-free: a minimal learner on Eigen, seeded generated data, and the
// failure model of the theorem played directly on it:
//  - adversarial: at failure j the weights are pushed away from the comparator u by theta_j + l_j * alpha_t
//    (alpha_t = H * eta_t, the largest L2 move of one example) and l_j examples are dropped; theta_j = Theta / 2^j,
//    l_j = floor(L / 2^j) (DESIGN 3 halving); the step counter never rewinds (Corollary 1.1);
//  - runtime: the weights and the step counter are backed up whenever the L2 distance from the last backup exceeds
//    theta (R-state), a failure restores the backup (jump <= theta_j, counter rewound) and drops l_j examples
//    (Corollary 1.2);
//  - diameter: no halving, every failure jumps to the point of W farthest from u (the regime of [J]'s F^2 k sqrt(T)
//    term, Corollary 1.3).
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace afs::testing {
namespace {

constexpr int kDim = 4;
constexpr double kRadius = 2.0;       // W = {w : ||w|| <= 2}
constexpr double kF = 2.0 * kRadius;  // diameter of W
enum class Loss { kLogistic, kSquared };

// ||x|| <= 1 and |y| <= 1, so H = 1 (logistic) and H = rho + 1 (squared, |w.x - y| <= rho + 1 on W).
double lipschitz(Loss loss) { return loss == Loss::kLogistic ? 1.0 : kRadius + 1.0; }
// eta0 = F / (H sqrt 2) minimises F^2 / (2 eta0) + eta0 H^2.
double eta0_for(Loss loss) { return kF / (lipschitz(loss) * std::sqrt(2.0)); }

struct Data {
  Eigen::MatrixXd x;  // one example per column
  Eigen::VectorXd y;
};

// Seeded examples from a known model w* (||w*|| = 1.5): logistic labels +-1, or clipped noisy linear targets.
Data generate(Loss loss, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::normal_distribution<double> noise(0.0, 0.3);
  Eigen::VectorXd w_star(kDim);
  w_star << 1.0, -0.75, 0.5, 0.75;
  w_star *= 1.5 / w_star.norm();
  Data d{Eigen::MatrixXd(kDim, n), Eigen::VectorXd(n)};
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < kDim; ++c) d.x(c, i) = unit(rng) / 2.0;  // ||x|| <= sqrt(4) / 2 = 1
    const double z = w_star.dot(d.x.col(i));
    if (loss == Loss::kLogistic) {
      d.y(i) = std::uniform_real_distribution<double>(0.0, 1.0)(rng) < 1.0 / (1.0 + std::exp(-4.0 * z)) ? 1.0 : -1.0;
    } else {
      d.y(i) = std::clamp(z + noise(rng), -1.0, 1.0);
    }
  }
  return d;
}

double loss_at(Loss loss, const Eigen::VectorXd& w, const Data& d, int i) {
  const double z = w.dot(d.x.col(i));
  if (loss == Loss::kLogistic) return std::log1p(std::exp(-d.y(i) * z));
  return 0.5 * (z - d.y(i)) * (z - d.y(i));
}

Eigen::VectorXd grad_at(Loss loss, const Eigen::VectorXd& w, const Data& d, int i) {
  const double z = w.dot(d.x.col(i));
  if (loss == Loss::kLogistic) return (-d.y(i) / (1.0 + std::exp(d.y(i) * z))) * d.x.col(i);
  return (z - d.y(i)) * d.x.col(i);
}

Eigen::VectorXd project(Eigen::VectorXd w) {
  const double n = w.norm();
  if (n > kRadius) w *= kRadius / n;
  return w;
}

// The best fixed u in W for the examples `idx` (with multiplicity): Newton on the (smooth, convex) total loss; the
// unconstrained minimiser is projected onto W if it lies outside (any u in W is a valid comparator, so the bound must
// hold for it regardless).
Eigen::VectorXd best_fixed(Loss loss, const Data& d, const std::vector<int>& idx) {
  Eigen::VectorXd u = Eigen::VectorXd::Zero(kDim);
  for (int it = 0; it < 30; ++it) {
    Eigen::VectorXd g = Eigen::VectorXd::Zero(kDim);
    Eigen::MatrixXd h = 1e-9 * Eigen::MatrixXd::Identity(kDim, kDim);
    for (int i : idx) {
      const auto x = d.x.col(i);
      const double z = u.dot(x);
      if (loss == Loss::kLogistic) {
        const double p = 1.0 / (1.0 + std::exp(d.y(i) * z));  // sigma(-y z)
        g -= d.y(i) * p * x;
        h += p * (1.0 - p) * x * x.transpose();
      } else {
        g += (z - d.y(i)) * x;
        h += x * x.transpose();
      }
    }
    const Eigen::VectorXd step = h.ldlt().solve(g);
    u -= step;
    if (step.norm() < 1e-12) break;
  }
  return project(u);
}

enum class Model { kAdversarial, kRuntime, kDiameter };

struct Schedule {
  Model model = Model::kAdversarial;
  int k = 0;           // failures
  double theta = 0.0;  // user bound Theta (L2 distance of the weights)
  double l = 0.0;      // user bound L (examples)
};

struct FailureLog {
  double tau = 0;    // step index of the last round before the failure (tau_{s_j})
  double delta = 0;  // ||w' - v_{s_j + 1}||: the actual jump
  double r = 0;      // rounds rewound on the step counter
  double theta_j = 0;
  int lost = 0;
};

struct PlayResult {
  double regret = 0;       // against `u` (the best fixed point of the whole stream)
  double regret_best = 0;  // against the best fixed point of the played rounds
  int rounds = 0;          // S
  double tau_last = 0;     // tau_S
  std::vector<FailureLog> failures;
};

// Plays the stream with k failures at seeded positions in [T/10, T) (after 10% of the input, as in [J]).
PlayResult play(Loss loss, const Data& d, const Schedule& sc, const Eigen::VectorXd& u, std::uint64_t seed) {
  const int n = static_cast<int>(d.y.size());
  const double h = lipschitz(loss), eta0 = eta0_for(loss);
  std::mt19937_64 rng(seed * 7919 + 17);
  std::vector<int> at(static_cast<std::size_t>(sc.k));
  for (int& p : at) p = std::uniform_int_distribution<int>(n / 10, n - 1)(rng);
  std::sort(at.begin(), at.end());

  PlayResult out;
  std::vector<int> played;
  Eigen::VectorXd w = Eigen::VectorXd::Zero(kDim), backup = w;
  double tau = 0, tau_backup = 0, eta = eta0;
  int next = 0;
  bool round_since_failure = false;
  for (int pos = 0; pos < n;) {
    if (next < sc.k && pos >= at[static_cast<std::size_t>(next)] && round_since_failure) {
      const int j = ++next;  // failure j, thresholds theta_j = Theta / 2^j, l_j = floor(L / 2^j)
      FailureLog f;
      f.theta_j = sc.model == Model::kDiameter ? sc.theta : std::ldexp(sc.theta, -j);
      f.lost = static_cast<int>(std::floor(sc.model == Model::kDiameter ? sc.l : std::ldexp(sc.l, -j)));
      f.lost = std::min(f.lost, n - pos);  // cannot lose examples past the end of the stream
      f.tau = tau;
      Eigen::VectorXd restored;
      if (sc.model == Model::kRuntime) {
        restored = backup;  // jump <= theta_j by R-state; the counter comes back with the weights
        f.r = tau - tau_backup;
        tau = tau_backup;
      } else if (sc.model == Model::kAdversarial) {
        const double target = f.theta_j + f.lost * h * eta;  // theta_j + l_j * alpha_t
        Eigen::VectorXd dir = w - u;
        if (dir.norm() < 1e-12) dir = Eigen::VectorXd::Unit(kDim, 0);
        restored = project(w + target * dir.normalized());  // the restored point is in W
      } else {
        restored = -kRadius * (u.norm() > 1e-12 ? u.normalized() : Eigen::VectorXd::Unit(kDim, 0));
      }
      f.delta = (restored - w).norm();
      w = restored;
      backup = w;
      tau_backup = tau;
      pos += f.lost;  // the lost examples are never played
      out.failures.push_back(f);
      round_since_failure = false;
      continue;
    }
    tau += 1;
    eta = eta0 / std::sqrt(tau);
    out.regret += loss_at(loss, w, d, pos) - loss_at(loss, u, d, pos);
    played.push_back(pos);
    w = project(w - eta * grad_at(loss, w, d, pos));
    round_since_failure = true;
    ++pos;
    if (sc.model == Model::kRuntime) {
      const double theta_now = std::ldexp(sc.theta, -(next + 1));  // incarnation `next` runs with theta_{next+1}
      if ((w - backup).norm() > theta_now) {
        backup = w;
        tau_backup = tau;
      }
    }
  }
  out.rounds = static_cast<int>(played.size());
  out.tau_last = tau;
  const Eigen::VectorXd best = best_fixed(loss, d, played);
  for (int i : played) out.regret_best += loss_at(loss, best, d, i) - loss_at(loss, u, d, i);
  out.regret_best = out.regret - out.regret_best;  // sum f(w_s) - sum f(best)
  return out;
}

// Theorem 1: R <= (F^2/(2 eta0) + eta0 H^2) Psi + sum_j sqrt(tau_j) min(2 F delta_j + delta_j^2, F^2) / (2 eta0),
// Psi = sqrt(tau_S) + sum_j (sqrt(tau_j) - sqrt(tau_j - r_j)).
double theorem1_bound(Loss loss, const PlayResult& r) {
  const double h = lipschitz(loss), eta0 = eta0_for(loss);
  double psi = std::sqrt(r.tau_last), jumps = 0;
  for (const auto& f : r.failures) {
    psi += std::sqrt(f.tau) - std::sqrt(f.tau - f.r);
    jumps += std::sqrt(f.tau) * std::min(2 * kF * f.delta + f.delta * f.delta, kF * kF) / (2 * eta0);
  }
  return (kF * kF / (2 * eta0) + eta0 * h * h) * psi + jumps;
}

// The base term and the jump term of Theorem 1 at the closed forms of the corollaries.
// Corollary 1.1 (monotone counter, delta_j <= theta_j + l_j H eta_{s_j}, halving):
//   sqrt(S) [F^2/(2 eta0) + eta0 H^2 + (F Theta + Theta^2/6) / eta0] + H (F L + Theta L / 3 + alpha L^2 / 6),
//   alpha = H eta0.
double corollary11_bound(Loss loss, int rounds, double theta, double l) {
  const double h = lipschitz(loss), eta0 = eta0_for(loss), alpha = h * eta0;
  return std::sqrt(rounds) * (kF * kF / (2 * eta0) + eta0 * h * h + (kF * theta + theta * theta / 6) / eta0) +
         h * (kF * l + theta * l / 3 + alpha * l * l / 6);
}
// Corollary 1.2 (counter restored with the weights, delta_j <= theta_j, halving):
//   (F^2/(2 eta0) + eta0 H^2) sqrt((k+1) S) + sqrt(S) (F Theta + Theta^2 / 6) / eta0.
double corollary12_bound(Loss loss, int rounds, int k, double theta) {
  const double h = lipschitz(loss), eta0 = eta0_for(loss);
  return (kF * kF / (2 * eta0) + eta0 * h * h) * std::sqrt((k + 1.0) * rounds) +
         std::sqrt(rounds) * (kF * theta + theta * theta / 6) / eta0;
}

constexpr Loss kLosses[] = {Loss::kLogistic, Loss::kSquared};
constexpr int kFailureCounts[] = {0, 4, 8, 16};
constexpr int kLengths[] = {1000, 10000, 100000};

// (a) the brief's model: adversarial jumps of exactly theta_j + l_j alpha_t (before projection onto W), l_j examples
// dropped, halving, monotone counter. The measured regret, against the best u of the whole stream and against the
// best u of the played rounds, never exceeds Theorem 1 with the measured jumps, nor Corollary 1.1's closed form.
TEST(SgdRegretProperty, AdversarialJumpsStayWithinTheBound) {
  int checked = 0;
  double worst = 0;  // largest regret / bound seen
  for (Loss loss : kLosses) {
    for (int n : kLengths) {
      for (std::uint64_t seed = 1; seed <= (n == 100000 ? 2u : 5u); ++seed) {
        const Data d = generate(loss, n, seed);
        std::vector<int> all(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
        const Eigen::VectorXd u = best_fixed(loss, d, all);
        for (int k : kFailureCounts) {
          const Schedule sc{Model::kAdversarial, k, 1.0, 100.0};
          const PlayResult r = play(loss, d, sc, u, seed);
          ASSERT_EQ(static_cast<int>(r.failures.size()), k);
          int lost = 0;
          for (const auto& f : r.failures) lost += f.lost;
          EXPECT_EQ(r.rounds, n - lost);
          EXPECT_LT(lost, 100);  // sum_j floor(L / 2^j) < L
          const double bound = theorem1_bound(loss, r);
          EXPECT_LE(r.regret, bound) << "n=" << n << " k=" << k << " seed=" << seed;
          EXPECT_LE(r.regret_best, bound) << "n=" << n << " k=" << k << " seed=" << seed;
          EXPECT_LE(bound, corollary11_bound(loss, r.rounds, sc.theta, sc.l) * (1 + 1e-12));
          EXPECT_GT(r.regret_best, -1e-6 * n);  // the best fixed point really is (near) the best
          worst = std::max(worst, r.regret_best / bound);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 4 * (5 + 5 + 2));
  std::printf("adversarial: largest regret / Theorem 1 bound over %d runs: %.3f\n", checked, worst);
}

// The runtime's failure model: backups of weights and counter when ||w - w_b|| > theta (R-state), a failure
// restores the backup (the jump is the divergence, <= theta_j) and rewinds the counter, l_j examples lost.
TEST(SgdRegretProperty, RestoredBackupWithRewoundCounterStaysWithinTheBound) {
  double worst = 0, rewound_max = 0;
  for (Loss loss : kLosses) {
    for (int n : kLengths) {
      for (std::uint64_t seed = 11; seed <= (n == 100000 ? 12u : 15u); ++seed) {
        const Data d = generate(loss, n, seed);
        std::vector<int> all(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
        const Eigen::VectorXd u = best_fixed(loss, d, all);
        for (int k : kFailureCounts) {
          const Schedule sc{Model::kRuntime, k, 1.0, 100.0};
          const PlayResult r = play(loss, d, sc, u, seed);
          ASSERT_EQ(static_cast<int>(r.failures.size()), k);
          double rewound = 0;
          for (const auto& f : r.failures) {
            EXPECT_LE(f.delta, f.theta_j + 1e-12);  // (I_theta)
            rewound += f.r;
          }
          EXPECT_DOUBLE_EQ(r.tau_last + rewound, r.rounds);  // tau_S + sum_j r_j = S
          const double bound = theorem1_bound(loss, r);
          EXPECT_LE(r.regret, bound) << "n=" << n << " k=" << k;
          EXPECT_LE(r.regret_best, bound) << "n=" << n << " k=" << k;
          EXPECT_LE(bound, corollary12_bound(loss, r.rounds, k, sc.theta) * (1 + 1e-12));
          worst = std::max(worst, r.regret_best / bound);
          rewound_max = std::max(rewound_max, rewound);
        }
      }
    }
  }
  EXPECT_GT(rewound_max, 0);  // the counter really was rewound
  std::printf("runtime: largest regret / Theorem 1 bound %.3f, most rounds rewound in one run %.0f\n", worst,
              rewound_max);
}

// Means over seeds, per played round: the regret against the best fixed point of the played rounds, Theorem 1's
// bound, and the diameter-only jump term of Corollary 1.3, sum_j sqrt(tau_j) F^2 / (2 eta0).
struct Averages {
  double regret = 0, bound = 0, crude_extra = 0;
};

Averages mean_average_regret(Loss loss, int n, const Schedule& sc, int seeds) {
  Averages a;
  for (int s = 1; s <= seeds; ++s) {
    const Data d = generate(loss, n, 100 + static_cast<std::uint64_t>(s));
    std::vector<int> all(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    const PlayResult r = play(loss, d, sc, best_fixed(loss, d, all), 100 + static_cast<std::uint64_t>(s));
    const double bound = theorem1_bound(loss, r);
    EXPECT_LE(r.regret_best, bound);
    double crude = 0;
    for (const auto& f : r.failures) crude += std::sqrt(f.tau) * kF * kF / (2 * eta0_for(loss));
    a.regret += r.regret_best / r.rounds / seeds;
    a.bound += bound / r.rounds / seeds;
    a.crude_extra += crude / r.rounds / seeds;
  }
  return a;
}

// (b) with k fixed the average regret falls with T (O(1/sqrt(T)) by Corollary 1.1), and so does the bound.
TEST(SgdRegretProperty, AverageRegretFallsWithTForFixedK) {
  for (Loss loss : kLosses) {
    for (int k : {4, 16}) {
      const Schedule sc{Model::kAdversarial, k, 1.0, 100.0};
      Averages prev{1e300, 1e300, 0};
      for (int n : kLengths) {
        const Averages a = mean_average_regret(loss, n, sc, 4);
        EXPECT_LT(a.regret, prev.regret) << "k=" << k << " n=" << n;
        EXPECT_LT(a.bound, prev.bound);
        prev = a;
      }
      EXPECT_LT(prev.regret, 0.05);  // at T = 1e5
    }
  }
}

// (c) jumps bounded only by the diameter (no halving, every failure jumps to the point of W farthest from u). With
// k = T^0.6 failures the diameter-only jump term per round, sum_j sqrt(tau_j) F^2 / (2 eta0 S) ~ k F^2 / (3 eta0
// sqrt(T)), grows like T^0.1, and the measured average regret does not fall (the learner never gets back to u between
// failures); with k = T^0.4 the term falls like T^-0.1 and so does the regret. With halving instead (adversarial
// model, same k = T^0.6) the learner converges: the bound of Corollary 1.1 does not depend on k.
TEST(SgdRegretProperty, FailuresGrowingFasterThanSqrtTKeepTheExtraTerm) {
  for (Loss loss : kLosses) {
    std::vector<Averages> fast, slow, halved;
    for (int n : kLengths) {
      const int k_fast = static_cast<int>(std::ceil(std::pow(n, 0.6)));
      const int k_slow = static_cast<int>(std::ceil(std::pow(n, 0.4)));
      fast.push_back(mean_average_regret(loss, n, {Model::kDiameter, k_fast, 0.0, 0.0}, 3));
      slow.push_back(mean_average_regret(loss, n, {Model::kDiameter, k_slow, 0.0, 0.0}, 3));
      halved.push_back(mean_average_regret(loss, n, {Model::kAdversarial, k_fast, 1.0, 100.0}, 3));
      std::printf(
          "%s T=%d | k=T^0.6=%d diameter jumps: avg regret %.4f, diameter term/T %.3f | k=T^0.4=%d: avg regret %.4f, "
          "diameter term/T %.3f | k=T^0.6 halving: avg regret %.4f, bound/T %.4f\n",
          loss == Loss::kLogistic ? "logistic" : "squared", n, k_fast, fast.back().regret, fast.back().crude_extra,
          k_slow, slow.back().regret, slow.back().crude_extra, halved.back().regret, halved.back().bound);
    }
    for (std::size_t i = 1; i < fast.size(); ++i) {
      EXPECT_GT(fast[i].crude_extra, fast[i - 1].crude_extra);  // the [J]-form extra term per round grows
      EXPECT_GT(fast[i].regret, 0.8 * fast[i - 1].regret);      // the measured average regret does not vanish
      EXPECT_LT(slow[i].crude_extra, slow[i - 1].crude_extra);  // k = T^0.4: the term falls ...
      EXPECT_LT(slow[i].regret, slow[i - 1].regret);            // ... and so does the regret
      EXPECT_LT(halved[i].regret, 0.5 * halved[i - 1].regret);  // halving: converges even with k = T^0.6
    }
    EXPECT_GT(fast.back().regret, 0.2);
  }
}

}  // namespace
}  // namespace afs::testing
