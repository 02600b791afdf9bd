// Registration of a worker started by hand (DESIGN 4 and 5: jobs across hosts). A controller can start and restart
// only the workers on its own host; a worker on another host is started there (`afstream worker` without --job,
// usually under `--worker.restart`, which starts it again whenever it dies) and asks the controller who it is:
// which incarnation (the controller counts them: a registration while an earlier incarnation is believed up marks
// that one failed), the failures of the earlier ones (so it halves its thresholds), the job's options, and where
// the directory and the backup server are. Then it runs as any worker process (worker_process.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "afstream/net/codec.h"
#include "afstream/net/curve.h"

namespace afs {

// Sends a registration for `worker` to the controller's report endpoint and waits for its assignment, resending
// every second. Throws RuntimeError naming the endpoint (and the option worker.controller) if no answer comes within
// `timeout`, ConfigError with the controller's message if it refuses (no such worker, not a remote one, ...).
// Never prints or exits.
//
// curve: connect as a CURVE client (this worker's keypair, the controller's public key). A controller that refuses
// the key (not in its net.curve-authorized) is a ConfigError at once, naming the key; handshakes that keep failing
// (the wrong controller key, or CURVE on one side only) are named in the error at the timeout.
net::AssignmentMsg register_worker(int worker, const std::string& controller, std::chrono::milliseconds timeout,
                                   const std::optional<net::CurveClient>& curve = std::nullopt);

}  // namespace afs
