#include "afstream/ft/backup_writer.h"

#include "afstream/core/thread_name.h"

namespace afs {

BackupWriter::BackupWriter(std::string thread_name)
    : thread_([this, name = std::move(thread_name)] {
        name_this_thread(name);
        run();
      }) {}

BackupWriter::~BackupWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t BackupWriter::submit(Task task) {
  std::uint64_t t;
  bool wake;
  {
    std::lock_guard lock(mu_);
    t = ++next_ticket_;
    queue_.emplace_back(t, std::move(task));
    wake = idle_;
  }
  if (wake) cv_.notify_all();  // a busy thread finds the task when it looks at the queue again
  return t;
}

std::uint64_t BackupWriter::submit_and_wait(Task task) { return submit_here_if_idle(std::move(task), true); }

std::uint64_t BackupWriter::submit_inline_if_idle(Task task) { return submit_here_if_idle(std::move(task), false); }

std::uint64_t BackupWriter::submit_here_if_idle(Task task, bool wait_otherwise) {
  std::uint64_t t;
  {
    std::unique_lock lock(mu_);
    if (error_) std::rethrow_exception(error_);
    if (!(idle_ && queue_.empty() && !stop_)) {
      lock.unlock();
      t = submit(std::move(task));
      if (wait_otherwise) wait(t);
      return t;
    }
    t = ++next_ticket_;  // the backup thread is idle and only this thread submits: write in order, here
    inline_ = true;
  }
  try {
    task();
  } catch (...) {
    std::lock_guard lock(mu_);
    inline_ = false;
    error_ = std::current_exception();
    cv_.notify_all();
    throw;
  }
  bool wake;
  {
    std::lock_guard lock(mu_);
    inline_ = false;
    done_.store(t, std::memory_order_release);
    wake = waiters_ > 0;  // the idle backup thread waits for a queued task, not for this one: leave it asleep
  }
  if (wake) cv_.notify_all();
  return t;
}

std::uint64_t BackupWriter::confirmed() {
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(error_);
  return done_.load();
}

void BackupWriter::wait(std::uint64_t ticket) {
  // Backups of small deltas take microseconds: give the core to the backup thread a few times before sleeping.
  for (int i = 0; i < 64 && done_.load(std::memory_order_acquire) < ticket; ++i) std::this_thread::yield();
  std::unique_lock lock(mu_);
  ++waiters_;
  cv_.wait(lock, [&] { return done_.load() >= ticket || error_ || stop_; });
  --waiters_;
  if (error_) std::rethrow_exception(error_);
}

void BackupWriter::abandon() {
  {
    std::lock_guard lock(mu_);
    queue_.clear();
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackupWriter::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    idle_ = true;
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    idle_ = false;
    if (queue_.empty()) return;  // stop_ and drained
    auto [ticket, task] = std::move(queue_.front());
    queue_.pop_front();
    // After a failed task nothing more is written: a delta stored after a lost one would leave a chain with a gap,
    // which restores to a wrong state without any error. The failure is reported by confirmed() and wait().
    if (error_) continue;
    lock.unlock();
    try {
      task();
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      cv_.notify_all();
      continue;
    }
    lock.lock();
    done_.store(ticket, std::memory_order_release);
    cv_.notify_all();
  }
}

}  // namespace afs
