// Starting restarted worker processes without exec (`--process.fork-server`, process_cluster.h): a fork server is
// one `afstream worker --worker.fork-server` process that the controller starts once (when every local worker is
// up). It has loaded the program,
// parsed the job's options and built its topology and one instance of each source stage (prebuild_sources), and
// holds nothing else: no state, no threads, no sockets. For
// each failed worker the controller writes it a request (which worker, which incarnation, the earlier failures) on a
// pipe; it forks, its child forks the worker process and exits, and the worker process (an orphan, adopted by the
// controller, which is a child subreaper) runs as any restarted worker: it restores its state from the backup server
// and replays. The new process skips the program's loading and the job's setup, which a failure of every worker pays
// once per worker: 2.5-11 ms of CPU less a restart on the shared 2-core host (experiments/results/fork-server/
// README.md, 30 failures of heavy hitters).
//
// The protocol is one text line each way, over two pipes (the server's stdin, and its file descriptor 3), after the
// server's "ready\n" on fd 3 once it has built the job (which reads any input file: seconds for a large one, during
// which restarts start the program instead, rather than wait for the server or give it up):
//   request  "WORKER EPOCH FAILURES\n"  (FAILURES: item counts separated by commas, "-" for none)
//   reply    "PID\n"                    (the worker process's pid; the controller's child once the reply is read)
// The server exits when its stdin reaches end of file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"

namespace afs {

// One instance of each source stage of the topology (its first), for a process that forks or becomes workers later
// (the fork server; a spare) to hold while it lives: what a source shares between the instances of one process is
// then built once and inherited, not built again by each restarted source. A Zipf source's alias table (8 MB and
// about 40 ms for the heavy-hitter job's 1e6 keys, hh::ZipfGenerator) took a restarted source process on worker
// processes 50-60 ms to its hello, against 11-12 ms with it inherited (experiments/results/fork-server). Throws what
// the registry throws for a source it cannot build.
std::vector<std::unique_ptr<Source>> prebuild_sources(const Topology& topology, const Registry& registry);

// What a worker process forked by the fork server is to be.
struct ForkRequest {
  int worker = 0;
  std::uint32_t epoch = 1;
  std::vector<std::uint64_t> failures;
};

// The controller's handle on its fork server.
class ForkServer {
 public:
  ForkServer() = default;
  ~ForkServer();  // stop()
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  // Makes the calling process a child subreaper (the worker processes the server forks become its children) and
  // starts `program args` with the two pipes. Throws RuntimeError if it cannot.
  void start(const std::string& program, const std::vector<std::string>& args);
  // Asks for a worker process; returns its pid, or -1 if the server is gone, does not answer within `timeout` or
  // answers something else than a pid. It is then killed and not asked again; the caller starts the process itself,
  // and must count the request's incarnation as used: a server that was only slow may have forked it all the same
  // (the controller adopts that process; fenced by its incarnation, it stops once it sees a newer one).
  // Only once ready(): else -1 at once, nothing asked.
  pid_t fork_worker(const ForkRequest& request, std::chrono::milliseconds timeout = std::chrono::milliseconds(500));
  bool running() const { return pid_ > 0; }
  // Whether the server has said it is ready (built the job), without waiting. A server that says anything else, or
  // exits first, is killed (running() false).
  bool ready();
  pid_t pid() const { return pid_; }
  // Whether the server has exited (reaped here; its error, if any, is in the log).
  bool exited();
  // Closes its stdin (it exits) and reaps it; kills it if it has not exited within a second.
  void stop();

 private:
  void close_pipes();
  void kill_now();  // SIGKILL, reaped

  pid_t pid_ = -1;
  bool ready_ = false;
  int to_server_ = -1;    // its stdin
  int from_server_ = -1;  // its file descriptor 3
};

// The fork server's side (`afstream worker --worker.fork-server`, called once the job is built): says it is ready,
// then reads requests from stdin until end of file.
// Returns std::nullopt in the server at end of file, and the request in each worker process it forks (which then
// runs as that worker). Throws RuntimeError for a malformed request or a failed fork. stdout and stderr are flushed
// before each fork.
std::optional<ForkRequest> serve_forks();

}  // namespace afs
