// Unit tests of the asynchronous backup writer (afstream/ft/backup_writer.h; DESIGN.md section 4): tickets confirm
// in order, wait() blocks until a ticket is written, a failed task's exception reaches the compute thread, and
// abandon() drops what is still queued (a crash), and a small backup is written on the calling thread only when the
// backup thread is idle.
#include "afstream/ft/backup_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace afs {
namespace {

using namespace std::chrono_literals;

// A task that blocks the writer thread until open() is called.
class Gate {
 public:
  BackupWriter::Task blocker() {
    return [this] {
      entered_.set_value();
      opened_.wait();
    };
  }
  void wait_entered() { entered_future_.wait(); }
  void open() { release_.set_value(); }

 private:
  std::promise<void> entered_;
  std::future<void> entered_future_ = entered_.get_future();
  std::promise<void> release_;
  std::shared_future<void> opened_ = release_.get_future().share();
};

TEST(BackupWriter, TicketsCountUpAndConfirmInOrder) {
  BackupWriter w;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 100; ++i) {
    tickets.push_back(w.submit([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
    }));
  }
  for (std::uint64_t i = 0; i < tickets.size(); ++i) EXPECT_EQ(tickets[i], i + 1);
  w.wait(100);
  EXPECT_EQ(w.confirmed(), 100u);
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(BackupWriter, ConfirmedOnlyCoversCompletedTasks) {
  Gate gate;  // outlives the writer, whose thread runs its blocker
  BackupWriter w;
  EXPECT_EQ(w.confirmed(), 0u);
  const auto t1 = w.submit([] {});
  w.wait(t1);
  EXPECT_EQ(w.confirmed(), 1u);
  const auto t2 = w.submit(gate.blocker());
  std::atomic<bool> third_ran{false};
  const auto t3 = w.submit([&] { third_ran = true; });
  gate.wait_entered();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(w.confirmed(), 1u) << "ticket 2 is still running";
  EXPECT_FALSE(third_ran.load()) << "tasks run one at a time, in order";
  gate.open();
  w.wait(t3);
  EXPECT_TRUE(third_ran.load());
  EXPECT_EQ(w.confirmed(), 3u);
  EXPECT_EQ(t2, 2u);
}

// With nothing queued or in hand the task is written on the calling thread and confirmed on return; while the backup
// thread is busy it is queued behind, in order, and the call returns without waiting.
TEST(BackupWriter, SubmitInlineIfIdleWritesHereOnlyWhenTheThreadIsIdle) {
  Gate gate;  // outlives the writer, whose thread runs its blocker
  BackupWriter w;
  const auto caller = std::this_thread::get_id();
  bool ran_here = false;
  for (int i = 0; i < 200 && !ran_here; ++i) {  // the thread reports idle once it has started and found no work
    std::thread::id ran_on;
    const auto t = w.submit_inline_if_idle([&] { ran_on = std::this_thread::get_id(); });
    w.wait(t);
    ran_here = ran_on == caller;
    if (ran_here) {
      EXPECT_TRUE(w.is_confirmed(t));
    } else {
      std::this_thread::sleep_for(5ms);
    }
  }
  EXPECT_TRUE(ran_here) << "never written inline although the backup thread had nothing to do";

  const auto busy = w.submit(gate.blocker());
  gate.wait_entered();
  std::mutex mu;
  std::vector<int> order;
  std::thread::id ran_on;
  const auto queued = w.submit_inline_if_idle([&] {
    std::lock_guard lock(mu);
    ran_on = std::this_thread::get_id();
    order.push_back(2);
  });
  EXPECT_EQ(queued, busy + 1);
  EXPECT_FALSE(w.is_confirmed(queued)) << "returned without waiting for the busy thread";
  {
    std::lock_guard lock(mu);
    order.push_back(1);
  }
  gate.open();
  w.wait(queued);
  std::lock_guard lock(mu);
  EXPECT_NE(ran_on, caller);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(BackupWriter, WaitBlocksUntilTheTicketIsWritten) {
  Gate gate;  // outlives the writer, whose thread runs its blocker
  BackupWriter w;
  const auto t = w.submit(gate.blocker());
  gate.wait_entered();
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    w.wait(t);
    returned = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(returned.load());
  gate.open();
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_GE(w.confirmed(), t);
  w.wait(t);  // an already confirmed ticket returns at once
  w.wait(0);
}

TEST(BackupWriter, AFailedTaskIsRethrownByConfirmedAndWait) {
  BackupWriter w;
  const auto ok = w.submit([] {});
  w.wait(ok);
  const auto bad = w.submit([] { throw std::runtime_error("backup store: disk full"); });
  try {
    w.wait(bad);
    ADD_FAILURE() << "wait() must rethrow the task's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "backup store: disk full");
  }
  EXPECT_THROW(w.confirmed(), std::runtime_error);
  EXPECT_THROW(w.confirmed(), std::runtime_error);  // it stays failed
  EXPECT_THROW(w.wait(ok), std::runtime_error);
}

TEST(BackupWriter, TasksAfterAFailedOneAreNotWritten) {
  // Writing a delta after a lost one would leave a chain with a gap in the store: restoring it gives a wrong state
  // without any error. So once a task has failed, later tasks must not run.
  Gate gate;  // outlives the writer, whose thread runs its blocker
  BackupWriter w;
  std::atomic<int> ran{0};
  w.submit(gate.blocker());
  const auto bad = w.submit([] { throw std::runtime_error("lost delta"); });
  w.submit([&] { ++ran; });
  w.submit([&] { ++ran; });
  gate.open();
  EXPECT_THROW(w.wait(bad), std::runtime_error);
  const auto late = w.submit([&] { ++ran; });
  EXPECT_THROW(w.wait(late), std::runtime_error);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ran.load(), 0);
}

TEST(BackupWriter, AbandonDropsQueuedTasksAndFinishesTheRunningOne) {
  std::atomic<int> ran{0};
  std::atomic<bool> running_finished{false};
  {
    Gate gate;
    BackupWriter w;
    w.submit([&] {
      gate.blocker()();
      running_finished = true;
    });
    for (int i = 0; i < 10; ++i) w.submit([&] { ++ran; });
    gate.wait_entered();
    std::thread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
    w.abandon();  // returns once the running task is done
    opener.join();
    EXPECT_TRUE(running_finished.load());
    EXPECT_EQ(w.confirmed(), 1u);
    w.submit([&] { ++ran; });  // after abandon nothing runs any more
  }                            // the destructor after abandon is fine
  EXPECT_EQ(ran.load(), 0);
}

TEST(BackupWriter, DestructorFinishesQueuedWork) {
  std::atomic<int> ran{0};
  {
    Gate gate;
    BackupWriter w;
    w.submit(gate.blocker());
    for (int i = 0; i < 50; ++i) w.submit([&] { ++ran; });
    gate.open();
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace afs
