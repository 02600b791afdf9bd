// BackupServer (afstream/runtime/backup_server.h) spoken to with raw ZeroMQ frames, for what a well-behaved
// RemoteStore never sends: endpoints (ephemeral tcp port, ipc, bind failures), bad frames (counted, answered with a
// bad-request error when their request id can be read, else dropped), duplicate puts (applied once per session and
// request id), store exceptions and oversized replies (error replies; the server carries on), and stopping.
#include "afstream/runtime/backup_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/codec.h"
#include "afstream/store/memory_store.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

using afs::testing::error_message;
using std::chrono::milliseconds;

using afs::testing::TempDir;

// A BackupServer on a thread; stopped and joined at the end of the scope.
class Running {
 public:
  explicit Running(std::unique_ptr<BackupStore> store, BackupServerOptions options = {},
                   const std::string& listen = "tcp://127.0.0.1:0")
      : server(listen, std::move(store), options) {
    thread_ = std::thread([this] {
      try {
        server.run(stop_);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "run: " << e.what();
      }
    });
  }
  ~Running() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  BackupServer server;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A DEALER socket with bounded receives.
class RawClient {
 public:
  explicit RawClient(const std::string& endpoint) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 3000);
    socket_.connect(endpoint);
  }
  void send(const std::vector<std::uint8_t>& frame) {
    (void)socket_.send(zmq::message_t(frame.data(), frame.size()), zmq::send_flags::none);
  }
  // The next reply, or nullopt if none comes within `wait`.
  std::optional<net::StoreReplyMsg> reply(milliseconds wait = milliseconds(3000)) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(wait.count()));
    zmq::message_t msg;
    if (!socket_.recv(msg)) return std::nullopt;
    return std::get<net::StoreReplyMsg>(net::decode({static_cast<const std::uint8_t*>(msg.data()), msg.size()}).body);
  }
  net::StoreReplyMsg call(const net::StoreRequestMsg& request) {
    send(frame(request));
    auto r = reply();
    if (!r) throw std::runtime_error("no reply");
    return *r;
  }
  static std::vector<std::uint8_t> frame(const net::StoreRequestMsg& request) {
    return net::encode(net::Message{.sender = 0, .epoch = 0, .body = request});
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t socket_{ctx_, zmq::socket_type::dealer};
};

net::StoreRequestMsg request(std::uint64_t id, net::StoreOp op, std::uint64_t session = 0) {
  return net::StoreRequestMsg{.request_id = id, .session = session, .op = std::move(op)};
}

// Waits (at most 5 s) until the server has counted `n` bad frames.
bool bad_frames_reach(const BackupServer& server, std::uint64_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server.bad_frames() < n) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

const net::StoreErrorMsg* error_of(const net::StoreReplyMsg& r) { return std::get_if<net::StoreErrorMsg>(&r.result); }

TEST(BackupServer, EphemeralTcpPortAndIpcAreReportedAsBound) {
  BackupServer tcp("tcp://127.0.0.1:0", std::make_unique<MemoryStore>());
  const std::string& ep = tcp.bound_endpoint();
  ASSERT_EQ(ep.rfind("tcp://127.0.0.1:", 0), 0u) << ep;
  const int port = std::stoi(ep.substr(std::string("tcp://127.0.0.1:").size()));
  EXPECT_GT(port, 0);
  BackupServer star("tcp://127.0.0.1:*", std::make_unique<MemoryStore>());
  EXPECT_NE(star.bound_endpoint(), ep);

  TempDir dir;
  BackupServer ipc("ipc://" + dir.str() + "/s", std::make_unique<MemoryStore>());
  EXPECT_EQ(ipc.bound_endpoint(), "ipc://" + dir.str() + "/s");
}

TEST(BackupServer, BindFailuresGiveConfigErrorNamingTheEndpoint) {
  BackupServer first("tcp://127.0.0.1:0", std::make_unique<MemoryStore>());
  for (const std::string& endpoint : {first.bound_endpoint(), std::string("foo://x"), std::string("tcp://nohost")}) {
    const std::string msg =
        error_message<ConfigError>([&] { BackupServer s(endpoint, std::make_unique<MemoryStore>()); });
    EXPECT_NE(msg.find("'" + endpoint + "'"), std::string::npos) << msg;
  }
  EXPECT_THROW(BackupServer("tcp://127.0.0.1:0", nullptr), ConfigError);
}

TEST(BackupServer, ServesEveryOperation) {
  Running r(std::make_unique<MemoryStore>());
  RawClient c(r.server.bound_endpoint());
  const auto put = c.call(request(1, net::PutStateReq{.worker = 2, .full = true, .record = {1}, .covered = {}}));
  ASSERT_TRUE(std::holds_alternative<net::StoreChainMsg>(put.result));
  const auto chain_after = std::get<net::StoreChainMsg>(put.result);
  EXPECT_EQ(chain_after.length, 1u);
  EXPECT_EQ(chain_after.full_bytes, 1u);
  EXPECT_EQ(chain_after.delta_bytes, 0u);
  (void)c.call(request(2, net::PutItemsReq{.worker = 2, .record = {5, 5}, .infos = {{0, 1, 3}}}));
  (void)c.call(request(3, net::PutStateReq{.worker = 2, .full = false, .record = {2}, .covered = {{0, 3}}}));
  const auto chain = c.call(request(4, net::StateChainReq{2, {}}));
  EXPECT_EQ(chain.request_id, 4u);
  EXPECT_EQ(std::get<net::StoreRecordsMsg>(chain.result).records, (std::vector<Bytes>{{1}, {2}}));
  EXPECT_TRUE(std::get<net::StoreRecordsMsg>(c.call(request(5, net::ItemRecordsReq{2})).result).records.empty());
  EXPECT_EQ(std::get<net::StoreStatsMsg>(c.call(request(6, net::StatsReq{})).result), (net::StoreStatsMsg{2, 1, 4, 2}));
  (void)c.call(request(7, net::DropReq{2}));
  EXPECT_TRUE(std::get<net::StoreRecordsMsg>(c.call(request(8, net::StateChainReq{2, {}})).result).records.empty());
  EXPECT_EQ(r.server.counters().requests, 8u);
  EXPECT_EQ(r.server.bad_frames(), 0u);
}

TEST(BackupServer, BadFramesAreCountedAndAnsweredWhenTheirIdCanBeRead) {
  BackupServerOptions options;
  options.max_message_bytes = 4096;
  Running r(std::make_unique<MemoryStore>(), options);
  RawClient c(r.server.bound_endpoint());

  c.send({1, 2, 3});  // not a frame at all: nothing to answer
  EXPECT_TRUE(bad_frames_reach(r.server, 1));
  c.send(net::encode(net::Message{.sender = 1, .epoch = 1, .body = net::AckMsg{1, 2, 3, {}}}));  // not a request
  EXPECT_TRUE(bad_frames_reach(r.server, 2));
  EXPECT_EQ(c.reply(milliseconds(100)), std::nullopt);

  // Over the limit, but the id is readable.
  c.send(RawClient::frame(request(31, net::PutItemsReq{.worker = 1, .record = Bytes(6000, 1), .infos = {}})));
  auto reply = c.reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->request_id, 31u);
  ASSERT_TRUE(error_of(*reply));
  EXPECT_EQ(error_of(*reply)->kind, net::StoreErrorKind::kBadRequest);
  EXPECT_NE(error_of(*reply)->message.find("exceeds the limit of 4096"), std::string::npos)
      << error_of(*reply)->message;

  // Another wire version.
  auto other = RawClient::frame(request(32, net::StatsReq{}));
  other[8 + 8 + 0] ^= 0x02;  // segment table (8), root pointer (8), then Envelope.version (first data field)
  c.send(other);
  reply = c.reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->request_id, 32u);
  ASSERT_TRUE(error_of(*reply));
  EXPECT_NE(error_of(*reply)->message.find("version"), std::string::npos) << error_of(*reply)->message;

  // Truncated: the id may or may not survive; either way it is counted and the server carries on.
  auto truncated =
      RawClient::frame(request(33, net::PutStateReq{.worker = 1, .full = true, .record = {1}, .covered = {}}));
  truncated.resize(truncated.size() - 8);
  c.send(truncated);
  EXPECT_TRUE(bad_frames_reach(r.server, 5));
  EXPECT_EQ(c.reply(milliseconds(100)), std::nullopt) << "the segment table no longer fits: no id to answer";

  // Invalid content.
  c.send(RawClient::frame(
      request(34, net::PutStateReq{.worker = 1, .full = true, .record = {1}, .covered = {{5, 1}, {5, 2}}})));
  reply = c.reply();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->request_id, 34u);
  ASSERT_TRUE(error_of(*reply));
  EXPECT_EQ(error_of(*reply)->kind, net::StoreErrorKind::kBadRequest);
  EXPECT_NE(error_of(*reply)->message.find("channel 5 twice"), std::string::npos) << error_of(*reply)->message;

  EXPECT_EQ(r.server.bad_frames(), 6u);
  EXPECT_EQ(r.server.counters().requests, 0u);
  // Nothing bad reached the store, and good requests are still served.
  const auto chain = c.call(request(35, net::StateChainReq{1, {}}));
  EXPECT_TRUE(std::get<net::StoreRecordsMsg>(chain.result).records.empty());
}

TEST(BackupServer, APutIsAppliedOncePerSessionAndRequestId) {
  Running r(std::make_unique<MemoryStore>());
  RawClient c(r.server.bound_endpoint());
  const auto put1 = request(1, net::PutStateReq{.worker = 1, .full = false, .record = {1}, .covered = {}}, 77);
  const auto put2 = request(2, net::PutItemsReq{.worker = 1, .record = {2}, .infos = {{0, 1, 1}}}, 77);
  EXPECT_EQ(c.call(put1).request_id, 1u);
  const auto again = c.call(put1);  // a resend: answered again, not applied again
  EXPECT_EQ(again.request_id, 1u);
  EXPECT_TRUE(std::holds_alternative<net::StoreChainMsg>(again.result));
  EXPECT_EQ(c.call(put2).request_id, 2u);
  c.send(RawClient::frame(put1));  // an old copy overtaken by later requests: dropped unanswered
  EXPECT_EQ(c.reply(milliseconds(300)), std::nullopt);
  // Another session with the same ids is another client; session 0 is never deduplicated.
  (void)c.call(request(1, net::PutStateReq{.worker = 1, .full = false, .record = {3}, .covered = {}}, 78));
  (void)c.call(request(1, net::PutStateReq{.worker = 1, .full = false, .record = {4}, .covered = {}}, 0));
  (void)c.call(request(1, net::PutStateReq{.worker = 1, .full = false, .record = {4}, .covered = {}}, 0));
  // Reads are never deduplicated.
  const auto chain = c.call(request(3, net::StateChainReq{1, {}}, 77));
  EXPECT_EQ(std::get<net::StoreRecordsMsg>(chain.result).records, (std::vector<Bytes>{{1}, {3}, {4}, {4}}));
  EXPECT_EQ(std::get<net::StoreRecordsMsg>(c.call(request(3, net::ItemRecordsReq{1}, 77)).result).records,
            (std::vector<Bytes>{{2}}));
  EXPECT_EQ(r.server.counters().duplicates, 2u);
}

TEST(BackupServer, TheOldestSessionsAreForgottenBeyondTheLimit) {
  BackupServerOptions options;
  options.dedupe_sessions = 2;
  Running r(std::make_unique<MemoryStore>(), options);
  RawClient c(r.server.bound_endpoint());
  auto put = [](std::uint64_t session) {
    return request(1, net::PutStateReq{.worker = 1, .full = false, .record = {std::uint8_t(session)}, .covered = {}},
                   session);
  };
  (void)c.call(put(1));
  (void)c.call(put(2));
  (void)c.call(put(3));  // session 1 is forgotten
  (void)c.call(put(3));  // remembered: not applied
  (void)c.call(put(1));  // forgotten: applied again
  const auto chain = c.call(request(9, net::StateChainReq{1, {}}));
  EXPECT_EQ(std::get<net::StoreRecordsMsg>(chain.result).records, (std::vector<Bytes>{{1}, {2}, {3}, {1}}));
}

// A store that fails in every way a store can.
class FailingStore final : public BackupStore {
 public:
  ChainInfo put_state(int worker, bool, Bytes, const SeqByChannel&) override {
    throw RuntimeError("rocksdb put failed for worker " + std::to_string(worker));
  }
  bool compact_state(int, std::uint64_t, std::uint64_t, Bytes) override { return false; }
  std::vector<Bytes> state_chain(int worker, ChainInfo* = nullptr) const override {
    throw FormatError("state backup of worker " + std::to_string(worker) + ": checksum mismatch");
  }
  void put_items(int, Bytes, std::vector<ItemRecordInfo>) override { throw std::bad_alloc(); }
  std::vector<Bytes> item_records(int) const override { throw 42; }
  void drop(int) override {}
  void confirm_checkpoint(int worker, std::uint64_t, int, bool) override {
    throw RuntimeError("rocksdb ledger write failed for worker " + std::to_string(worker));
  }
  CheckpointStatus checkpoint_status() const override { return {}; }
  CheckpointStatus rejoin_checkpoints(int) override { return {}; }
  StoreStats stats() const override { return {}; }
};

TEST(BackupServer, StoreExceptionsBecomeErrorRepliesAndTheServerCarriesOn) {
  Running r(std::make_unique<FailingStore>());
  RawClient c(r.server.bound_endpoint());
  auto reply = c.call(request(1, net::PutStateReq{.worker = 4, .full = true, .record = {}, .covered = {}}, 5));
  ASSERT_TRUE(error_of(reply));
  EXPECT_EQ(error_of(reply)->kind, net::StoreErrorKind::kStoreFailure);
  EXPECT_EQ(error_of(reply)->message, "rocksdb put failed for worker 4");
  reply = c.call(request(1, net::PutStateReq{.worker = 4, .full = true, .record = {}, .covered = {}}, 5));
  ASSERT_TRUE(error_of(reply)) << "a resend gets the same (cached) answer";
  EXPECT_EQ(error_of(reply)->message, "rocksdb put failed for worker 4");

  reply = c.call(request(2, net::StateChainReq{4, {}}));
  ASSERT_TRUE(error_of(reply));
  EXPECT_EQ(error_of(reply)->kind, net::StoreErrorKind::kCorruptRecord);
  EXPECT_EQ(error_of(reply)->message, "state backup of worker 4: checksum mismatch");
  reply = c.call(request(3, net::PutItemsReq{.worker = 4, .record = {}, .infos = {}}));
  ASSERT_TRUE(error_of(reply));
  EXPECT_EQ(error_of(reply)->kind, net::StoreErrorKind::kStoreFailure);
  reply = c.call(request(4, net::ItemRecordsReq{4}));
  ASSERT_TRUE(error_of(reply));
  EXPECT_EQ(error_of(reply)->kind, net::StoreErrorKind::kStoreFailure);
  EXPECT_TRUE(std::holds_alternative<net::StoreOkMsg>(c.call(request(5, net::DropReq{4})).result));
  const auto counters = r.server.counters();
  EXPECT_EQ(counters.store_errors, 4u);
  EXPECT_EQ(counters.duplicates, 1u);
  EXPECT_EQ(counters.requests, 6u);
}

TEST(BackupServer, AReplyOverTheLimitBecomesAnError) {
  BackupServerOptions options;
  options.max_message_bytes = 64 * 1024;
  Running r(std::make_unique<MemoryStore>(), options);
  RawClient c(r.server.bound_endpoint());
  for (std::uint64_t i = 1; i <= 3; ++i) {
    (void)c.call(request(i, net::PutStateReq{.worker = 1, .full = i == 1, .record = Bytes(30000, 1), .covered = {}}));
  }
  const auto reply = c.call(request(4, net::StateChainReq{1, {}}));
  ASSERT_TRUE(error_of(reply));
  EXPECT_EQ(error_of(reply)->kind, net::StoreErrorKind::kStoreFailure);
  EXPECT_NE(error_of(reply)->message.find("state_chain for worker 1"), std::string::npos) << error_of(reply)->message;
  EXPECT_NE(error_of(reply)->message.find("over the message limit of 65536"), std::string::npos)
      << error_of(reply)->message;
  (void)c.call(request(5, net::PutStateReq{.worker = 1, .full = true, .record = Bytes(10, 1), .covered = {}}));
  EXPECT_EQ(std::get<net::StoreRecordsMsg>(c.call(request(6, net::StateChainReq{1, {}})).result).records.size(), 1u);
}

TEST(BackupServer, StopsSoonAfterStopIsSet) {
  Running r(std::make_unique<MemoryStore>());
  const auto t0 = std::chrono::steady_clock::now();
  r.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace afs
