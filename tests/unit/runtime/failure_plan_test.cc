// Unit tests of the failure plan (afstream/runtime/failure_plan.h): points by items, fractions and times; worker
// lists and failure domains; seeded random schedules; each event fires once, when due; the input progress the
// points are measured in.
#include "afstream/runtime/failure_plan.h"

#include <gtest/gtest.h>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

using std::chrono::milliseconds;

TEST(FailurePlan, PointsAreItemsFractionsOrTimes) {
  const auto v = parse_failure_points("1000,0.25,500ms,2s,1.5s,1m", 10000, {1, 2});
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0].at_items, 1000u);
  EXPECT_FALSE(v[0].at_time);
  EXPECT_EQ(v[1].at_items, 2500u);
  EXPECT_EQ(*v[2].at_time, milliseconds(500));
  EXPECT_EQ(*v[3].at_time, milliseconds(2000));
  EXPECT_EQ(*v[4].at_time, milliseconds(1500));
  EXPECT_EQ(*v[5].at_time, milliseconds(60000));  // minutes, as every duration option takes
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
  // Not finite, or past what an item count or a time holds: refused, not cast (undefined behaviour).
  for (const char* bad : {"nan", "inf", "1e30", "1e30s", "produced:inf"}) {
    EXPECT_NE(testing::error_message<ConfigError>([&] { parse_failure_points(bad, 100, {0}); }).find("fail.at"),
              std::string::npos)
        << bad;
  }
  // From 1 on a point is an item count: 1.5 is neither that nor a fraction (it was read as item 1).
  EXPECT_EQ(testing::error_message<ConfigError>([] { parse_failure_points("1.5", 100, {0}); }),
            "fail.at: '1.5' is neither a fraction of the input (below 1) nor a whole item count");
  EXPECT_EQ(parse_failure_points("1,1e3,0.5", 10000, {0})[1].at_items, 1000u);
  // A count past the input never comes (the run was written down as one with failures): refused. The last item is
  // a point; a total of 0 (not known) checks nothing.
  EXPECT_EQ(testing::error_message<ConfigError>([] { parse_failure_points("1e3", 100, {0}); }),
            "fail.at: '1e3' is past the input, which has 100 items (a fraction below 1 names a point within it)");
  EXPECT_EQ(parse_failure_points("100", 100, {0})[0].at_items, 100u);
  EXPECT_EQ(parse_failure_points("1000", 0, {0})[0].at_items, 1000u);
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
  // A domain naming a missing worker: the domain is named, not fail.target.
  EXPECT_EQ(testing::error_message<ConfigError>([] {
              parse_worker_list("bad", 3, {{"bad", "1,7"}});
            }),
            "fail.domain bad=1,7: no worker 7 (workers are 0..2)");
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
  EXPECT_TRUE(plan.pending());
  EXPECT_FALSE(FailurePlan({}).pending());                    // nothing to inject: the run loop need not poll
  EXPECT_TRUE(plan.due(99, 5000, milliseconds(10)).empty());  // input processed, not produced
  auto d = plan.due(100, 100, milliseconds(10));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 100u);
  EXPECT_TRUE(plan.due(100, 100, milliseconds(10)).empty());
  d = plan.due(150, 150, milliseconds(60));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].at_time);
  d = plan.due(1000, 1000, milliseconds(1000));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 300u);
  EXPECT_FALSE(plan.pending());
  EXPECT_TRUE(plan.due(5000, 5000, milliseconds(5000)).empty());
}

// An event due while one of its workers restarts waits for it, and so do later events on its workers; events on
// other workers fire; each event fires once, so every point is a failure of a started incarnation.
TEST(FailurePlan, AnEventDueWhileItsWorkersRestartWaitsForThem) {
  auto events = parse_failure_points("10,20,30", 1000, {2, 0});
  events.push_back(parse_failure_points("25", 1000, {1})[0]);
  FailurePlan plan(events);
  std::vector<bool> up{true, true, true};
  const auto ready = [&](int w) { return static_cast<bool>(up[static_cast<std::size_t>(w)]); };
  auto d = plan.due(30, 30, milliseconds(0), ready);  // 10, 20 and 30 on {2, 0} passed together: the first fires
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].at_items, 10u);
  EXPECT_EQ(d[1].at_items, 25u);  // other workers: not held up
  up[2] = false;                  // 2 and 0 restart
  up[0] = false;
  EXPECT_TRUE(plan.due(40, 40, milliseconds(0), ready).empty());
  up[0] = true;  // 2 is still restarting
  EXPECT_TRUE(plan.due(40, 40, milliseconds(0), ready).empty());
  EXPECT_TRUE(plan.pending());
  up[2] = true;
  d = plan.due(40, 40, milliseconds(0), ready);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 20u);
  d = plan.due(40, 40, milliseconds(0), ready);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 30u);
  EXPECT_FALSE(plan.pending());
}

// A waiting event on {0, 1} holds back a later one on {0} alone: the plan's order is kept per worker.
TEST(FailurePlan, AWaitingEventHoldsBackLaterOnesOnItsWorkers) {
  auto events = parse_failure_points("10", 100, {0, 1});
  events.push_back(parse_failure_points("20", 100, {0})[0]);
  FailurePlan plan(events);
  bool up1 = false;
  const auto ready = [&](int w) { return w == 0 || up1; };
  EXPECT_TRUE(plan.due(50, 50, milliseconds(0), ready).empty());
  up1 = true;
  auto d = plan.due(50, 50, milliseconds(0), ready);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].workers, (std::vector<int>{0, 1}));
  d = plan.due(50, 50, milliseconds(0), ready);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].workers, (std::vector<int>{0}));
}

// produced: points count what the sources produced, whatever the workers have processed.
TEST(FailurePlan, ProducedPointsCountTheSourcesItems) {
  const auto v = parse_failure_points("produced:0.9,produced:700,0.5", 1000, {1});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(v[0].produced);
  EXPECT_EQ(v[0].at_items, 900u);
  EXPECT_TRUE(v[1].produced);
  EXPECT_EQ(v[1].at_items, 700u);
  EXPECT_FALSE(v[2].produced);
  FailurePlan plan(v);
  auto d = plan.due(10, 800, milliseconds(1));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 700u);
  d = plan.due(600, 950, milliseconds(2));  // both due, on the same worker: one failure at a time
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 900u);
  d = plan.due(600, 950, milliseconds(3));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].at_items, 500u);
  EXPECT_THROW(parse_failure_points("produced:500ms", 1000, {1}), ConfigError);
  EXPECT_THROW(parse_failure_points("produced:", 1000, {1}), ConfigError);
}

// The progress is what the stages fed by the sources have processed, capped by what the sources produced.
TEST(InputProgress, CountsWhatTheStagesFedBySourcesProcessed) {
  const Topology t = TopologyBuilder()
                         .source("src", "s")
                         .parallelism(2)
                         .stage("op", "o")
                         .parallelism(3)
                         .key_by()
                         .from("src")
                         .stage("sink", "k")
                         .from("op")
                         .build();  // workers 0-1 src, 2-4 op, 5 sink
  const InputProgress progress(t);
  std::vector<std::uint64_t> position{600, 400, 100, 50, 25, 7};
  const auto at = [&](int w) { return position[static_cast<std::size_t>(w)]; };
  EXPECT_EQ(progress(1000, at), 175u);  // the op stage: 100 + 50 + 25; the sink does not count
  position = {600, 400, 500, 400, 300, 7};
  EXPECT_EQ(progress(1000, at), 1000u);  // never beyond what the sources produced
}

// Two sources into one stage (a join): each source item reaches one worker of it once.
TEST(InputProgress, AStageFedByTwoSourcesCountsBoth) {
  const Topology t = TopologyBuilder()
                         .source("a", "s")
                         .source("b", "s")
                         .stage("join", "j")
                         .parallelism(2)
                         .key_by()
                         .from("a")
                         .from("b")
                         .build();  // 0 a, 1 b, 2-3 join
  const InputProgress progress(t);
  EXPECT_EQ(progress(900, [](int w) { return w >= 2 ? std::uint64_t{200} : std::uint64_t{450}; }), 400u);
}

// A broadcast stage sees every source item in each worker: it does not count; with no stage that counts, the
// sources' production is the measure.
TEST(InputProgress, BroadcastStagesDoNotCount) {
  const Topology t =
      TopologyBuilder().source("src", "s").stage("all", "o").parallelism(4).broadcast().from("src").build();
  const InputProgress progress(t);
  EXPECT_EQ(progress(500, [](int) { return std::uint64_t{10}; }), 500u);
}

}  // namespace
}  // namespace afs
