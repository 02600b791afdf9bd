#include "afstream/ft/backup_writer.h"

namespace afs {

BackupWriter::BackupWriter() : thread_([this] { run(); }) {}

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
  {
    std::lock_guard lock(mu_);
    t = ++next_ticket_;
    queue_.emplace_back(t, std::move(task));
  }
  cv_.notify_all();
  return t;
}

std::uint64_t BackupWriter::confirmed() {
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(error_);
  return done_;
}

void BackupWriter::wait(std::uint64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket || error_ || stop_; });
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
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    auto [ticket, task] = std::move(queue_.front());
    queue_.pop_front();
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
    done_ = ticket;
    cv_.notify_all();
  }
}

}  // namespace afs
