// Unit tests of the failure plan (afstream/runtime/failure_plan.h): points by items, fractions and times; worker
// lists and failure domains; seeded random schedules; each event fires once, when due.
#include "afstream/runtime/failure_plan.h"

#include <gtest/gtest.h>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

using std::chrono::milliseconds;

TEST(FailurePlan, PointsAreItemsFractionsOrTimes) {
  const auto v = parse_failure_points("1000,0.25,500ms,2s,1.5s", 10000, {1, 2});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].at_items, 1000u);
  EXPECT_FALSE(v[0].at_time);
  EXPECT_EQ(v[1].at_items, 2500u);
  EXPECT_EQ(*v[2].at_time, milliseconds(500));
  EXPECT_EQ(*v[3].at_time, milliseconds(2000));
  EXPECT_EQ(*v[4].at_time, milliseconds(1500));
  for (const auto& e : v) EXPECT_EQ(e.workers, (std::vector<int>{1, 2}));
}

TEST(FailurePlan, BadPointsNameThePart) {
  for (const char* bad : {"x", "3h", "10,,20", "5 s"}) {
    EXPECT_NE(testing::error_message<ConfigError>([&] { parse_failure_points(bad, 100, {0}); }).find("fail.at"),
              std::string::npos)
        << bad;
  }
  EXPECT_EQ(testing::error_message<ConfigError>([] { parse_failure_points("-1", 100, {0}); }),
            "fail.at: negative point '-1'");
}

TEST(FailurePlan, WorkerListsAndDomains) {
  EXPECT_EQ(parse_worker_list("all", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_worker_list("2,0", 3), (std::vector<int>{2, 0}));
  const std::vector<std::pair<std::string, std::string>> domains{{"rack1", "0,1"}, {"rack2", "2"}};
  EXPECT_EQ(parse_worker_list("rack1", 3, domains), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_worker_list("rack2", 3, domains), (std::vector<int>{2}));
  EXPECT_EQ(testing::error_message<ConfigError>([] { parse_worker_list("3", 3); }),
            "fail.target: no worker 3 (workers are 0..2)");
  EXPECT_NE(testing::error_message<ConfigError>([&] { parse_worker_list("rack3", 3, domains); }).find("rack3"),
            std::string::npos);
  EXPECT_THROW(parse_worker_list("bad", 3, {{"bad", "7"}}), ConfigError);  // a domain naming a missing worker
}

TEST(FailurePlan, RandomScheduleIsSeededAndWithinRange) {
  const auto a = random_failures(20, 1000000, {0}, 7), b = random_failures(20, 1000000, {0}, 7);
  const auto c = random_failures(20, 1000000, {0}, 8);
  ASSERT_EQ(a.size(), 20u);
  bool differs = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at_items, b[i].at_items);
    differs = differs || a[i].at_items != c[i].at_items;
    EXPECT_GE(a[i].at_items, 100000u);
    EXPECT_LE(a[i].at_items, 900000u);
  }
  EXPECT_TRUE(differs);
}

TEST(FailurePlan, EachEventFiresOnceWhenDue) {
  std::vector<FailureEvent> events = parse_failure_points("100,50ms,300", 1000, {1});
  FailurePlan plan(events);
  EXPECT_TRUE(plan.due(99, milliseconds(10)).empty());
  auto d = plan.due(100, milliseconds(10));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 100u);
  EXPECT_TRUE(plan.due(100, milliseconds(10)).empty());
  d = plan.due(150, milliseconds(60));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].at_time);
  d = plan.due(1000, milliseconds(1000));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 300u);
  EXPECT_TRUE(plan.due(5000, milliseconds(5000)).empty());
}

}  // namespace
}  // namespace afs
