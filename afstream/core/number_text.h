// The shortest text of a number that reads back as exactly the same value (std::to_chars's round-trip form), for
// numbers passed on as text: a worker process's command line, operator parameters, the effective configuration.
#pragma once

#include <charconv>
#include <string>
#include <type_traits>

namespace afs {

template <typename T>
requires std::is_arithmetic_v<T> std::string exact_text(T value) {
  char buf[64];  // enough for any double, float or 64-bit integer
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace afs
