// LocalRecoveryStore (afstream/store/local_recovery_store.h) against a BackupServer on a thread of this process: a
// restarted worker (a new client on the same directory) restores from its own copy exactly when the server vouches
// for it, and gets the server's chain in every other case (no copy, a torn or corrupt copy, a record the server
// never took, a chain compacted or written by another client, a dropped worker). The store contract
// (store_contract_test.cc, backend LocalRecovery) checks the rest of the BackupStore semantics through it.
#include "afstream/store/local_recovery_store.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/remote_store.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

Bytes bytes(std::size_t n, std::uint8_t fill) { return Bytes(n, fill); }

class Served {
 public:
  // local_dir: the server reads puts from the copies there (BackupServerOptions::local_dir).
  explicit Served(const std::string& endpoint, const std::string& local_dir = "") {
    auto memory = std::make_unique<MemoryStore>();
    memory_ = memory.get();
    BackupServerOptions options;
    options.local_dir = local_dir;
    server_ = std::make_unique<BackupServer>(endpoint, std::move(memory), options);
    thread_ = std::thread([this] { server_->run(stop_); });
  }
  ~Served() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return server_->bound_endpoint(); }
  std::uint64_t held() const { return server_->counters().chains_held; }
  BackupServerCounters counters() const { return server_->counters(); }
  MemoryStore& store() { return *memory_; }

 private:
  MemoryStore* memory_ = nullptr;
  std::unique_ptr<BackupServer> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One incarnation of a worker process: its client of the server and its local copy.
struct Incarnation {
  Incarnation(const std::string& endpoint, const std::string& dir, bool offer_copies = false)
      : remote(endpoint), local(remote, dir, offer_copies) {}
  RemoteStore remote;
  LocalRecoveryStore local;
};

class LocalRecoveryStoreTest : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
  std::string dir_ = tmp_.str() + "/local";
  Served server_{"ipc://" + tmp_.str() + "/server"};

  // A full record and two deltas for worker 3, written by one incarnation.
  void write_chain() {
    Incarnation a(server_.endpoint(), dir_);
    a.local.put_state(3, true, bytes(4000, 1), {{0, 10}});
    a.local.put_state(3, false, bytes(300, 2), {{0, 20}});
    a.local.put_state(3, false, bytes(200, 3), {{0, 30}});
    EXPECT_EQ(a.local.counters().records_written, 3u);
  }
  std::vector<Bytes> chain() const { return {bytes(4000, 1), bytes(300, 2), bytes(200, 3)}; }
};

TEST_F(LocalRecoveryStoreTest, ARestartedWorkerRestoresFromItsCopyWhenTheServerVouchesForIt) {
  write_chain();
  Incarnation b(server_.endpoint(), dir_);
  ChainInfo info;
  EXPECT_EQ(b.local.state_chain(3, &info), chain());
  EXPECT_EQ(info.length, 3u);
  EXPECT_EQ(info.full_bytes, 4000u);
  EXPECT_EQ(info.delta_bytes, 500u);
  EXPECT_EQ(b.local.counters().restores_local, 1u);
  EXPECT_EQ(b.local.counters().restores_remote, 0u);
  EXPECT_EQ(server_.held(), 1u);
  // The copy goes on: a delta after the restore, and the next incarnation restores from it again.
  b.local.put_state(3, false, bytes(100, 4), {{0, 40}});
  Incarnation c(server_.endpoint(), dir_);
  auto expected = chain();
  expected.push_back(bytes(100, 4));
  EXPECT_EQ(c.local.state_chain(3), expected);
  EXPECT_EQ(server_.held(), 2u);
  EXPECT_EQ(c.remote.state_chain(3), expected);  // what the server holds
}

TEST_F(LocalRecoveryStoreTest, ARecordTheServerNeverTookIsLeftOut) {
  write_chain();
  const std::string path = dir_ + "/worker-3.chain";
  const auto size = std::filesystem::file_size(path);
  // What a process killed between its local write and the server's put leaves: a whole frame the server lacks.
  {
    const Bytes record = bytes(50, 9);
    const std::uint64_t digest = XXH3_64bits(record.data(), record.size());
    Bytes frame(24 + record.size(), 0);
    const std::uint64_t words[] = {0x524C4641, record.size(), digest};  // magic + flags 0, size, digest
    std::memcpy(frame.data(), &words[0], 4);
    std::memcpy(frame.data() + 8, &words[1], 8);
    std::memcpy(frame.data() + 16, &words[2], 8);
    std::memcpy(frame.data() + 24, record.data(), record.size());
    frame.resize(frame.size() + 24, 0);  // and the end marker after it
    std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(size - 24));  // over the end marker
    out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(frame.size()));
  }
  {
    Incarnation b(server_.endpoint(), dir_);
    EXPECT_EQ(b.local.state_chain(3), chain());
    EXPECT_EQ(b.local.counters().restores_local, 1u);
    EXPECT_EQ(b.local.counters().bad_frames, 0u);
    // The copy goes on after the chain, not after the frame the server lacks.
    b.local.put_state(3, false, bytes(70, 5), {});
  }
  auto expected = chain();
  expected.push_back(bytes(70, 5));
  Incarnation c(server_.endpoint(), dir_);
  EXPECT_EQ(c.local.state_chain(3), expected);
  EXPECT_EQ(c.local.counters().restores_local, 1u);
}

TEST_F(LocalRecoveryStoreTest, APutTheServerDidNotTakeIsTakenBackFromTheCopy) {
  write_chain();
  const std::string path = dir_ + "/worker-3.chain";
  const auto size = std::filesystem::file_size(path);
  RemoteStoreOptions quick;
  quick.attempt_timeout = quick.attempt_timeout_max = std::chrono::milliseconds(20);
  quick.backoff = quick.backoff_max = std::chrono::milliseconds(5);
  quick.deadline = std::chrono::milliseconds(60);
  {
    RemoteStore nobody("ipc://" + tmp_.str() + "/nobody", quick);
    LocalRecoveryStore s(nobody, dir_);
    EXPECT_THROW(s.put_state(3, false, bytes(50, 9), {}), RuntimeError);
    EXPECT_EQ(s.counters().records_written, 1u);
  }
  {
    Incarnation b(server_.endpoint(), dir_);
    EXPECT_EQ(b.local.state_chain(3), chain());  // from the copy, which ends where it did
    EXPECT_EQ(b.local.counters().restores_local, 1u);
  }
  EXPECT_EQ(std::filesystem::file_size(path), size + 24 + 50);  // the frame is there, after the end marker
  RemoteStore nobody("ipc://" + tmp_.str() + "/nobody", quick);
  LocalRecoveryStore s(nobody, dir_);
  EXPECT_THROW(s.put_state(3, true, bytes(60, 9), {}), RuntimeError);
  EXPECT_FALSE(std::filesystem::exists(path));  // a full one replaced the copy: nothing left to vouch for
}

TEST_F(LocalRecoveryStoreTest, ATornOrCorruptCopyIsReplacedByTheServersChain) {
  write_chain();
  const std::string path = dir_ + "/worker-3.chain";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 24 - 7);  // torn last frame, no end marker
  {
    Incarnation b(server_.endpoint(), dir_);
    EXPECT_EQ(b.local.state_chain(3), chain());
    EXPECT_EQ(b.local.counters().restores_remote, 1u);
    EXPECT_EQ(b.local.counters().bad_frames, 1u);
  }
  // The copy was rewritten from the server's records, which the server still vouches for.
  {
    Incarnation c(server_.endpoint(), dir_);
    EXPECT_EQ(c.local.state_chain(3), chain());
    EXPECT_EQ(c.local.counters().restores_local, 1u);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x77');  // inside the full record
  }
  Incarnation d(server_.endpoint(), dir_);
  EXPECT_EQ(d.local.state_chain(3), chain());
  EXPECT_EQ(d.local.counters().restores_remote, 1u);
  EXPECT_EQ(d.local.counters().bad_frames, 1u);
}

TEST_F(LocalRecoveryStoreTest, AChainTheServerChangedOtherwiseComesFromTheServer) {
  write_chain();
  // Compacted by the server's store: same state, other records.
  const ChainInfo before = server_.store().chain_info(3);
  ASSERT_TRUE(server_.store().compact_state(3, before.generation, 3, bytes(4100, 7)));
  {
    Incarnation b(server_.endpoint(), dir_);
    EXPECT_EQ(b.local.state_chain(3), (std::vector<Bytes>{bytes(4100, 7)}));
    EXPECT_EQ(b.local.counters().restores_remote, 1u);
  }
  // A delta put by a client without a copy (no digest): the server can no longer vouch for the chain.
  write_chain();
  RemoteStore plain(server_.endpoint());
  plain.put_state(3, false, bytes(10, 8), {});
  auto expected = chain();
  expected.push_back(bytes(10, 8));
  {
    Incarnation b(server_.endpoint(), dir_);
    EXPECT_EQ(b.local.state_chain(3), expected);
    EXPECT_EQ(b.local.counters().restores_remote, 1u);
  }
  EXPECT_EQ(server_.held(), 0u);
  // Dropped: nothing to restore, and the copy is gone.
  write_chain();
  Incarnation c(server_.endpoint(), dir_);
  c.local.drop(3);
  EXPECT_FALSE(std::filesystem::exists(c.local.path(3)));
  EXPECT_TRUE(c.local.state_chain(3).empty());
}

TEST_F(LocalRecoveryStoreTest, AServerThatNeverSawTheDigestsSendsTheRecords) {
  write_chain();
  // Another server (a restarted one with the same records but no digests): the records come from it.
  Served other("ipc://" + tmp_.str() + "/restarted");
  RemoteStore plain(other.endpoint());
  for (std::size_t i = 0; i < chain().size(); ++i) plain.put_state(3, i == 0, chain()[i], {});
  Incarnation b(other.endpoint(), dir_);
  EXPECT_EQ(b.local.state_chain(3), chain());
  EXPECT_EQ(b.local.counters().restores_remote, 1u);
  EXPECT_EQ(other.held(), 0u);
}

TEST_F(LocalRecoveryStoreTest, ADigestThatIsNotTheRecordsVouchesForNothing) {
  write_chain();
  // Another record put with the digest of the copy's full record: the server checks digests it is sent against the
  // records, so it does not vouch for the copy, whose record is not the one it holds.
  const Bytes other = bytes(4000, 9);
  RemoteStore plain(server_.endpoint());
  plain.put_state(3, true, other, {}, XXH3_64bits(chain()[0].data(), chain()[0].size()));
  Incarnation b(server_.endpoint(), dir_);
  EXPECT_EQ(b.local.state_chain(3), std::vector<Bytes>{other});
  EXPECT_EQ(b.local.counters().restores_remote, 1u);
}

// A replaced incarnation still running (fenced off by the server) writes into the same copy as its successor: the
// successor's restores still get exactly the server's chain.
TEST_F(LocalRecoveryStoreTest, AStrayIncarnationWritingTheSameCopyChangesNoRestore) {
  const auto incarnation = [&](std::uint32_t epoch) {
    RemoteStoreOptions o;
    o.incarnation = epoch;
    o.deadline = std::chrono::milliseconds(2000);
    return o;
  };
  RemoteStore stray_remote(server_.endpoint(), incarnation(1));
  LocalRecoveryStore stray(stray_remote, dir_);
  stray.put_state(3, true, bytes(4000, 1), {});
  stray.put_state(3, false, bytes(300, 2), {});
  // Its successor restores from the copy and goes on.
  RemoteStore next_remote(server_.endpoint(), incarnation(2));
  LocalRecoveryStore next(next_remote, dir_);
  EXPECT_EQ(next.state_chain(3), (std::vector<Bytes>{bytes(4000, 1), bytes(300, 2)}));
  next.put_state(3, false, bytes(200, 3), {});
  // The stray writes its frame where it thinks the copy ends (over the successor's last frame), is refused by the
  // server, and cuts the copy back there.
  EXPECT_THROW(stray.put_state(3, false, bytes(250, 9), {}), RuntimeError);
  const std::vector<Bytes> held{bytes(4000, 1), bytes(300, 2), bytes(200, 3)};
  EXPECT_EQ(server_.store().state_chain(3), held);
  {
    RemoteStore r(server_.endpoint(), incarnation(3));
    LocalRecoveryStore third(r, dir_);
    EXPECT_EQ(third.state_chain(3), held);  // from the server: the copy lost the successor's frame
    EXPECT_EQ(third.counters().restores_remote, 1u);
  }
  // The copy was rewritten from the server's records: the next restore comes from it again.
  RemoteStore r(server_.endpoint(), incarnation(4));
  LocalRecoveryStore fourth(r, dir_);
  EXPECT_EQ(fourth.state_chain(3), held);
  EXPECT_EQ(fourth.counters().restores_local, 1u);
}

TEST_F(LocalRecoveryStoreTest, ADirectoryThatCannotBeMadeIsAConfigError) {
  RemoteStore r(server_.endpoint());
  { std::ofstream(tmp_.str() + "/file") << "x"; }
  try {
    LocalRecoveryStore s(r, tmp_.str() + "/file");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp_.str() + "/file"), std::string::npos) << e.what();
  }
}

TEST(LocalRecoveryStore, AServerOnTheHostReadsThePutsFromTheCopies) {
  testing::TempDir tmp;
  const std::string dir = tmp.str() + "/local";
  Served server("ipc://" + tmp.str() + "/server", dir);
  const std::vector<Bytes> chain{bytes(5000, 1), bytes(300, 2), bytes(200, 3)};
  {
    Incarnation a(server.endpoint(), dir, true);
    for (std::size_t i = 0; i < chain.size(); ++i) a.local.put_state(3, i == 0, chain[i], {{0, 10 * (i + 1)}});
    EXPECT_EQ(a.local.counters().puts_in_copy, 3u);
    EXPECT_EQ(a.local.counters().copies_refused, 0u);
  }
  EXPECT_EQ(server.counters().puts_from_copies, 3u);
  EXPECT_EQ(server.store().state_chain(3), chain);  // the server holds the records themselves
  // A put naming a record the copy does not hold (another digest, another size, past its end) is refused and
  // changes nothing.
  RemoteStore plain(server.endpoint());
  EXPECT_FALSE(plain.put_state_in_copy(3, false, 0, 5000, 12345, {}));
  EXPECT_FALSE(plain.put_state_in_copy(3, false, 0, 4999, XXH3_64bits(chain[0].data(), 5000), {}));
  EXPECT_FALSE(plain.put_state_in_copy(3, false, 1 << 20, 5000, XXH3_64bits(chain[0].data(), 5000), {}));
  EXPECT_FALSE(plain.put_state_in_copy(4, true, 0, 5000, XXH3_64bits(chain[0].data(), 5000), {}));  // no copy
  EXPECT_EQ(server.counters().copies_refused, 4u);
  EXPECT_EQ(server.store().state_chain(3), chain);
  EXPECT_TRUE(server.store().state_chain(4).empty());
  // The frame at 0 is what it names: taken (a full record starting worker 3's chain again).
  EXPECT_TRUE(plain.put_state_in_copy(3, true, 0, 5000, XXH3_64bits(chain[0].data(), 5000), {}));
  EXPECT_EQ(server.store().state_chain(3), std::vector<Bytes>{chain[0]});
}

TEST(LocalRecoveryStore, AServerThatReadsNoCopiesGetsTheRecords) {
  testing::TempDir tmp;
  const std::string dir = tmp.str() + "/local";
  Served server("ipc://" + tmp.str() + "/server");  // no local directory
  Incarnation a(server.endpoint(), dir, true);
  for (int i = 0; i < 12; ++i) a.local.put_state(3, i == 0, bytes(100 + i, static_cast<std::uint8_t>(i)), {});
  // Refused up to kMaxRefusals times in a row, each record then sent; not offered again after that.
  EXPECT_EQ(a.local.counters().copies_refused, static_cast<std::uint64_t>(LocalRecoveryStore::kMaxRefusals));
  EXPECT_EQ(a.local.counters().puts_in_copy, 0u);
  EXPECT_EQ(server.counters().copies_refused, static_cast<std::uint64_t>(LocalRecoveryStore::kMaxRefusals));
  EXPECT_EQ(server.store().state_chain(3).size(), 12u);
  // The copy is kept all the same, and restores come from it.
  Incarnation b(server.endpoint(), dir);
  EXPECT_EQ(b.local.state_chain(3).size(), 12u);
  EXPECT_EQ(b.local.counters().restores_local, 1u);
}

}  // namespace
}  // namespace afs
