// Wakeup: an eventfd that another thread signals to wake a worker out of its poll at once (Worker::kill).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "afstream/core/errors.h"

namespace afs {

// Readable once signalled, and for good (its counter is never read back): poll it with zmq::poll as a raw file
// descriptor. Throws RuntimeError naming the system's error when no eventfd can be made.
class Wakeup {
 public:
  Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw RuntimeError(std::string("eventfd for a worker's wakeup: ") + std::strerror(errno));
  }
  ~Wakeup() { ::close(fd_); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Safe from any thread; cannot fail but by an overflowing counter, after 2^64 - 2 signals.
  void signal() noexcept { (void)::eventfd_write(fd_, 1); }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace afs
