// Starting a child process (the controller starts `afstream backup-server` and `afstream worker`; the supervisor of
// `afstream worker --worker.restart` starts the worker): fork and exec, nothing else.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace afs {

// Runs `program` with `args` (argv[1..]) in a child process; returns its pid. The child inherits stdout and stderr.
// Throws RuntimeError if it cannot fork; a program that cannot be executed exits with status 127.
pid_t spawn(const std::string& program, const std::vector<std::string>& args);

}  // namespace afs
