// Synthetic datasets: counter-based random streams (splitmix64), the true models and the HIGGS-/KDD-like presets.
#include "ml/generators.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::ml {

namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A splitmix64 stream started at a mixed key: the same key always gives the same numbers.
class Stream {
 public:
  explicit Stream(std::uint64_t key) : state_(mix64(key)) {}
  std::uint64_t next() { return mix64(state_ += kGolden); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }             // [0, 1)
  double open_uniform() { return (static_cast<double>(next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
  double gaussian() {
    const double r = std::sqrt(-2 * std::log(open_uniform()));
    return r * std::cos(2 * std::numbers::pi * uniform());
  }

 private:
  std::uint64_t state_;
};

std::string range_error(const char* name, const std::string& got, const char* range) {
  return std::string("synthetic data: ") + name + " " + got + " is outside " + range;
}

}  // namespace

SyntheticParams higgs_like(std::uint64_t num_examples, std::uint64_t seed) {
  return {.model = SyntheticModel::kLogistic,
          .num_examples = num_examples,
          .num_features = 28,
          .noise = 1,
          .weight_scale = 0.15,
          .seed = seed};
}

SyntheticParams kdd_like(std::uint64_t num_examples, std::uint64_t seed) {
  return {.model = SyntheticModel::kLogistic,
          .num_examples = num_examples,
          .num_features = 1'000'000,
          .sparse = true,
          .active = 11,
          .skew = 2,
          .hash_bits = 18,
          .noise = 1,
          .weight_scale = 1,
          .seed = seed};
}

SyntheticDataset::SyntheticDataset(const SyntheticParams& p) : p_(p) {
  if (p.model != SyntheticModel::kLogistic && p.model != SyntheticModel::kLinear &&
      p.model != SyntheticModel::kMulticlass) {
    throw ConfigError("synthetic data: unknown model " + std::to_string(static_cast<int>(p.model)));
  }
  if (p.num_examples < 1 || p.num_examples > (std::uint64_t{1} << 62)) {
    throw ConfigError(range_error("num_examples", std::to_string(p.num_examples), "[1, 2^62]"));
  }
  if (p.num_features < 1 || p.num_features > (std::size_t{1} << 31)) {
    throw ConfigError(range_error("num_features", std::to_string(p.num_features), "[1, 2^31]"));
  }
  if (p.sparse) {
    if (p.active < 1 || p.active > p.num_features) {
      throw ConfigError(range_error("active", std::to_string(p.active), "[1, num_features]"));
    }
    if (p.hash_bits < 0 || p.hash_bits > 31) {
      throw ConfigError(range_error("hash_bits", std::to_string(p.hash_bits), "[0, 31]"));
    }
    if (!(p.skew >= 0) || !std::isfinite(p.skew)) {
      throw ConfigError(range_error("skew", std::to_string(p.skew), "[0, inf)"));
    }
  }
  if (!(p.noise >= 0) || !std::isfinite(p.noise)) {
    throw ConfigError(range_error("noise", std::to_string(p.noise), "[0, inf)"));
  }
  if (!std::isfinite(p.drift)) throw ConfigError("synthetic data: drift must be finite");
  if (!(p.weight_scale > 0) || !std::isfinite(p.weight_scale)) {
    throw ConfigError(range_error("weight_scale", std::to_string(p.weight_scale), "(0, inf)"));
  }
  if (p.model == SyntheticModel::kMulticlass && (p.num_classes < 2 || p.num_classes > 65536)) {
    throw ConfigError(range_error("num_classes", std::to_string(p.num_classes), "[2, 65536]"));
  }
  example_base_ = mix64(p.seed ^ 0x6578616D706C6573ULL);  // "examples"
  weight_base_ = mix64(p.seed ^ 0x7765696768747321ULL);   // "weights!"
  if (!p.sparse) {
    const std::size_t d = p.num_features;
    const Eigen::Index n = static_cast<Eigen::Index>(static_cast<std::size_t>(outputs()) * (d + 1));
    a_.resize(n);
    b_.resize(n);
    for (int k = 0; k < outputs(); ++k) {
      for (std::size_t j = 0; j <= d; ++j) {
        const Eigen::Index i = static_cast<Eigen::Index>(static_cast<std::size_t>(k) * (d + 1) + j);
        Stream s(weight_base_ + (static_cast<std::uint64_t>(k) << 32) * kGolden + j * 0xD1B54A32D192ED03ULL);
        a_[i] = p.weight_scale * s.gaussian();
        b_[i] = p.weight_scale * s.gaussian();
      }
    }
  }
}

DatasetInfo SyntheticDataset::info() const {
  DatasetInfo i;
  i.sparse = p_.sparse;
  i.num_features = p_.sparse && p_.hash_bits > 0 ? (std::size_t{1} << p_.hash_bits) : p_.num_features;
  switch (p_.model) {
    case SyntheticModel::kLogistic:
      i.labels = LabelKind::kBinary;
      i.num_classes = 2;
      break;
    case SyntheticModel::kLinear:
      i.labels = LabelKind::kReal;
      i.num_classes = 0;
      break;
    case SyntheticModel::kMulticlass:
      i.labels = LabelKind::kClass;
      i.num_classes = p_.num_classes;
      break;
  }
  return i;
}

double SyntheticDataset::true_weight(int k, std::uint64_t j, std::uint64_t n) const {
  double a, b;
  if (!p_.sparse) {
    const Eigen::Index i = static_cast<Eigen::Index>(static_cast<std::size_t>(k) * (p_.num_features + 1) + j);
    a = a_[i];
    b = b_[i];
  } else {  // the same streams as the dense table, computed on demand (the id space may be huge)
    Stream s(weight_base_ + (static_cast<std::uint64_t>(k) << 32) * kGolden + j * 0xD1B54A32D192ED03ULL);
    a = p_.weight_scale * s.gaussian();
    b = p_.weight_scale * s.gaussian();
  }
  if (p_.drift == 0) return a;
  const double angle = p_.drift * static_cast<double>(n);
  return std::cos(angle) * a + std::sin(angle) * b;
}

double SyntheticDataset::true_bias(int k, std::uint64_t n) const { return true_weight(k, p_.num_features, n); }

Eigen::VectorXd SyntheticDataset::true_weights(std::uint64_t n) const {
  const std::size_t total = static_cast<std::size_t>(outputs()) * (p_.num_features + 1);
  if (total > (std::size_t{1} << 24)) {
    throw std::invalid_argument("true_weights: " + std::to_string(total) + " entries is too many to materialize");
  }
  Eigen::VectorXd w(static_cast<Eigen::Index>(total));
  for (int k = 0; k < outputs(); ++k) {
    for (std::size_t j = 0; j <= p_.num_features; ++j) {
      w[static_cast<Eigen::Index>(static_cast<std::size_t>(k) * (p_.num_features + 1) + j)] = true_weight(k, j, n);
    }
  }
  return w;
}

double SyntheticDataset::score(int k, const Example& x, const std::vector<std::uint64_t>& raw, std::uint64_t n) const {
  double m = true_bias(k, n);
  if (!p_.sparse) {
    if (p_.drift == 0) {
      const Eigen::Index base = static_cast<Eigen::Index>(static_cast<std::size_t>(k) * (p_.num_features + 1));
      return m + a_.segment(base, static_cast<Eigen::Index>(p_.num_features)).dot(x.dense);
    }
    for (std::size_t j = 0; j < p_.num_features; ++j) m += true_weight(k, j, n) * x.dense[static_cast<Eigen::Index>(j)];
    return m;
  }
  for (std::size_t f = 0; f < raw.size(); ++f) m += true_weight(k, raw[f], n) * x.values[f];
  return m;
}

void SyntheticDataset::example(std::uint64_t n, Example& out) const {
  if (n >= p_.num_examples) {
    throw std::out_of_range("synthetic data: example " + std::to_string(n) + " of " + std::to_string(p_.num_examples));
  }
  out.clear();
  Stream s(example_base_ + n * kGolden);
  std::vector<std::uint64_t> raw;
  if (!p_.sparse) {
    out.dense.resize(static_cast<Eigen::Index>(p_.num_features));
    for (std::size_t j = 0; j < p_.num_features; ++j) out.dense[static_cast<Eigen::Index>(j)] = s.gaussian();
  } else {
    const std::uint64_t field = p_.num_features / p_.active;
    raw.reserve(p_.active);
    out.indices.reserve(p_.active);
    out.values.reserve(p_.active);
    for (std::size_t f = 0; f < p_.active; ++f) {
      const double u = p_.skew == 0 ? s.uniform() : std::pow(s.uniform(), 1 + p_.skew);
      const std::uint64_t id = f * field + std::min<std::uint64_t>(field - 1, static_cast<std::uint64_t>(u * field));
      raw.push_back(id);
      out.add_feature(p_.hash_bits > 0 ? hash_index(id, 0, p_.hash_bits) : static_cast<std::uint32_t>(id), 1.0);
    }
  }
  switch (p_.model) {
    case SyntheticModel::kLogistic: {
      const double m = score(0, out, raw, n);
      if (p_.noise == 0) {
        out.label = m >= 0 ? 1 : -1;
      } else {
        const double pr = 1 / (1 + std::exp(-m / p_.noise));
        out.label = s.uniform() < pr ? 1 : -1;
      }
      break;
    }
    case SyntheticModel::kLinear:
      out.label = score(0, out, raw, n) + (p_.noise == 0 ? 0 : p_.noise * s.gaussian());
      break;
    case SyntheticModel::kMulticlass: {
      int best = 0;
      double best_v = -INFINITY;
      for (int k = 0; k < p_.num_classes; ++k) {
        double v = score(k, out, raw, n);
        if (p_.noise > 0) v += p_.noise * -std::log(-std::log(s.open_uniform() * (1 - 0x1.0p-53)));
        if (v > best_v) {
          best_v = v;
          best = k;
        }
      }
      out.label = best;
      break;
    }
  }
}

}  // namespace afs::ml
