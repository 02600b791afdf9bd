// A worker process's progress page (afstream/runtime/progress_page.h): what a process killed with SIGKILL had
// published is what its next incarnation reads; pages of other workers, of later incarnations, half laid out or
// truncated read as none; a new incarnation's positions never go below the crashed one's.
#include "afstream/runtime/progress_page.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "afstream/core/errors.h"
#include "tests/temp_dir.h"

namespace {

using afs::ProgressPage;
using afs::SeqByChannel;

TEST(ProgressPage, WhatAKilledProcessPublishedIsReadByItsNextIncarnation) {
  afs::testing::TempDir dir;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the "worker process": publishes, then dies without unmapping or closing anything
    const std::array<std::uint32_t, 2> channels{3, 7};
    ProgressPage page(dir.str(), 2, 1, channels, {});
    for (std::uint64_t s = 1; s <= 1000; ++s) page.publish(0, s);
    page.publish(1, 42);
    page.publish_losses(250, 13);  // what a failure now would lose
    ::kill(::getpid(), SIGKILL);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto read = ProgressPage::read(dir.str(), 2, 2);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->processed, (SeqByChannel{{3, 1000}, {7, 42}}));
  EXPECT_EQ(read->lost_items, 250u);
  EXPECT_EQ(read->lost_outputs, 13u);
}

// A new incarnation's page holds the crashed one's positions until it publishes its own (Worker::restore publishes
// the restored ones), which may be lower: a worker killed again before it is back where the first one was is read
// where it was, as on threads.
TEST(ProgressPage, TheCrashedOnesPositionsStayUntilTheNewIncarnationPublishesItsOwn) {
  afs::testing::TempDir dir;
  const std::array<std::uint32_t, 2> channels{0, 1};
  { ProgressPage page(dir.str(), 0, 2, channels, SeqByChannel{{0, 500}, {1, 20}}); }  // killed before its restore
  auto read = ProgressPage::read(dir.str(), 0, 3);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->processed, (SeqByChannel{{0, 500}, {1, 20}}));
  {
    ProgressPage page(dir.str(), 0, 3, channels, read->processed);
    page.publish(0, 300);  // restored from an older backup: behind the crashed incarnation on channel 0
    page.publish(1, 25);   // past it on channel 1
  }
  read = ProgressPage::read(dir.str(), 0, 4);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->processed, (SeqByChannel{{0, 300}, {1, 25}}));
}

TEST(ProgressPage, OnlyAnEarlierIncarnationOfTheSameWorkerIsRead) {
  afs::testing::TempDir dir;
  const std::array<std::uint32_t, 1> channels{9};
  { ProgressPage page(dir.str(), 1, 3, channels, SeqByChannel{{9, 77}}); }
  EXPECT_FALSE(ProgressPage::read(dir.str(), 1, 3).has_value());  // its own incarnation's: not a crash's
  EXPECT_FALSE(ProgressPage::read(dir.str(), 1, 2).has_value());  // a later one's
  EXPECT_FALSE(ProgressPage::read(dir.str(), 0, 4).has_value());  // another worker's file: none there
  std::filesystem::copy_file(ProgressPage::path_in(dir.str(), 1), ProgressPage::path_in(dir.str(), 0));
  EXPECT_FALSE(ProgressPage::read(dir.str(), 0, 4).has_value());  // another worker's page under this name
  EXPECT_EQ(ProgressPage::read(dir.str(), 1, 4).value_or(ProgressPage::Seen{}).processed, (SeqByChannel{{9, 77}}));
}

// A page left by an incarnation older than the crashed one is stale: a worker started by hand moved to another
// host (another --worker.local-state) ran there as incarnation 2 and got further; incarnation 3, back on the first
// host, found incarnation 1's page, took it for the crash's positions (behind its restored backup: repeated_items 0,
// the replay over at once) instead of not knowing them.
TEST(ProgressPage, APageOfAnIncarnationBeforeTheCrashedOneReadsAsNone) {
  afs::testing::TempDir dir;
  const std::array<std::uint32_t, 1> channels{0};
  {
    ProgressPage page(dir.str(), 1, 1, channels, {});
    page.publish(0, 1000);
  }
  // Incarnation 1 crashed: its page.
  EXPECT_EQ(ProgressPage::read(dir.str(), 1, 2).value_or(ProgressPage::Seen{}).processed, (SeqByChannel{{0, 1000}}));
  EXPECT_FALSE(ProgressPage::read(dir.str(), 1, 3).has_value());  // incarnation 2 crashed: not its page
}

TEST(ProgressPage, ATornOrTruncatedPageReadsAsNone) {
  afs::testing::TempDir dir;
  const std::array<std::uint32_t, 3> channels{0, 1, 2};
  { ProgressPage page(dir.str(), 5, 1, channels, {}); }
  const auto path = ProgressPage::path_in(dir.str(), 5);
  ASSERT_TRUE(ProgressPage::read(dir.str(), 5, 2).has_value());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);  // its last cell cut short
  EXPECT_FALSE(ProgressPage::read(dir.str(), 5, 2).has_value());
  std::filesystem::resize_file(path, 10);  // the header cut short
  EXPECT_FALSE(ProgressPage::read(dir.str(), 5, 2).has_value());
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "not a progress page, just some text of some length";
  }
  EXPECT_FALSE(ProgressPage::read(dir.str(), 5, 2).has_value());
  EXPECT_FALSE(ProgressPage::read(dir.str() + "/missing", 5, 2).has_value());
}

TEST(ProgressPage, ADirectoryThatCannotHoldItIsNamedInTheError) {
  afs::testing::TempDir dir;
  const std::array<std::uint32_t, 1> channels{0};
  const auto missing = dir.str() + "/no-such-dir";
  try {
    ProgressPage page(missing, 0, 1, channels, {});
    FAIL() << "expected RuntimeError";
  } catch (const afs::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(missing + "/worker-0.progress"), std::string::npos) << e.what();
  }
}

}  // namespace
