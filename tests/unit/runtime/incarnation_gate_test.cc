// IncarnationGate (afstream/runtime/incarnation_gate.h): a guarded tcp:// socket takes items only from peers that
// present an admitted incarnation; a peer that means an earlier incarnation (or presents nothing) delivers nothing.
#include "afstream/runtime/incarnation_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"
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

TEST(IncarnationGate, OnlyTheAdmittedIncarnationGetsThrough) {
  zmq::context_t server_ctx(1), client_ctx(1);
  {
    IncarnationGate gate(server_ctx);
    gate.admit(1, 2);
    zmq::socket_t pull(server_ctx, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    IncarnationGate::guard(pull);
    pull.bind("tcp://127.0.0.1:*");
    const auto endpoint = pull.get(zmq::sockopt::last_endpoint);

    auto push = [&](int worker, std::uint32_t epoch, bool present) {
      auto s = std::make_unique<zmq::socket_t>(client_ctx, zmq::socket_type::push);
      s->set(zmq::sockopt::linger, 0);
      if (present) IncarnationGate::present(*s, worker, epoch);
      s->connect(endpoint);
      (void)s->send(zmq::str_buffer("x"), zmq::send_flags::dontwait);
      return s;
    };
    auto stale = push(1, 1, true);       // a peer that has not heard of the restart
    auto other = push(0, 2, true);       // meant for another worker
    auto anonymous = push(1, 2, false);  // presents nothing: ZeroMQ refuses it before asking the gate
    EXPECT_TRUE(drain(pull, std::chrono::milliseconds(300)).empty());
    EXPECT_GE(gate.refused(), 2u);
    auto fresh = push(1, 2, true);
    (void)fresh->send(zmq::str_buffer("y"), zmq::send_flags::dontwait);
    EXPECT_EQ(drain(pull, std::chrono::milliseconds(300)), (std::vector<std::string>{"x", "y"}));
  }
}

TEST(IncarnationGate, OnePerContext) {
  zmq::context_t ctx(1);
  IncarnationGate first(ctx);
  const auto msg = afs::testing::error_message<RuntimeError>([&] { IncarnationGate second(ctx); });
  EXPECT_NE(msg.find("one gate per ZeroMQ context"), std::string::npos) << msg;
}

}  // namespace
}  // namespace afs
