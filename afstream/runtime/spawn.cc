// fork and exec (spawn.h).
#include "afstream/runtime/spawn.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "afstream/core/errors.h"

namespace afs {

int parent_death_signal() { return SIGRTMIN + 1; }

void stop_with_parent(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, parent_death_signal()) != 0 || ::getppid() != parent) ::_exit(127);
}

pid_t spawn(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeError("cannot start " + program + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    stop_with_parent(parent);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace afs
