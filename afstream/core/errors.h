// Typed errors thrown by the afstream libraries. Library code never prints or exits; the command-line layer
// catches these and turns them into one clear line and a non-zero exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace afs {

// Bad user input: an option, a job description, a threshold, a file.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A snapshot, backup record or wire message that is truncated, corrupt, or of an unknown version.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An input file that cannot be read or a record in it that cannot be parsed.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something in the runtime went wrong (a socket, a worker that does not answer).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace afs
