// Keeps a worker process running on a host where its controller cannot start processes (`afstream worker
// --worker.restart`, DESIGN 5 across hosts): starts the worker, and starts it again whenever it dies of a signal
// (SIGKILL, a crash, the out-of-memory killer). Each new process registers with the controller, which takes it for
// the next incarnation (registration.h). An exit with a status is final and returned: 0 when the job finished,
// anything else after the worker has said why (a controller that went silent, bad options), which a restart would
// not cure.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace afs {

struct SupervisorEvent {
  pid_t pid = -1;    // the process that died
  int signal = 0;    // the signal it died of
  int restarts = 0;  // restarts so far, this one included
  pid_t next = -1;   // the process started in its place
};

struct SupervisorOptions {
  std::chrono::milliseconds pause{200};  // between a death and the restart
  // Called from supervise() after each restart (the CLI logs it). Library code does not print.
  std::function<void(const SupervisorEvent&)> on_restart;
};

// Runs `program args` until it exits with a status (returned), restarting it after each death by a signal. When
// `stop` becomes true (the caller's SIGTERM/SIGINT handler), the worker gets SIGTERM (SIGKILL 5 s later) and its
// status is returned (128 + signal if it died of one). Throws RuntimeError if a process cannot be started.
int supervise(const std::string& program, const std::vector<std::string>& args, const std::atomic<bool>& stop,
              const SupervisorOptions& options = {});

}  // namespace afs
