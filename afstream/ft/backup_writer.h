// The backup thread of a worker (DESIGN 4): backups are captured on the compute thread (a delta copy, a list of
// items) and written to the backup store here, asynchronously. Each submission gets a ticket; the compute thread
// asks which tickets are confirmed (to release deferred acknowledgements) or waits for one (only when a bound would
// otherwise be broken). abandon() emulates a crash: queued, unwritten backups are lost.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace afs {

class BackupWriter {
 public:
  using Task = std::function<void()>;

  // thread_name names the backup thread (diagnostics: top -H, perf, gdb).
  explicit BackupWriter(std::string thread_name = "afs-backup");
  ~BackupWriter();  // finishes queued work
  BackupWriter(const BackupWriter&) = delete;
  BackupWriter& operator=(const BackupWriter&) = delete;

  std::uint64_t submit(Task task);
  // Write now and return once it is confirmed: when nothing is queued or being written, the calling thread writes
  // it itself (no hand-off to the backup thread); otherwise it is queued behind the others and waited for.
  // For backups that a bound does not allow to be in flight.
  std::uint64_t submit_and_wait(Task task);
  // Write it on the calling thread when nothing is queued or being written (then it is confirmed on return, and the
  // backup thread is not woken: for a small backup into an in-process store the hand-off costs more than the write),
  // otherwise queue it as submit() does, without waiting.
  std::uint64_t submit_inline_if_idle(Task task);
  // Highest ticket whose task (and all before it) has completed. Rethrows a failed task's exception; once a task
  // has failed, later tasks are dropped unwritten (a backup after a lost one would leave a gap in the chain).
  std::uint64_t confirmed();
  void wait(std::uint64_t ticket);
  // Whether the task with this ticket (and all before it) has completed, without locking (a failed task is
  // reported by confirmed() and wait()).
  bool is_confirmed(std::uint64_t ticket) const { return done_.load(std::memory_order_acquire) >= ticket; }
  // Drop queued tasks (the one running finishes) and stop: what a crash does to backups not yet written.
  void abandon();

 private:
  void run();
  std::uint64_t submit_here_if_idle(Task task, bool wait_otherwise);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::uint64_t, Task>> queue_;
  std::uint64_t next_ticket_ = 0;
  std::atomic<std::uint64_t> done_{0};
  bool stop_ = false;
  bool idle_ = false;    // the thread waits for work (a submit must wake it)
  bool inline_ = false;  // a task is being written by the submitting thread
  int waiters_ = 0;      // threads in wait(): only they need a wake-up when a task completes inline
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace afs
