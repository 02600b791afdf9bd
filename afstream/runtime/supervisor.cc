// The restart loop of `afstream worker --worker.restart` (supervisor.h).
#include "afstream/runtime/supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <thread>

#include "afstream/runtime/spawn.h"

namespace afs {

namespace {

// Waits for `pid`, looking at `stop` every 50 ms. Returns true with its wait status, or false once stop is set.
bool wait_for(pid_t pid, const std::atomic<bool>& stop, int& status) {
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) {
      status = 0;  // not our child any more (cannot happen): treat as a clean exit
      return true;
    }
    if (stop.load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int supervise(const std::string& program, const std::vector<std::string>& args, const std::atomic<bool>& stop,
              const SupervisorOptions& options) {
  pid_t pid = spawn(program, args);
  int restarts = 0;
  for (;;) {
    int status = 0;
    if (!wait_for(pid, stop, status)) {
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 100; ++i) {  // 5 s
        if (::waitpid(pid, &status, WNOHANG) == pid) return exit_code(status);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return exit_code(status);
    }
    if (!WIFSIGNALED(status)) return exit_code(status);
    // Died of a signal: a crash, not a verdict. Start the next incarnation.
    const pid_t dead = pid;
    const auto deadline = std::chrono::steady_clock::now() + options.pause;
    while (std::chrono::steady_clock::now() < deadline) {
      if (stop.load()) return exit_code(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid = spawn(program, args);
    ++restarts;
    if (options.on_restart) options.on_restart({dead, WTERMSIG(status), restarts, pid});
  }
}

}  // namespace afs
