// Test helper: the message of the E a callable throws, or "" if it throws none (so tests can check both that an
// error is raised and that it names what was wrong).
#pragma once

#include <string>

namespace afs::testing {

template <typename E, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace afs::testing
