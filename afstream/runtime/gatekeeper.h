// Who may connect to a process's tcp:// sockets: the ZeroMQ authentication handler (ZAP, RFC 27) of its context, one
// per context, for the controller, the backup server and every worker process. It decides two things:
//
// - Authentication (CURVE on: net.curve-secret, net.curve-authorized; afstream/net/curve.h). A CURVE client gets in
//   only if its public key is one of the authorized keys; every refusal is counted (unauthorized()) and each refused
//   key is reported once (new_refusals()), so that the process can say who knocked.
// - Fencing by incarnation (DESIGN 5) of the workers' data and acknowledgement sockets. On inproc:// and ipc:// the
//   incarnation is part of the endpoint's name (w<id>-e<epoch>-data), so a peer that has not yet heard of a restart
//   connects to the dead incarnation's endpoint and reaches nobody. On tcp:// the operating system may give a
//   restarted worker the very port an earlier incarnation had, and such a peer would deliver items meant for the
//   dead one (which the new incarnation would count as gaps). So on tcp:// a peer must show which incarnation it
//   means, and only that incarnation lets it in:
//     * CURVE off: the peer presents "w<worker>-e<epoch>" as its PLAIN user name (no secret: this is fencing, not
//       authentication), and the gatekeeper admits only the incarnations admitted to it (admit()); refusals are
//       counted in fenced().
//     * CURVE on: every incarnation serves its data and acknowledgement sockets with a keypair of its own, made when
//       it starts; it announces the public key in its hello and the controller's directory carries it with the
//       endpoints. A peer connects with the key of the incarnation it means, so a successor on the same port cannot
//       complete the handshake with a peer that has not heard of it (it cannot open the peer's CurveZMQ HELLO):
//       ZeroMQ drops the connection before asking the gatekeeper, and the peer retries until it learns of the new
//       incarnation. Nothing is delivered to the wrong incarnation, and no item is lost (the sender still holds
//       everything unacknowledged).
// A refused peer delivers nothing. Without a handler in its context, ZeroMQ would let any CURVE client that knows the
// server's public key in: so every process that binds a CURVE socket creates its Gatekeeper first.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

namespace afs {

// One ZAP request, as ZeroMQ sends it (the parts the decision needs).
struct ZapRequest {
  std::string address;                   // the peer's IP address
  std::string mechanism;                 // "NULL", "PLAIN" or "CURVE"
  std::vector<std::string> credentials;  // PLAIN: user name, password; CURVE: the client's public key (32 bytes)
};

enum class ZapVerdict {
  kAdmitted,            // 200
  kNotAuthorized,       // 400: CURVE, the client's key is not authorized
  kNotThisIncarnation,  // 400: PLAIN, not an incarnation admitted here
  kUnsupported,         // 400: another mechanism, or a malformed request
};

struct ZapDecision {
  ZapVerdict verdict = ZapVerdict::kUnsupported;
  std::string status_code;  // "200" or "400"
  std::string status_text;
  std::string user_id;  // CURVE: the client's public key (Z85), which ZeroMQ attaches to its messages as User-Id
  std::string key;      // CURVE: the client's public key (Z85), also when refused
};

// A CURVE client that was refused: where it connected from and its public key (Z85).
struct ZapRefusal {
  std::string address;
  std::string key;
};

class Gatekeeper {
 public:
  // Binds the context's authentication endpoint (inproc://zeromq.zap.01: one gatekeeper per context) and starts the
  // thread that answers it. authorized: the CURVE public keys (Z85) let in; empty: every CURVE client is refused.
  // Throws RuntimeError if the context already has a handler. Destroy it before the context.
  explicit Gatekeeper(zmq::context_t& zmq, std::set<std::string> authorized = {});
  ~Gatekeeper();
  Gatekeeper(const Gatekeeper&) = delete;
  Gatekeeper& operator=(const Gatekeeper&) = delete;

  // PLAIN: connections presenting this incarnation are let in from now on.
  void admit(int worker, std::uint32_t epoch);
  // The decision for one request (counts nothing; the handler thread counts).
  ZapDecision decide(const ZapRequest& request) const;

  // CURVE connections refused because the client's key is not authorized (and requests of other mechanisms).
  std::uint64_t unauthorized() const { return unauthorized_.load(std::memory_order_relaxed); }
  // PLAIN connections refused: the peer meant another incarnation, or presented nothing.
  std::uint64_t fenced() const { return fenced_.load(std::memory_order_relaxed); }
  // The refused keys not reported before (each key once, at most 1024 keys in all), for a log line.
  std::vector<ZapRefusal> new_refusals();

  // PLAIN fencing (CURVE off). Before bind: the socket takes only connections the gatekeeper lets in.
  static void guard(zmq::socket_t& listening);
  // Before connect: the socket presents the incarnation it means to reach.
  static void present(zmq::socket_t& connecting, int worker, std::uint32_t epoch);

 private:
  void serve();

  zmq::socket_t socket_;
  const std::set<std::string> authorized_;  // binary keys (32 bytes), as ZAP requests carry them
  mutable std::mutex mu_;
  std::set<std::pair<int, std::uint32_t>> admitted_;
  std::set<std::string> reported_;  // refused keys already handed out by new_refusals() or pending
  std::vector<ZapRefusal> pending_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> unauthorized_{0};
  std::atomic<std::uint64_t> fenced_{0};
  std::thread thread_;
};

}  // namespace afs
