// A worker started by hand asks the controller for its assignment (registration.h).
#include "afstream/runtime/registration.h"

#include <unistd.h>

#include <cstring>
#include <random>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/handoff.h"

namespace afs {

namespace {

// How the handshakes with the controller went (a ZeroMQ socket monitor, read between polls).
struct HandshakeWatch {
  zmq::socket_t events;
  int failures = 0;        // handshakes that failed for another reason than the key
  int refused_status = 0;  // the ZAP status code with which the controller refused this worker's key (400), or 0

  HandshakeWatch(zmq::context_t& zmq, zmq::socket_t& watched, const std::string& name)
      : events(zmq, zmq::socket_type::pair) {
    const int kinds =
        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(watched.handle(), name.c_str(), kinds) != 0) {
      throw RuntimeError(std::string("registration: cannot monitor the socket: ") + zmq_strerror(zmq_errno()));
    }
    events.set(zmq::sockopt::linger, 0);
    events.connect(name);
  }

  void read() {
    zmq::message_t event, address;
    while (events.recv(event, zmq::recv_flags::dontwait)) {
      if (event.more()) (void)events.recv(address, zmq::recv_flags::dontwait);
      if (event.size() < 6) continue;
      std::uint16_t kind = 0;
      std::int32_t value = 0;
      std::memcpy(&kind, event.data(), sizeof kind);
      std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof value);
      if (kind == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        refused_status = value;
      } else {
        ++failures;
      }
    }
  }
};

}  // namespace

net::AssignmentMsg register_worker(int worker, const std::string& controller, std::chrono::milliseconds timeout,
                                   const std::optional<net::CurveClient>& curve) {
  using Clock = std::chrono::steady_clock;
  zmq::context_t zmq(1);
  zmq::socket_t socket(zmq, zmq::socket_type::dealer);
  // A routing id of its own: the controller answers a resent registration with the same assignment instead of
  // taking it for yet another incarnation.
  std::random_device rd;
  const auto nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  socket.set(zmq::sockopt::routing_id, "w" + std::to_string(worker) + "-r" + std::to_string(nonce));
  socket.set(zmq::sockopt::linger, 0);
  if (curve) net::make_curve_client(socket, *curve);
  HandshakeWatch watch(zmq, socket, "inproc://afs-registration-" + std::to_string(nonce));
  try {
    socket.connect(controller);
  } catch (const zmq::error_t& e) {
    throw ConfigError("worker.controller: cannot connect to '" + controller + "': " + e.what());
  }
  net::Encoder encoder;
  net::WorkerReportMsg request;
  request.kind = net::ReportKind::kRegister;
  const auto start = Clock::now();
  auto last_sent = Clock::time_point{};
  net::Message msg;
  std::string bad_reply;  // the last reply that did not decode (another wire version, ...), for the error
  while (Clock::now() - start < timeout) {
    if (Clock::now() - last_sent >= std::chrono::seconds(1)) {
      auto frame = encoder.encode_worker_report(static_cast<std::uint32_t>(worker), 0, request);
      zmq::message_t m = net::outgoing(frame);
      (void)socket.send(m, zmq::send_flags::dontwait);
      last_sent = Clock::now();
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(50));
    watch.read();
    if (watch.refused_status != 0) {
      throw ConfigError("controller at " + controller + " refused worker " + std::to_string(worker) +
                        ": its CURVE public key " + (curve ? curve->keys.public_key : std::string("(none)")) +
                        " is not in the controller's net.curve-authorized (ZAP status " +
                        std::to_string(watch.refused_status) +
                        "); add this worker's public key file (NAME.pub) there, or give net.curve-secret the key "
                        "that is");
    }
    zmq::message_t reply;
    while (socket.recv(reply, zmq::recv_flags::dontwait)) {
      net::received(reply);
      try {
        net::decode_into({static_cast<const std::uint8_t*>(reply.data()), reply.size()}, {}, msg);
      } catch (const FormatError& e) {
        bad_reply = e.what();
        continue;
      }
      const auto* a = std::get_if<net::AssignmentMsg>(&msg.body);
      if (a == nullptr || a->worker != static_cast<std::uint32_t>(worker)) continue;
      if (a->epoch == 0)
        throw ConfigError("controller at " + controller + " refused worker " + std::to_string(worker) + ": " +
                          a->error);
      return *a;
    }
  }
  std::string handshakes;
  if (watch.failures > 0) {
    handshakes = "; " + std::to_string(watch.failures) + " handshakes with it failed (" +
                 (curve ? std::string("is worker.controller-key the controller's public key, and does the controller "
                                      "have CURVE on, net.curve-secret?")
                        : std::string("does the controller require CURVE? then give net.curve-secret, "
                                      "net.curve-authorized and worker.controller-key")) +
                 ")";
  }
  // The controller's other ports take the connection without a word (its directory, PORT + 1, and the backup
  // server, PORT + 2, are sockets of other kinds): say which port is the one.
  throw RuntimeError("worker " + std::to_string(worker) + ": no answer from the controller at " + controller +
                     " (worker.controller) within " + std::to_string(timeout.count()) + " ms" + handshakes +
                     (bad_reply.empty() ? std::string() : "; its reply did not decode: " + bad_reply) +
                     "; worker.controller is the controller's controller.bind address and PORT (PORT + 1 is its "
                     "directory, PORT + 2 the backup server it starts when not given controller.backup-server)");
}

void report_failed(int worker, std::uint32_t epoch, const std::string& controller, const std::string& error,
                   const std::optional<net::CurveClient>& curve, std::chrono::milliseconds linger) {
  try {
    zmq::context_t zmq(1);
    zmq::socket_t socket(zmq, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, static_cast<int>(linger.count()));  // closing waits for delivery, this long
    if (curve) net::make_curve_client(socket, *curve);
    socket.connect(controller);
    net::WorkerReportMsg report;
    report.kind = net::ReportKind::kFailed;
    report.error = error;
    net::Encoder encoder;
    auto frame = encoder.encode_worker_report(static_cast<std::uint32_t>(worker), epoch, report);
    zmq::message_t m = net::outgoing(frame);
    (void)socket.send(m, zmq::send_flags::dontwait);
  } catch (const std::exception&) {
    // Best effort: the controller then notices the silence as before.
  }
}

net::AssignmentMsg await_assignment(int slot, const std::string& controller, const std::string& directory,
                                    std::chrono::milliseconds timeout, const std::optional<net::CurveClient>& curve) {
  using Clock = std::chrono::steady_clock;
  const pid_t parent = ::getppid();  // the controller that started it
  zmq::context_t zmq(1);
  zmq::socket_t socket(zmq, zmq::socket_type::dealer);
  // The controller accepts a standby report only with this routing id (its slot and the pid it started).
  socket.set(zmq::sockopt::routing_id, "s" + std::to_string(slot) + "-p" + std::to_string(::getpid()));
  socket.set(zmq::sockopt::linger, 0);
  zmq::socket_t sub(zmq, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::linger, 0);
  if (curve) {
    net::make_curve_client(socket, *curve);
    net::make_curve_client(sub, *curve);  // the directory serves with the controller's keypair too
  }
  try {
    socket.connect(controller);
  } catch (const zmq::error_t& e) {
    throw ConfigError("worker.controller: cannot connect to '" + controller + "': " + e.what());
  }
  try {
    sub.connect(directory);
  } catch (const zmq::error_t& e) {
    throw ConfigError("worker.directory: cannot connect to '" + directory + "': " + e.what());
  }
  net::Encoder encoder;
  net::WorkerReportMsg ready;
  ready.kind = net::ReportKind::kStandby;
  auto last_sent = Clock::time_point{};
  auto last_heard = Clock::now();
  net::Message msg;
  for (;;) {
    if (Clock::now() - last_sent >= std::chrono::seconds(1)) {
      auto frame = encoder.encode_worker_report(static_cast<std::uint32_t>(slot), 0, ready);
      zmq::message_t m = net::outgoing(frame);
      (void)socket.send(m, zmq::send_flags::dontwait);
      last_sent = Clock::now();
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(sub), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(100));
    zmq::message_t m;
    while (sub.recv(m, zmq::recv_flags::dontwait)) last_heard = Clock::now();  // alive; the content is not needed
    if (Clock::now() - last_heard > timeout) {
      throw RuntimeError("standby " + std::to_string(slot) + ": the controller's directory at " + directory +
                         " (worker.directory) silent for " + std::to_string(timeout.count()) + " ms");
    }
    if (::getppid() != parent) {  // a later controller on the same endpoints is not the one that started it
      throw RuntimeError("standby " + std::to_string(slot) + ": the process that started it (" +
                         std::to_string(parent) + ", its controller) is gone");
    }
    while (socket.recv(m, zmq::recv_flags::dontwait)) {
      net::received(m);
      try {
        net::decode_into({static_cast<const std::uint8_t*>(m.data()), m.size()}, {}, msg);
      } catch (const FormatError&) {
        continue;
      }
      const auto* a = std::get_if<net::AssignmentMsg>(&msg.body);
      if (a == nullptr) continue;
      if (a->epoch == 0) {
        throw ConfigError("controller at " + controller + " refused standby " + std::to_string(slot) + ": " + a->error);
      }
      return *a;
    }
  }
}

}  // namespace afs
