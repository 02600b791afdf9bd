// Durations with units (duration.h).
#include "afstream/core/duration.h"

#include <cmath>
#include <string>

#include "afstream/core/errors.h"

namespace afs {

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view option) {
  const auto bad = [&] {
    return ConfigError(std::string(option) + ": expected a duration with a unit (500ms, 2s, 1m, 1h), got '" +
                       std::string(text) + "'");
  };
  const std::string s(text);
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  const std::string unit = s.substr(used);
  double ms = 0;
  if (unit == "ms") {
    ms = v;
  } else if (unit == "s") {
    ms = v * 1000;
  } else if (unit == "m") {
    ms = v * 60000;
  } else if (unit == "h") {
    ms = v * 3600000;
  } else {
    throw bad();
  }
  if (!(ms >= 0) || !std::isfinite(ms)) throw bad();
  // Past about 31,000 years: a typo more likely than a wish (a count of milliseconds overflowed into nonsense).
  if (ms > 1e15) {
    throw ConfigError(std::string(option) + ": " + s + " is longer than this program can wait (at most 1e15 ms)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

}  // namespace afs
