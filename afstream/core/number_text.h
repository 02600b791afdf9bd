// The shortest text of a number that reads back as exactly the same value (std::to_chars's round-trip form), for
// numbers passed on as text: a worker process's command line, operator parameters, the effective configuration.
#pragma once

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace afs {

template <typename T>
requires std::is_arithmetic_v<T> std::string exact_text(T value) {
  char buf[64];  // enough for any double, float or 64-bit integer
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// A double as people write it: printf's %g with the fewest significant digits (15 to 17) that read back as exactly the
// same value, so 0.9 is "0.9" (not 0.90000000000000002, Boost's help text) and 1e5 is "100000" (not to_chars's
// shortest "1e+05"). For text people read: option defaults in --help.
inline std::string readable_text(double value) {
  char buf[64];
  for (int digits = 15;; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    if (digits == 17 || std::strtod(buf, nullptr) == value) return buf;
  }
}

}  // namespace afs
