// RemoteStore (afstream/store/remote_store.h) against what a real backup server does not do on demand: no server
// at all (RuntimeError within the deadline, naming the endpoint), a server that answers late, twice, with garbage or
// with an error, a server that moves (set_endpoint), and requests over the message limit. The contract itself
// (through a real BackupServer) is in store_contract_test.cc.
#include "afstream/store/remote_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/codec.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/store/memory_store.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

using afs::testing::error_message;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

RemoteStoreOptions quick(milliseconds deadline = milliseconds(400)) {
  RemoteStoreOptions o;
  o.attempt_timeout = milliseconds(50);
  o.attempt_timeout_max = milliseconds(200);
  o.backoff = milliseconds(10);
  o.backoff_max = milliseconds(50);
  o.deadline = deadline;
  return o;
}

using afs::testing::TempDir;

// For talking to a server that answers: attempts long enough that a loaded machine never times one out.
RemoteStoreOptions steady() {
  RemoteStoreOptions o;
  o.attempt_timeout = milliseconds(3000);
  o.deadline = milliseconds(20000);
  return o;
}

// A tcp endpoint nobody listens on (a port the system just handed out and took back).
std::string unused_tcp_endpoint() {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind("tcp://127.0.0.1:*");
  return s.get(zmq::sockopt::last_endpoint);
}

TEST(RemoteStore, NoServerGivesRuntimeErrorWithinTheDeadlineNamingTheEndpoint) {
  TempDir dir;
  for (const std::string& endpoint : {unused_tcp_endpoint(), "ipc://" + dir.str() + "/nobody"}) {
    SCOPED_TRACE(endpoint);
    RemoteStore store(endpoint, quick());
    const std::vector<std::pair<std::string, std::function<void()>>> calls = {
        {"put_state for worker 3",
         [&] {
           store.put_state(3, true, Bytes{1, 2}, {{0, 1}});
         }},
        {"put_items for worker 3",
         [&] {
           store.put_items(3, Bytes{1}, {{0, 1, 1}});
         }},
        {"state_chain for worker 3", [&] { store.state_chain(3); }},
        {"item_records for worker 3", [&] { store.item_records(3); }},
        {"drop for worker 3", [&] { store.drop(3); }},
        {"no reply to stats", [&] { store.stats(); }},
    };
    for (const auto& [what, call] : calls) {
      const auto t0 = Clock::now();
      const std::string msg = error_message<RuntimeError>(call);
      const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
      EXPECT_NE(msg.find("backup server " + endpoint), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find("no reply"), std::string::npos) << msg;
      EXPECT_NE(msg.find("after 400 ms"), std::string::npos) << msg;
      EXPECT_GE(took.count(), 300) << "gave up before its deadline";
      // Far beyond the 400 ms deadline means unbounded; a loaded machine (the suite runs in parallel) can add
      // seconds of scheduling delay, which is not what this checks.
      EXPECT_LT(took.count(), 5000) << "went far beyond its deadline";
    }
    const auto c = store.counters();
    EXPECT_EQ(c.calls, 6u);
    EXPECT_EQ(c.timeouts, 6u);
    EXPECT_GE(c.resends, 6u);
  }
}

TEST(RemoteStore, MalformedEndpointGivesConfigErrorNamingIt) {
  for (const std::string endpoint : {"foo://bar", "tcp://", "backup-host:5560", ""}) {
    const std::string msg = error_message<ConfigError>([&] { RemoteStore store(endpoint, quick()); });
    EXPECT_NE(msg.find("'" + endpoint + "'"), std::string::npos) << endpoint << ": " << msg;
  }
  RemoteStore store("tcp://127.0.0.1:1", quick());
  EXPECT_THROW(store.set_endpoint("nope"), ConfigError);
  EXPECT_EQ(store.endpoint(), "tcp://127.0.0.1:1");  // unchanged
}

// A scripted server: a ROUTER socket on a thread that answers each request with what `script` returns (a list of
// frames to send back, possibly none).
class FakeServer {
 public:
  using Script = std::function<std::vector<Bytes>(const net::StoreRequestMsg&, int attempt)>;

  explicit FakeServer(Script script) : script_(std::move(script)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  std::vector<net::StoreRequestMsg> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    int attempt = 0;
    while (!stop_) {
      zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t id, payload;
      (void)socket_.recv(id);
      (void)socket_.recv(payload);
      const auto m = net::decode({static_cast<const std::uint8_t*>(payload.data()), payload.size()});
      const auto& request = std::get<net::StoreRequestMsg>(m.body);
      {
        std::lock_guard lock(mu_);
        received_.push_back(request);
      }
      for (const Bytes& frame : script_(request, attempt++)) {
        zmq::message_t to(id.data(), id.size());
        (void)socket_.send(to, zmq::send_flags::sndmore);
        (void)socket_.send(zmq::message_t(frame.data(), frame.size()), zmq::send_flags::none);
      }
    }
  }

  Script script_;
  zmq::context_t ctx_{1};
  zmq::socket_t socket_{ctx_, zmq::socket_type::router};
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<net::StoreRequestMsg> received_;
};

// What a server answers a request that succeeded with: the chain for put_state, ok for put_items and drop.
decltype(net::StoreReplyMsg::result) success_for(const net::StoreRequestMsg& r) {
  if (std::holds_alternative<net::PutStateReq>(r.op)) return net::StoreChainMsg{3, 1, 2, 0};
  return net::StoreOkMsg{};
}

Bytes reply_frame(std::uint64_t id, decltype(net::StoreReplyMsg::result) result) {
  return net::encode(net::Message{.sender = 0, .epoch = 0, .body = net::StoreReplyMsg{id, std::move(result)}});
}

TEST(RemoteStore, StaleAndUndecodableRepliesAreDroppedAndCounted) {
  FakeServer server([](const net::StoreRequestMsg& r, int) {
    return std::vector<Bytes>{
        reply_frame(r.request_id + 1000, net::StoreRecordsMsg{{{9}}}),  // another request's reply
        Bytes{1, 2, 3},                                                 // not a frame
        net::encode(net::Message{.sender = 0, .epoch = 0, .body = net::AckMsg{1, 2, 3, {}}}),  // not a reply
        reply_frame(r.request_id, net::StoreRecordsMsg{{{1, 2}, {3}}}),
    };
  });
  RemoteStore store(server.endpoint(), steady());
  EXPECT_EQ(store.state_chain(4), (std::vector<Bytes>{{1, 2}, {3}}));
  const auto c = store.counters();
  EXPECT_EQ(c.stale_replies, 1u);
  EXPECT_EQ(c.bad_replies, 2u);
  EXPECT_EQ(c.resends, 0u);
}

// The first attempt gets no answer; the second (same session, same request id, on a new connection) does. A late
// reply to the first attempt would be dropped as stale on the new connection anyway.
TEST(RemoteStore, ResendsTheSameRequestAfterATimeout) {
  FakeServer server([](const net::StoreRequestMsg& r, int attempt) {
    if (attempt == 0) return std::vector<Bytes>{};
    return std::vector<Bytes>{reply_frame(r.request_id, success_for(r))};
  });
  RemoteStore store(server.endpoint(), quick(milliseconds(10000)));
  const ChainInfo info = store.put_state(2, false, Bytes{7, 7}, {{1, 5}});
  EXPECT_EQ(info.generation, 3u);  // the server's description of the chain, as it sent it
  EXPECT_EQ(info.length, 1u);
  EXPECT_EQ(info.full_bytes, 2u);
  const auto received = server.received();
  ASSERT_GE(received.size(), 2u);  // more only if a loaded machine delayed the answer to the second attempt
  for (const auto& r : received) EXPECT_EQ(r, received[0]) << "a resent request differs from the first";
  EXPECT_NE(received[0].session, 0u);
  EXPECT_EQ(std::get<net::PutStateReq>(received[0].op),
            (net::PutStateReq{.worker = 2, .full = false, .record = {7, 7}, .covered = {{1, 5}}}));
  EXPECT_EQ(store.counters().resends, received.size() - 1);

  // The next call on the same session gets the next request id.
  store.put_items(2, Bytes{1}, {{1, 6, 6}});
  const auto after = server.received();
  ASSERT_GT(after.size(), received.size());
  EXPECT_EQ(after.back().session, received[0].session);
  EXPECT_EQ(after.back().request_id, received[0].request_id + 1);
}

TEST(RemoteStore, ErrorRepliesBecomeTypedErrors) {
  std::atomic<int> kind{1};
  FakeServer server([&](const net::StoreRequestMsg& r, int) {
    return std::vector<Bytes>{reply_frame(
        r.request_id, net::StoreErrorMsg{static_cast<net::StoreErrorKind>(kind.load()), "the store's own words"})};
  });
  RemoteStore store(server.endpoint(), steady());
  // Corrupt record: the store's FormatError, message unchanged.
  EXPECT_EQ(error_message<FormatError>([&] { store.state_chain(6); }), "the store's own words");
  for (int k : {2, 3}) {
    kind = k;
    const std::string msg = error_message<RuntimeError>([&] { store.put_state(6, true, Bytes{1}, {}); });
    EXPECT_NE(msg.find("backup server " + server.endpoint()), std::string::npos) << msg;
    EXPECT_NE(msg.find("put_state for worker 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the store's own words"), std::string::npos) << msg;
    EXPECT_NE(msg.find(k == 2 ? "store failure" : "bad request"), std::string::npos) << msg;
  }
}

TEST(RemoteStore, WrongKindOfReplyIsARuntimeError) {
  FakeServer server([](const net::StoreRequestMsg& r, int) {
    return std::vector<Bytes>{reply_frame(r.request_id, net::StoreOkMsg{})};
  });
  RemoteStore store(server.endpoint(), steady());
  const std::string msg = error_message<RuntimeError>([&] { store.item_records(1); });
  EXPECT_NE(msg.find("unexpected kind of reply to item_records for worker 1"), std::string::npos) << msg;
  // A put_state is answered with its chain, never a bare ok.
  const std::string put = error_message<RuntimeError>([&] { store.put_state(1, true, Bytes{1}, {}); });
  EXPECT_NE(put.find("unexpected kind of reply to put_state for worker 1"), std::string::npos) << put;
}

TEST(RemoteStore, RequestOverTheLimitIsRefusedWithoutSending) {
  FakeServer server([](const net::StoreRequestMsg& r, int) {
    return std::vector<Bytes>{reply_frame(r.request_id, net::StoreOkMsg{})};
  });
  RemoteStoreOptions o = steady();
  o.max_message_bytes = 4096;
  RemoteStore store(server.endpoint(), o);
  const std::string msg = error_message<RuntimeError>([&] { store.put_items(1, Bytes(5000, 1), {}); });
  EXPECT_NE(msg.find("put_items for worker 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("over the limit of 4096 bytes"), std::string::npos) << msg;
  store.put_items(1, Bytes(3000, 1), {});  // under the limit: sent
  EXPECT_EQ(server.received().size(), 1u);
}

// Client and server agree on the default limit, and it holds a full backup of a 1e7-counter Count-Min (80 MB) and
// a chain of about six of them.
TEST(RemoteStore, DefaultMessageLimitMatchesTheServersAndHoldsLargeStates) {
  EXPECT_EQ(RemoteStoreOptions{}.max_message_bytes, BackupServerOptions{}.max_message_bytes);
  EXPECT_EQ(RemoteStoreOptions{}.max_message_bytes, net::kDefaultStoreMaxMessageBytes);
  EXPECT_GE(RemoteStoreOptions{}.max_message_bytes, std::size_t{6} * 80'000'000);
}

// A put issued while no server listens completes once one does, here at another endpoint (set_endpoint while the
// call is retrying).
TEST(RemoteStore, CallInProgressSwitchesToANewEndpoint) {
  RemoteStore store(unused_tcp_endpoint(), quick(milliseconds(10000)));
  auto put = std::async(std::launch::async, [&] { store.put_state(1, true, Bytes{4, 2}, {}); });
  EXPECT_EQ(put.wait_for(milliseconds(300)), std::future_status::timeout) << "a put with no server returned";

  auto memory = std::make_unique<MemoryStore>();
  MemoryStore* inside = memory.get();
  BackupServer server("tcp://127.0.0.1:0", std::move(memory));
  std::atomic<bool> stop{false};
  std::thread serving([&] { server.run(stop); });
  store.set_endpoint(server.bound_endpoint());
  const auto status = put.wait_for(std::chrono::seconds(8));
  EXPECT_EQ(status, std::future_status::ready);
  if (status == std::future_status::ready) {
    EXPECT_NO_THROW(put.get());
  }
  EXPECT_EQ(inside->state_chain(1), (std::vector<Bytes>{{4, 2}}));
  EXPECT_EQ(store.state_chain(1), (std::vector<Bytes>{{4, 2}}));
  EXPECT_GE(store.counters().resends, 1u);
  stop = true;
  serving.join();
}

// A worker replaced while it still runs (its successor registered and restored) cannot write into the successor's
// backups: once incarnation 2 has used the server, incarnation 1's requests are refused, naming both. Other workers,
// and clients that give no incarnation, are not affected.
TEST(RemoteStore, OlderIncarnationIsFencedOffOnceANewerOneUsedTheServer) {
  auto memory = std::make_unique<MemoryStore>();
  MemoryStore* inside = memory.get();
  BackupServer server("tcp://127.0.0.1:0", std::move(memory));
  std::atomic<bool> stop{false};
  std::thread serving([&] { server.run(stop); });
  auto options = [](std::uint32_t incarnation) {
    auto o = steady();
    o.incarnation = incarnation;
    return o;
  };
  RemoteStore first(server.bound_endpoint(), options(1));
  RemoteStore second(server.bound_endpoint(), options(2));
  RemoteStore anonymous(server.bound_endpoint(), options(0));
  first.put_state(1, true, Bytes{1}, {});
  first.put_state(4, true, Bytes{4}, {});
  EXPECT_EQ(second.state_chain(1), (std::vector<Bytes>{{1}}));  // the successor restores: from now on it is worker 1
  const auto msg = error_message<RuntimeError>([&] { first.put_state(1, false, Bytes{9}, {}); });
  EXPECT_NE(msg.find("stale incarnation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worker 1: incarnation 1 is fenced off: incarnation 2 has used the store since"),
            std::string::npos)
      << msg;
  EXPECT_EQ(inside->state_chain(1), (std::vector<Bytes>{{1}})) << "the stale put was not applied";
  EXPECT_NO_THROW(first.put_state(4, false, Bytes{5}, {})) << "worker 4 has no newer incarnation";
  EXPECT_NO_THROW(second.put_state(1, false, Bytes{2}, {}));
  EXPECT_NO_THROW(anonymous.put_state(1, false, Bytes{3}, {}));
  EXPECT_EQ(inside->state_chain(1), (std::vector<Bytes>{{1}, {2}, {3}}));
  EXPECT_EQ(server.counters().stale_incarnations, 1u);
  stop = true;
  serving.join();
}

}  // namespace
}  // namespace afs
