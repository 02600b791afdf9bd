// The ZeroMQ authentication handler that fences tcp:// connections by incarnation (incarnation_gate.h).
#include "afstream/runtime/incarnation_gate.h"

#include <chrono>
#include <string>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by ZeroMQ (RFC 27)
constexpr const char* kPassword = "-";                          // PLAIN wants one; nothing checks it

std::string incarnation_name(int worker, std::uint32_t epoch) {
  return "w" + std::to_string(worker) + "-e" + std::to_string(epoch);
}

}  // namespace

IncarnationGate::IncarnationGate(zmq::context_t& zmq) : socket_(zmq, zmq::socket_type::rep) {
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw RuntimeError(std::string("incarnation gate: cannot bind ") + kZapEndpoint + ": " + e.what() +
                       " (one gate per ZeroMQ context)");
  }
  thread_ = std::thread([this] { serve(); });
}

IncarnationGate::~IncarnationGate() {
  stop_.store(true);
  thread_.join();
}

void IncarnationGate::admit(int worker, std::uint32_t epoch) {
  std::lock_guard lock(mu_);
  admitted_.insert({worker, epoch});
}

void IncarnationGate::guard(zmq::socket_t& listening) { listening.set(zmq::sockopt::plain_server, 1); }

void IncarnationGate::present(zmq::socket_t& connecting, int worker, std::uint32_t epoch) {
  connecting.set(zmq::sockopt::plain_username, incarnation_name(worker, epoch));
  connecting.set(zmq::sockopt::plain_password, kPassword);
}

// ZAP (RFC 27): a request is version, request id, domain, address, routing id, mechanism, credentials...; the
// reply is version, request id, status code, status text, user id, metadata.
void IncarnationGate::serve() {
  std::vector<zmq::message_t> request;
  while (!stop_.load()) {
    zmq::pollitem_t items[] = {{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      request.clear();
      do {
        zmq::message_t part;
        if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
        request.push_back(std::move(part));
      } while (socket_.get(zmq::sockopt::rcvmore));
    } catch (const zmq::error_t&) {
      return;  // the context is going away
    }
    bool ok = false;
    if (request.size() >= 7 && request[5].to_string_view() == "PLAIN") {
      const auto user = request[6].to_string();
      std::lock_guard lock(mu_);
      for (const auto& [w, e] : admitted_) ok = ok || user == incarnation_name(w, e);
    }
    if (!ok) refused_.fetch_add(1, std::memory_order_relaxed);
    const std::string id = request.size() >= 2 ? request[1].to_string() : std::string();
    const std::string parts[] = {"1.0", id, ok ? "200" : "400", ok ? "OK" : "not this incarnation", "", ""};
    try {
      for (std::size_t i = 0; i < std::size(parts); ++i) {
        (void)socket_.send(zmq::buffer(parts[i]),
                           i + 1 < std::size(parts) ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace afs
