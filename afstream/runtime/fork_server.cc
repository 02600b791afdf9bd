// The fork server and the controller's handle on it (fork_server.h).
#include "afstream/runtime/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <utility>

#include "afstream/core/errors.h"
#include "afstream/runtime/spawn.h"

namespace afs {

namespace {

constexpr int kReplyFd = 3;  // the server's end of the reply pipe

// Writes all of `s` to fd; false if the reader is gone (errno EPIPE).
bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// write_all without a SIGPIPE if the reader is gone: the controller must neither die of its fork server's death nor
// change the signal's disposition, which the processes it starts would inherit. The signal is blocked in this
// thread for the write, and one the write raised is taken off the pending set before the mask is restored.
bool write_all_no_sigpipe(int fd, const std::string& s) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const bool ok = write_all(fd, s);
  if (!ok && errno == EPIPE && !was_pending) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

// One line from fd (without its newline), or std::nullopt at end of file. Reads a byte at a time: a request is a few
// dozen bytes, and nothing after its newline may be consumed.
std::optional<std::string> read_line(int fd) {
  std::string line;
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (line.empty()) return std::nullopt;
      return line;  // a last line without its newline
    }
    if (c == '\n') return line;
    line.push_back(c);
  }
}

ForkRequest parse_request(const std::string& line) {
  std::istringstream in(line);
  ForkRequest r;
  std::string failures;
  long long worker = -1;
  if (!(in >> worker >> r.epoch >> failures) || worker < 0) {
    throw RuntimeError("fork server: malformed request '" + line + "' (expected WORKER EPOCH FAILURES)");
  }
  r.worker = static_cast<int>(worker);
  if (failures != "-") {
    std::istringstream parts(failures);
    for (std::string part; std::getline(parts, part, ',');) {
      try {
        r.failures.push_back(std::stoull(part));
      } catch (const std::exception&) {
        throw RuntimeError("fork server: malformed failure count '" + part + "' in request '" + line + "'");
      }
    }
  }
  return r;
}

}  // namespace

ForkServer::~ForkServer() { stop(); }

void ForkServer::start(const std::string& program, const std::vector<std::string>& args) {
  // The worker processes are orphaned by the server's intermediate child as they start: this process adopts them.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    throw RuntimeError(std::string("fork server: cannot become a child subreaper: ") + std::strerror(errno));
  }
  int requests[2], replies[2];
  if (::pipe2(requests, O_CLOEXEC) != 0) throw RuntimeError(std::string("fork server: pipe: ") + std::strerror(errno));
  if (::pipe2(replies, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(requests[0]);
    ::close(requests[1]);
    throw RuntimeError(std::string("fork server: pipe: ") + std::strerror(e));
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (const int fd : {requests[0], requests[1], replies[0], replies[1]}) ::close(fd);
    throw RuntimeError(std::string("cannot start the fork server: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // dup2 clears close-on-exec on the copies: the server keeps exactly its stdin and fd 3.
    if (::dup2(requests[0], STDIN_FILENO) < 0 || ::dup2(replies[1], kReplyFd) < 0) ::_exit(127);
    stop_with_parent(parent);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(requests[0]);
  ::close(replies[1]);
  pid_ = pid;
  to_server_ = requests[1];
  from_server_ = replies[0];
}

bool ForkServer::ready() {
  if (ready_ || pid_ <= 0) return ready_;
  pollfd p{from_server_, POLLIN, 0};
  int n = 0;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;  // still building the job
  // One write of a few bytes (atomic on a pipe): once readable, the whole line is there, or end of file.
  const auto line = read_line(from_server_);
  if (line && *line == "ready") {
    ready_ = true;
    return true;
  }
  kill_now();  // exited (its error is in the log) or confused: not asked
  return false;
}

pid_t ForkServer::fork_worker(const ForkRequest& request, std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || !ready_) return -1;
  std::string failures;
  for (auto f : request.failures) failures += (failures.empty() ? "" : ",") + std::to_string(f);
  if (failures.empty()) failures = "-";
  if (!write_all_no_sigpipe(
          to_server_, std::to_string(request.worker) + " " + std::to_string(request.epoch) + " " + failures + "\n")) {
    kill_now();
    return -1;
  }
  pollfd p{from_server_, POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (ready < 0 && errno == EINTR);
  // The reply is one write of a few bytes (atomic on a pipe): once readable, the whole line is there.
  const auto line = ready > 0 ? read_line(from_server_) : std::nullopt;
  long long pid = -1;
  if (line) {
    const char* const first = line->data();
    const char* const last = first + line->size();
    const auto [end, ec] = std::from_chars(first, last, pid);
    if (ec != std::errc() || end != last) pid = -1;
  }
  if (pid <= 0) {
    kill_now();  // silent, slow or confused: not asked again
    return -1;
  }
  return static_cast<pid_t>(pid);
}

bool ForkServer::exited() {
  if (pid_ <= 0) return true;
  if (::waitpid(pid_, nullptr, WNOHANG) != pid_) return false;
  pid_ = -1;
  close_pipes();
  return true;
}

void ForkServer::close_pipes() {
  ready_ = false;
  if (to_server_ >= 0) ::close(to_server_);
  if (from_server_ >= 0) ::close(from_server_);
  to_server_ = from_server_ = -1;
}

void ForkServer::kill_now() {
  close_pipes();
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void ForkServer::stop() {
  close_pipes();
  if (pid_ <= 0) return;
  for (int i = 0; i < 100; ++i) {  // end of file on its stdin: it exits
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    ::usleep(10000);
  }
  kill_now();
}

std::vector<std::unique_ptr<Source>> prebuild_sources(const Topology& topology, const Registry& registry) {
  std::vector<std::unique_ptr<Source>> out;
  for (const auto& w : topology.workers()) {
    const auto& stage = topology.stages()[w.stage];
    if (stage.is_source && w.index == 0) {
      out.push_back(registry.make_source(stage.kind, stage.params, {0, stage.parallelism}));
    }
  }
  return out;
}

std::optional<ForkRequest> serve_forks() {
  if (!write_all(kReplyFd, "ready\n")) return std::nullopt;  // the controller is gone
  for (;;) {
    const auto line = read_line(STDIN_FILENO);
    if (!line) return std::nullopt;
    const ForkRequest request = parse_request(*line);
    // The middle process tells the server the worker process's pid on a pipe of their own, and exits; the server
    // reaps it (the worker process is then the controller's child) before it tells the controller.
    int told[2];
    if (::pipe2(told, O_CLOEXEC) != 0) throw RuntimeError(std::string("fork server: pipe: ") + std::strerror(errno));
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t middle = ::fork();
    if (middle < 0) throw RuntimeError(std::string("fork server: fork: ") + std::strerror(errno));
    if (middle == 0) {
      ::close(told[0]);
      const pid_t worker = ::fork();
      if (worker < 0) ::_exit(1);
      if (worker == 0) {
        // The worker process. The pipes are the server's; its stdin becomes /dev/null.
        ::close(told[1]);
        ::close(kReplyFd);
        const int null = ::open("/dev/null", O_RDONLY);
        if (null >= 0) {
          ::dup2(null, STDIN_FILENO);
          if (null != STDIN_FILENO) ::close(null);
        }
        return request;
      }
      ::_exit(write_all(told[1], std::to_string(worker) + "\n") ? 0 : 1);
    }
    ::close(told[1]);
    int status = 0;
    while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
    }
    const auto pid = read_line(told[0]);
    ::close(told[0]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !pid) {
      throw RuntimeError("fork server: could not start a process for worker " + std::to_string(request.worker));
    }
    if (!write_all(kReplyFd, *pid + "\n")) return std::nullopt;  // the controller is gone
  }
}

}  // namespace afs
