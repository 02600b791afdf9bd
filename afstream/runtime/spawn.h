// Starting a child process (the controller starts `afstream backup-server` and `afstream worker`; the supervisor of
// `afstream worker --worker.restart` starts the worker): fork and exec, nothing else.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace afs {

// Runs `program` with `args` (argv[1..]) in a child process; returns its pid. The child inherits stdout and stderr,
// and is sent parent_death_signal() if the thread that started it ends (stop_with_parent). Throws RuntimeError if it
// cannot fork; a program that cannot be executed exits with status 127.
pid_t spawn(const std::string& program, const std::vector<std::string>& args);

// The signal a child started by spawn() gets when the thread that started it ends: a real-time signal of its own
// (SIGRTMIN + 1), whose default action ends the process, and which nothing else sends, so that the backup server can
// tell its controller's death from a stop the controller asked for (SIGTERM), and from a hang-up (SIGHUP, which
// nohup ignores). getppid() could not tell it: a SIGKILL ends the parent's threads one by one, and the signal comes
// with the forking thread's end while another thread of the same process is still the parent.
int parent_death_signal();

// In a child between fork and exec: parent_death_signal() when the thread that forked it ends (PR_SET_PDEATHSIG,
// kept across exec), as when a controller is killed: a backup server it started otherwise ran on for good (its
// workers stop once they miss the controller). Every spawn() of the controller is on the thread that runs it.
// Exits with status 127 if `parent` has ended already. Async-signal-safe.
void stop_with_parent(pid_t parent);

}  // namespace afs
