// Gatekeeper (afstream/runtime/gatekeeper.h), the ZAP handler of a process's context: its decisions (CURVE: only
// authorized keys; PLAIN: only admitted incarnations; nothing else), and on real tcp:// sockets: a guarded socket
// takes items only from peers that present an admitted incarnation, a CURVE socket only from authorized keys, and a
// peer that means an earlier incarnation (an old incarnation key, or an old PLAIN name) delivers nothing.
#include "afstream/runtime/gatekeeper.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/net/curve.h"
#include "tests/error_message.h"

namespace afs {
namespace {

// Everything `pull` receives within `wait`.
std::vector<std::string> drain(zmq::socket_t& pull, std::chrono::milliseconds wait) {
  std::vector<std::string> got;
  const auto end = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < end) {
    zmq::pollitem_t items[] = {{static_cast<void*>(pull), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(20));
    zmq::message_t m;
    while (pull.recv(m, zmq::recv_flags::dontwait)) got.push_back(m.to_string());
  }
  return got;
}

ZapRequest curve_request(const std::string& z85_key) { return {"10.0.0.2", "CURVE", {net::z85_to_binary(z85_key)}}; }

TEST(GatekeeperDecisions, CurveLetsInOnlyAuthorizedKeys) {
  const auto member = net::generate_curve_keypair(), stranger = net::generate_curve_keypair();
  zmq::context_t ctx(1);
  Gatekeeper gate(ctx, {member.public_key});

  const auto in = gate.decide(curve_request(member.public_key));
  EXPECT_EQ(in.verdict, ZapVerdict::kAdmitted);
  EXPECT_EQ(in.status_code, "200");
  EXPECT_EQ(in.user_id, member.public_key) << "ZeroMQ attaches it to the client's messages as User-Id";

  const auto out = gate.decide(curve_request(stranger.public_key));
  EXPECT_EQ(out.verdict, ZapVerdict::kNotAuthorized);
  EXPECT_EQ(out.status_code, "400");
  EXPECT_EQ(out.key, stranger.public_key) << "named, for the log line";
  EXPECT_TRUE(out.user_id.empty());

  // A malformed key (not 32 bytes), or none at all.
  EXPECT_EQ(gate.decide({"10.0.0.2", "CURVE", {std::string(31, 'x')}}).verdict, ZapVerdict::kNotAuthorized);
  EXPECT_EQ(gate.decide({"10.0.0.2", "CURVE", {}}).verdict, ZapVerdict::kNotAuthorized);
  // PLAIN fencing names do not open CURVE's door, nor the reverse.
  EXPECT_EQ(gate.decide({"10.0.0.2", "PLAIN", {member.public_key, "-"}}).verdict, ZapVerdict::kNotThisIncarnation);
}

TEST(GatekeeperDecisions, WithoutAuthorizedKeysEveryCurveClientIsRefused) {
  const auto anyone = net::generate_curve_keypair();
  zmq::context_t ctx(1);
  Gatekeeper gate(ctx);
  EXPECT_EQ(gate.decide(curve_request(anyone.public_key)).verdict, ZapVerdict::kNotAuthorized);
}

TEST(GatekeeperDecisions, PlainLetsInOnlyAdmittedIncarnations) {
  zmq::context_t ctx(1);
  Gatekeeper gate(ctx);
  EXPECT_EQ(gate.decide({"10.0.0.2", "PLAIN", {"w1-e2", "-"}}).verdict, ZapVerdict::kNotThisIncarnation);
  gate.admit(1, 2);
  const auto in = gate.decide({"10.0.0.2", "PLAIN", {"w1-e2", "-"}});
  EXPECT_EQ(in.verdict, ZapVerdict::kAdmitted);
  EXPECT_EQ(in.status_code, "200");
  EXPECT_EQ(gate.decide({"10.0.0.2", "PLAIN", {"w1-e1", "-"}}).verdict, ZapVerdict::kNotThisIncarnation)
      << "an earlier incarnation";
  EXPECT_EQ(gate.decide({"10.0.0.2", "PLAIN", {"w0-e2", "-"}}).verdict, ZapVerdict::kNotThisIncarnation)
      << "another worker";
  EXPECT_EQ(gate.decide({"10.0.0.2", "PLAIN", {}}).verdict, ZapVerdict::kNotThisIncarnation);
}

TEST(GatekeeperDecisions, OtherMechanismsAndMalformedRequestsAreRefused) {
  zmq::context_t ctx(1);
  Gatekeeper gate(ctx);
  const auto null = gate.decide({"10.0.0.2", "NULL", {}});
  EXPECT_EQ(null.verdict, ZapVerdict::kUnsupported);
  EXPECT_EQ(null.status_code, "400");
  EXPECT_EQ(gate.decide({}).verdict, ZapVerdict::kUnsupported);
}

TEST(Gatekeeper, OnlyTheAdmittedIncarnationGetsThrough) {
  zmq::context_t server_ctx(1), client_ctx(1);
  {
    Gatekeeper gate(server_ctx);
    gate.admit(1, 2);
    zmq::socket_t pull(server_ctx, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    Gatekeeper::guard(pull);
    pull.bind("tcp://127.0.0.1:*");
    const auto endpoint = pull.get(zmq::sockopt::last_endpoint);

    auto push = [&](int worker, std::uint32_t epoch, bool present) {
      auto s = std::make_unique<zmq::socket_t>(client_ctx, zmq::socket_type::push);
      s->set(zmq::sockopt::linger, 0);
      if (present) Gatekeeper::present(*s, worker, epoch);
      s->connect(endpoint);
      (void)s->send(zmq::str_buffer("x"), zmq::send_flags::dontwait);
      return s;
    };
    auto stale = push(1, 1, true);       // a peer that has not heard of the restart
    auto other = push(0, 2, true);       // meant for another worker
    auto anonymous = push(1, 2, false);  // presents nothing: ZeroMQ refuses it before asking the gatekeeper
    EXPECT_TRUE(drain(pull, std::chrono::milliseconds(300)).empty());
    EXPECT_GE(gate.fenced(), 2u);
    EXPECT_EQ(gate.unauthorized(), 0u) << "fencing is not an authentication failure";
    auto fresh = push(1, 2, true);
    (void)fresh->send(zmq::str_buffer("y"), zmq::send_flags::dontwait);
    EXPECT_EQ(drain(pull, std::chrono::milliseconds(300)), (std::vector<std::string>{"x", "y"}));
  }
}

// CURVE: a worker incarnation's socket serves with a keypair of its own and lets in only authorized clients. A peer
// with an unauthorized key is refused and counted (and its key reported once); a peer that means the previous
// incarnation (its key) cannot complete the handshake with this one on the same port, so it delivers nothing.
TEST(Gatekeeper, CurveLetsInAuthorizedClientsThatMeanThisIncarnation) {
  const auto member = net::generate_curve_keypair(), stranger = net::generate_curve_keypair();
  const auto previous = net::generate_curve_keypair(), current = net::generate_curve_keypair();
  zmq::context_t server_ctx(1), client_ctx(1);
  {
    Gatekeeper gate(server_ctx, {member.public_key});
    zmq::socket_t pull(server_ctx, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    net::make_curve_server(pull, current);
    pull.bind("tcp://127.0.0.1:*");
    const auto endpoint = pull.get(zmq::sockopt::last_endpoint);

    auto push = [&](const net::CurveKeypair& client, const std::string& server_key, const char* text) {
      auto s = std::make_unique<zmq::socket_t>(client_ctx, zmq::socket_type::push);
      s->set(zmq::sockopt::linger, 0);
      net::make_curve_client(*s, {client, server_key});
      s->connect(endpoint);
      (void)s->send(zmq::buffer(std::string(text)), zmq::send_flags::dontwait);
      return s;
    };
    auto stale = push(member, previous.public_key, "stale");  // has not heard of the restart
    auto intruder = push(stranger, current.public_key, "intruder");
    auto intruder_again = push(stranger, current.public_key, "intruder again");
    EXPECT_TRUE(drain(pull, std::chrono::milliseconds(400)).empty());
    EXPECT_GE(gate.unauthorized(), 2u);
    const auto refusals = gate.new_refusals();
    ASSERT_EQ(refusals.size(), 1u) << "each refused key once";
    EXPECT_EQ(refusals[0].key, stranger.public_key);
    EXPECT_EQ(refusals[0].address, "127.0.0.1");
    EXPECT_TRUE(gate.new_refusals().empty());
    const auto unauthorized = gate.unauthorized();

    auto fresh = push(member, current.public_key, "fresh");
    EXPECT_EQ(drain(pull, std::chrono::milliseconds(400)), (std::vector<std::string>{"fresh"}));
    EXPECT_EQ(gate.unauthorized(), unauthorized) << "the stale peer never reached the gatekeeper";
  }
}

TEST(Gatekeeper, OnePerContext) {
  zmq::context_t ctx(1);
  Gatekeeper first(ctx);
  const auto msg = afs::testing::error_message<RuntimeError>([&] { Gatekeeper second(ctx); });
  EXPECT_NE(msg.find("one gatekeeper per ZeroMQ context"), std::string::npos) << msg;
}

}  // namespace
}  // namespace afs
