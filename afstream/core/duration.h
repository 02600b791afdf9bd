// Durations on the command line and in job files carry units (DESIGN 7): "500ms", "2s", "1.5s", "1m".
#pragma once

#include <chrono>
#include <string_view>

namespace afs {

// Parses a non-negative duration with a unit (ms, s, m or h). Throws ConfigError naming `option` and the text.
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view option);

}  // namespace afs
