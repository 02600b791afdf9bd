// The ZeroMQ authentication handler that authenticates CURVE clients and fences tcp:// connections by incarnation
// (gatekeeper.h).
#include "afstream/runtime/gatekeeper.h"

#include <chrono>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/net/curve.h"

namespace afs {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by ZeroMQ (RFC 27)
constexpr const char* kPassword = "-";                          // PLAIN wants one; nothing checks it
constexpr std::size_t kMaxReportedKeys = 1024;                  // refused keys remembered for new_refusals()

std::string incarnation_name(int worker, std::uint32_t epoch) {
  return "w" + std::to_string(worker) + "-e" + std::to_string(epoch);
}

std::set<std::string> to_binary(const std::set<std::string>& z85) {
  std::set<std::string> out;
  for (const auto& k : z85) {
    auto b = net::z85_to_binary(k);
    if (b.empty()) throw ConfigError("gatekeeper: '" + k + "' is not a Z85 public key");
    out.insert(std::move(b));
  }
  return out;
}

}  // namespace

Gatekeeper::Gatekeeper(zmq::context_t& zmq, std::set<std::string> authorized)
    : socket_(zmq, zmq::socket_type::rep), authorized_(to_binary(authorized)) {
  socket_.set(zmq::sockopt::linger, 0);
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw RuntimeError(std::string("gatekeeper: cannot bind ") + kZapEndpoint + ": " + e.what() +
                       " (one gatekeeper per ZeroMQ context)");
  }
  thread_ = std::thread([this] { serve(); });
}

Gatekeeper::~Gatekeeper() {
  stop_.store(true);
  thread_.join();
}

void Gatekeeper::admit(int worker, std::uint32_t epoch) {
  std::lock_guard lock(mu_);
  admitted_.insert({worker, epoch});
}

std::vector<ZapRefusal> Gatekeeper::new_refusals() {
  std::lock_guard lock(mu_);
  return std::exchange(pending_, {});
}

void Gatekeeper::guard(zmq::socket_t& listening) { listening.set(zmq::sockopt::plain_server, 1); }

void Gatekeeper::present(zmq::socket_t& connecting, int worker, std::uint32_t epoch) {
  connecting.set(zmq::sockopt::plain_username, incarnation_name(worker, epoch));
  connecting.set(zmq::sockopt::plain_password, kPassword);
}

ZapDecision Gatekeeper::decide(const ZapRequest& request) const {
  ZapDecision d;
  d.status_code = "400";
  if (request.mechanism == "CURVE") {
    const std::string binary = request.credentials.empty() ? std::string() : request.credentials[0];
    d.key = net::binary_to_z85(binary);
    if (!d.key.empty() && authorized_.count(binary)) {
      d.verdict = ZapVerdict::kAdmitted;
      d.user_id = d.key;
    } else {
      d.verdict = ZapVerdict::kNotAuthorized;
      d.status_text = "key not authorized";
    }
  } else if (request.mechanism == "PLAIN") {
    const std::string user = request.credentials.empty() ? std::string() : request.credentials[0];
    bool ok = false;
    {
      std::lock_guard lock(mu_);
      for (const auto& [w, e] : admitted_) ok = ok || user == incarnation_name(w, e);
    }
    d.verdict = ok ? ZapVerdict::kAdmitted : ZapVerdict::kNotThisIncarnation;
    if (ok) d.user_id = user;
    if (!ok) d.status_text = "not this incarnation";
  } else {
    d.verdict = ZapVerdict::kUnsupported;
    d.status_text = "mechanism not accepted";
  }
  if (d.verdict == ZapVerdict::kAdmitted) {
    d.status_code = "200";
    d.status_text = "OK";
  }
  return d;
}

// ZAP (RFC 27): a request is version, request id, domain, address, routing id, mechanism, credentials...; the
// reply is version, request id, status code, status text, user id, metadata.
void Gatekeeper::serve() {
  std::vector<zmq::message_t> parts;
  while (!stop_.load()) {
    zmq::pollitem_t items[] = {{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      parts.clear();
      do {
        zmq::message_t part;
        if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
        parts.push_back(std::move(part));
      } while (socket_.get(zmq::sockopt::rcvmore));
    } catch (const zmq::error_t&) {
      return;  // the context is going away
    }
    ZapRequest request;
    if (parts.size() >= 6 && parts[0].to_string_view() == "1.0") {
      request.address = parts[3].to_string();
      request.mechanism = parts[5].to_string();
      for (std::size_t i = 6; i < parts.size(); ++i) request.credentials.push_back(parts[i].to_string());
    }
    const auto d = decide(request);
    switch (d.verdict) {
      case ZapVerdict::kAdmitted:
        break;
      case ZapVerdict::kNotThisIncarnation:
        fenced_.fetch_add(1, std::memory_order_relaxed);
        break;
      case ZapVerdict::kNotAuthorized:
      case ZapVerdict::kUnsupported: {
        unauthorized_.fetch_add(1, std::memory_order_relaxed);
        const std::string key =
            d.key.empty() ? "(" + (request.mechanism.empty() ? "?" : request.mechanism) + ")" : d.key;
        std::lock_guard lock(mu_);
        if (reported_.size() < kMaxReportedKeys && reported_.insert(key).second) {
          pending_.push_back({request.address, key});
        }
        break;
      }
    }
    const std::string id = parts.size() >= 2 ? parts[1].to_string() : std::string();
    const std::string reply[] = {"1.0", id, d.status_code, d.status_text, d.user_id, ""};
    try {
      for (std::size_t i = 0; i < std::size(reply); ++i) {
        (void)socket_.send(zmq::buffer(reply[i]),
                           i + 1 < std::size(reply) ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace afs
