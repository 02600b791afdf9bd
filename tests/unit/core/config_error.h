// Test helper: the message of the ConfigError a callable throws, or "" if it throws none.
#pragma once

#include <string>

#include "afstream/core/errors.h"

namespace afs {

template <typename F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace afs
