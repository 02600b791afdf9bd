// parse_duration: units, fractions, and errors that name the option and the text.
#include "afstream/core/duration.h"

#include <gtest/gtest.h>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

using std::chrono::milliseconds;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration("500ms", "x"), milliseconds(500));
  EXPECT_EQ(parse_duration("2s", "x"), milliseconds(2000));
  EXPECT_EQ(parse_duration("1.5s", "x"), milliseconds(1500));
  EXPECT_EQ(parse_duration("1m", "x"), milliseconds(60000));
  EXPECT_EQ(parse_duration("2h", "x"), milliseconds(7200000));
  EXPECT_EQ(parse_duration("0s", "x"), milliseconds(0));
}

TEST(Duration, RejectsMissingUnitsAndNegativeValues) {
  for (const char* bad : {"500", "2 s", "s", "", "-1s", "1d", "nans"}) {
    EXPECT_EQ(
        testing::error_message<ConfigError>([&] { parse_duration(bad, "ft.microbatch-interval"); }),
        std::string("ft.microbatch-interval: expected a duration with a unit (500ms, 2s, 1m, 1h), got '") + bad + "'")
        << bad;
  }
}

// A value with a unit but too long to wait for is named as such (it said "expected a duration with a unit").
TEST(Duration, ATooLongDurationIsNamed) {
  EXPECT_EQ(testing::error_message<ConfigError>([&] { parse_duration("99999999999m", "ft.ack-timeout"); }),
            "ft.ack-timeout: 99999999999m is longer than this program can wait (at most 1e15 ms)");
}

}  // namespace
}  // namespace afs
