// A worker started by hand asks the controller for its assignment (registration.h).
#include "afstream/runtime/registration.h"

#include <random>
#include <zmq.hpp>

#include "afstream/core/errors.h"

namespace afs {

net::AssignmentMsg register_worker(int worker, const std::string& controller, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  zmq::context_t zmq(1);
  zmq::socket_t socket(zmq, zmq::socket_type::dealer);
  // A routing id of its own: the controller answers a resent registration with the same assignment instead of
  // taking it for yet another incarnation.
  std::random_device rd;
  const auto nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  socket.set(zmq::sockopt::routing_id, "w" + std::to_string(worker) + "-r" + std::to_string(nonce));
  socket.set(zmq::sockopt::linger, 0);
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
      zmq::message_t m(frame.data(), frame.size());
      (void)socket.send(m, zmq::send_flags::dontwait);
      last_sent = Clock::now();
    }
    zmq::pollitem_t items[] = {{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(50));
    zmq::message_t reply;
    while (socket.recv(reply, zmq::recv_flags::dontwait)) {
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
  throw RuntimeError("worker " + std::to_string(worker) + ": no answer from the controller at " + controller +
                     " (worker.controller) within " + std::to_string(timeout.count()) + " ms" +
                     (bad_reply.empty() ? std::string() : "; its reply did not decode: " + bad_reply));
}

}  // namespace afs
