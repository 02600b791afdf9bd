// Test helper: the message of the E a callable throws, or "" if it throws none (so tests can check both that an
// error is raised and that it names what was wrong).
#pragma once

#include <gtest/gtest.h>

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

// Expects f to throw an E whose message contains needle.
template <typename E, typename F>
void expect_throw_mentioning(F&& f, const std::string& needle) {
  const std::string msg = error_message<E>(f);
  if (msg.empty()) {
    ADD_FAILURE() << "expected an exception mentioning '" << needle << "'";
  } else {
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

}  // namespace afs::testing
