#include "afstream/core/params.h"

#include <charconv>
#include <cmath>

#include "afstream/core/errors.h"

namespace afs {

std::string Params::get_string(const std::string& name, const std::string& fallback) const {
  note_read(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

double Params::get_double(const std::string& name, double fallback) const {
  note_read(name);
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  try {
    std::size_t used = 0;
    double v = std::stod(it->second, &used);
    if (used != it->second.size() || !std::isfinite(v)) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    throw ConfigError("parameter '" + name + "': expected a number, got '" + it->second + "'");
  }
}

std::int64_t Params::get_int(const std::string& name, std::int64_t fallback) const {
  note_read(name);
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  std::int64_t v = 0;
  const auto& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    // Accept integral values written in scientific notation ("1e6").
    double d = get_double(name, 0);
    if (d != std::floor(d) || std::fabs(d) > 9e18) {
      throw ConfigError("parameter '" + name + "': expected an integer, got '" + s + "'");
    }
    return static_cast<std::int64_t>(d);
  }
  return v;
}

std::uint64_t Params::get_uint(const std::string& name, std::uint64_t fallback) const {
  if (!has(name)) return fallback;
  // The whole uint64 range (a seed derived by multiplying one given on the command line may pass 2^63); else as
  // get_int (scientific notation, or a negative number refused).
  const auto& s = values_.at(name);
  std::uint64_t u = 0;
  if (const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), u);
      ec == std::errc() && p == s.data() + s.size()) {
    return u;
  }
  auto v = get_int(name, 0);
  if (v < 0) throw ConfigError("parameter '" + name + "': expected a non-negative integer, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

std::vector<std::string> Params::unread() const {
  std::vector<std::string> names;
  for (const auto& [k, v] : values_) {
    if (read_.count(k) == 0) names.push_back(k);
  }
  return names;
}

}  // namespace afs
