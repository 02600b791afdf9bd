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

// Tells the controller that incarnation `epoch` of `worker` stops on `error` before its worker process has reported
// (building the job or the worker failed on this host: an input file missing here, a local-state directory it
// cannot create): a failed report, with which the controller ends the run, instead of a silence it would wait out
// (process.start-timeout-ms, then controller.register-timeout-ms). Waits up to `linger` for the report to leave.
// Never throws (the caller reports the error itself); never prints.
void report_failed(int worker, std::uint32_t epoch, const std::string& controller, const std::string& error,
                   const std::optional<net::CurveClient>& curve = std::nullopt,
                   std::chrono::milliseconds linger = std::chrono::seconds(2));

// A standby (`afstream worker --worker.standby SLOT`, started by a controller with process.standby > 0): a spare
// process that has parsed the job and built its topology, and waits to take over the next worker that fails, so that
// a recovery does not wait for a process to start. It tells the controller it is ready (a standby report from
// `slot`, resent every second, from the routing id "s<slot>-p<pid>" by which the controller knows it) and returns
// the assignment it gets: which worker, which incarnation, the earlier failures. Throws RuntimeError if the
// controller's directory (which it broadcasts at least every 200 ms) is silent for `timeout` or the process that
// started it has exited (the controller is gone), ConfigError if the controller refuses the standby (epoch 0). curve:
// as for register_worker, for the report and directory sockets alike. Never prints or exits.
net::AssignmentMsg await_assignment(int slot, const std::string& controller, const std::string& directory,
                                    std::chrono::milliseconds timeout,
                                    const std::optional<net::CurveClient>& curve = std::nullopt);

}  // namespace afs
