// The backup store contract (afstream/store/backup_store.h; DESIGN sections 4, 5 and 8), run unchanged on every
// backend: MemoryStore, RocksDbStore (with and without fsync), and RemoteStore talking to a BackupServer (on a
// thread of this process, serving a MemoryStore) over tcp:// and over ipc://. State chains (a full backup starts a new
// chain, deltas append in order), item records trimmed only once a state covers every channel they hold, storage
// accounting, corruption detection (a corrupt record raises FormatError and is never returned), drop, concurrency.
// Then what only the durable backend promises: close and reopen keeps everything (and trimming and counters carry
// on), bad directories give ConfigError, and a writer killed with SIGKILL loses no acknowledged backup and never
// leaves a half-written one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/store/local_recovery_store.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/remote_store.h"
#include "afstream/store/rocksdb_store.h"
#include "tests/temp_dir.h"

extern char** environ;

namespace afs {
// Named (not anonymous) so that ctest's test names show the backend: StoreContract.Test<afs::store_contract::X>.
namespace store_contract {

Bytes bytes(std::size_t n, std::uint8_t fill) { return Bytes(n, fill); }

using afs::testing::TempDir;

// --- backends -----------------------------------------------------------------------------------------------------

struct Memory {
  using Store = MemoryStore;
  std::unique_ptr<Store> make() { return std::make_unique<MemoryStore>(); }
};

// ValueFileMin: RocksDbStoreOptions::value_file_min_bytes (0: every record inside RocksDB; 1: every non-empty state
// record in a value file of its own).
template <bool Sync, std::size_t ValueFileMin>
struct RocksDbIn {
  using Store = RocksDbStore;
  TempDir dir;
  std::unique_ptr<Store> make() {
    return std::make_unique<RocksDbStore>(dir.str() + "/db", RocksDbStoreOptions{Sync, ValueFileMin});
  }
};
struct RocksDb : RocksDbIn<false, 0> {};
struct RocksDbSync : RocksDbIn<true, 0> {};
struct RocksDbValueFiles : RocksDbIn<false, 1> {};
struct RocksDbValueFilesSync : RocksDbIn<true, 1> {};

// A RemoteStore and the BackupServer it talks to (on a thread, serving a MemoryStore), as one BackupStore; its
// corrupt_latest_state corrupts the record inside the server's store. With local_dir, the client is wrapped in a
// LocalRecoveryStore keeping its copies there (afstream/store/local_recovery_store.h), from which the server reads
// the puts' records: state chains are then read from those copies as far as the server vouches for them, and
// corrupt_latest_state damages the copy's last record too (else the intact copy would be restored).
class ServedRemoteStore final : public BackupStore {
 public:
  explicit ServedRemoteStore(const std::string& listen, std::string local_dir = "") {
    auto memory = std::make_unique<MemoryStore>();
    memory_ = memory.get();
    BackupServerOptions options;
    options.local_dir = local_dir;  // puts name their records' place in the copies, which the server reads
    server_ = std::make_unique<BackupServer>(listen, std::move(memory), options);
    thread_ = std::thread([this] {
      try {
        server_->run(stop_);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "backup server: " << e.what();
      }
    });
    client_ = std::make_unique<RemoteStore>(server_->bound_endpoint());
    if (!local_dir.empty()) local_ = std::make_unique<LocalRecoveryStore>(*client_, local_dir, true);
  }
  ~ServedRemoteStore() override {
    local_.reset();
    client_.reset();
    stop_ = true;
    thread_.join();
    EXPECT_EQ(server_->bad_frames(), 0u);
  }

  ChainInfo put_state(int w, bool full, Bytes r, const SeqByChannel& c) override {
    return front().put_state(w, full, std::move(r), c);
  }
  std::vector<Bytes> state_chain(int w, ChainInfo* info = nullptr) const override {
    return front().state_chain(w, info);
  }
  // Compaction is the server's: through its store.
  bool compact_state(int w, std::uint64_t g, std::uint64_t n, Bytes full) override {
    return server_->store().compact_state(w, g, n, std::move(full));
  }
  void put_items(int w, Bytes r, std::vector<ItemRecordInfo> i) override {
    client_->put_items(w, std::move(r), std::move(i));
  }
  std::vector<Bytes> item_records(int w) const override { return client_->item_records(w); }
  void drop(int w) override { front().drop(w); }
  void confirm_checkpoint(int w, std::uint64_t id, int n, bool final = false) override {
    client_->confirm_checkpoint(w, id, n, final);
  }
  CheckpointStatus checkpoint_status() const override { return client_->checkpoint_status(); }
  CheckpointStatus rejoin_checkpoints(int w) override { return client_->rejoin_checkpoints(w); }
  StoreStats stats() const override { return client_->stats(); }
  void corrupt_latest_state(int worker) {
    memory_->corrupt_latest_state(worker);
    if (local_) {
      std::fstream f(local_->path(worker), std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-25, std::ios::end);  // the last record's last byte, before the end marker (24 bytes)
      const char c = static_cast<char>(f.get() ^ 0x5a);
      f.seekp(-25, std::ios::end);
      f.put(c);
    }
  }
  const LocalRecoveryStore* local() const { return local_.get(); }
  BackupServerCounters server_counters() const { return server_->counters(); }

 private:
  BackupStore& front() const { return local_ ? static_cast<BackupStore&>(*local_) : *client_; }

  MemoryStore* memory_ = nullptr;  // owned by the server
  std::unique_ptr<BackupServer> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::unique_ptr<RemoteStore> client_;
  std::unique_ptr<LocalRecoveryStore> local_;
};

struct Remote {
  using Store = ServedRemoteStore;
  std::unique_ptr<Store> make() { return std::make_unique<ServedRemoteStore>("tcp://127.0.0.1:0"); }
};

struct RemoteIpc {
  using Store = ServedRemoteStore;
  TempDir dir;
  std::unique_ptr<Store> make() { return std::make_unique<ServedRemoteStore>("ipc://" + dir.str() + "/server"); }
};

// The worker processes' client: a RemoteStore keeping its own copies (local recovery).
struct LocalRecovery {
  using Store = ServedRemoteStore;
  TempDir dir;
  std::unique_ptr<Store> make() {
    return std::make_unique<ServedRemoteStore>("ipc://" + dir.str() + "/server", dir.str() + "/local");
  }
};

}  // namespace store_contract

namespace {

using namespace store_contract;

template <class Backend>
class StoreContract : public ::testing::Test {
 protected:
  Backend backend_;
  std::unique_ptr<typename Backend::Store> store_ = backend_.make();
};

using Backends = ::testing::Types<Memory, RocksDb, RocksDbSync, RocksDbValueFiles, RocksDbValueFilesSync, Remote,
                                  RemoteIpc, LocalRecovery>;
TYPED_TEST_SUITE(StoreContract, Backends);

TYPED_TEST(StoreContract, EmptyWorkerHasNothing) {
  auto& s = *this->store_;
  EXPECT_TRUE(s.state_chain(3).empty());
  EXPECT_TRUE(s.item_records(3).empty());
  s.drop(3);  // dropping an unknown worker is harmless
  const StoreStats st = s.stats();
  EXPECT_EQ(st.state_backups, 0u);
  EXPECT_EQ(st.item_backups, 0u);
  EXPECT_EQ(st.bytes_written, 0u);
  EXPECT_EQ(st.bytes_stored, 0u);
}

TYPED_TEST(StoreContract, FullStartsAChainAndDeltasAppend) {
  auto& s = *this->store_;
  s.put_state(1, true, bytes(100, 1), {});
  s.put_state(1, false, bytes(10, 2), {});
  s.put_state(1, false, bytes(20, 3), {});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 1), bytes(10, 2), bytes(20, 3)}));
  EXPECT_EQ(s.stats().bytes_stored, 130u);
  s.put_state(1, true, bytes(50, 4), {});  // a new full backup replaces the whole chain
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(50, 4)}));
  s.put_state(1, false, bytes(5, 5), {});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(50, 4), bytes(5, 5)}));
  const StoreStats st = s.stats();
  EXPECT_EQ(st.state_backups, 5u);
  EXPECT_EQ(st.bytes_written, 185u);
  EXPECT_EQ(st.bytes_stored, 55u);
  s.put_state(2, true, bytes(7, 6), {});  // workers are independent
  EXPECT_EQ(s.state_chain(1).size(), 2u);
  EXPECT_EQ(s.state_chain(2), (std::vector<Bytes>{bytes(7, 6)}));
  EXPECT_EQ(s.stats().bytes_stored, 62u);
}

// Every put returns the chain's shape; compaction replaces a prefix of the chain whose generation it read, keeps
// the deltas put after it, and is refused once a full backup (or another compaction) changed the chain.
TYPED_TEST(StoreContract, PutsDescribeTheChainAndCompactionReplacesItsPrefix) {
  auto& s = *this->store_;
  const ChainInfo first = s.put_state(1, true, bytes(100, 1), {});
  EXPECT_EQ(first.length, 1u);
  EXPECT_EQ(first.full_bytes, 100u);
  EXPECT_EQ(first.delta_bytes, 0u);
  EXPECT_EQ(s.put_state(1, false, bytes(10, 2), {}).generation, first.generation);  // a delta appends
  const ChainInfo three = s.put_state(1, false, bytes(20, 3), {});
  EXPECT_EQ(three.generation, first.generation);
  EXPECT_EQ(three.length, 3u);
  EXPECT_EQ(three.delta_bytes, 30u);
  ChainInfo read;
  EXPECT_EQ(s.state_chain(1, &read).size(), 3u);
  EXPECT_EQ(read.length, 3u);
  EXPECT_EQ(read.full_bytes, 100u);
  EXPECT_EQ(read.delta_bytes, 30u);

  EXPECT_FALSE(s.compact_state(1, three.generation, 4, bytes(90, 9)));  // longer than the chain
  EXPECT_FALSE(s.compact_state(2, three.generation, 1, bytes(90, 9)));  // no chain
  ASSERT_TRUE(s.compact_state(1, three.generation, 2, bytes(90, 9)));   // the full and the first delta
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(90, 9), bytes(20, 3)}));
  EXPECT_EQ(s.stats().bytes_stored, 110u);
  EXPECT_EQ(s.stats().state_backups, 3u);                              // a compaction is not a backup
  EXPECT_FALSE(s.compact_state(1, three.generation, 2, bytes(1, 1)));  // the chain changed since
  EXPECT_EQ(s.state_chain(1).size(), 2u);

  const ChainInfo after = s.put_state(1, false, bytes(5, 4), {});
  EXPECT_NE(after.generation, three.generation);
  EXPECT_EQ(after.length, 3u);
  EXPECT_EQ(after.full_bytes, 90u);
  EXPECT_EQ(after.delta_bytes, 25u);
  const ChainInfo restarted = s.put_state(1, true, bytes(7, 5), {});
  EXPECT_NE(restarted.generation, after.generation);
  EXPECT_FALSE(s.compact_state(1, after.generation, 1, bytes(1, 1)));  // a full backup came since
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(7, 5)}));
  EXPECT_EQ(s.stats().bytes_stored, 7u);
}

// More records than one byte can count: the order must not depend on how the store numbers them.
// state_chain_shared gives the records state_chain gives, with the same chain description; a record already handed
// out does not change when the chain does (a restore may still be reading it).
TYPED_TEST(StoreContract, TheSharedChainIsTheChain) {
  auto& s = *this->store_;
  const auto as_bytes = [](const std::vector<std::shared_ptr<const Bytes>>& v) {
    std::vector<Bytes> out;
    for (const auto& p : v) out.push_back(*p);
    return out;
  };
  EXPECT_TRUE(s.state_chain_shared(1).empty());
  s.put_state(1, true, bytes(100, 1), {});
  s.put_state(1, false, bytes(10, 2), {});
  ChainInfo copied, shared;
  const auto chain = s.state_chain_shared(1, &shared);
  EXPECT_EQ(as_bytes(chain), s.state_chain(1, &copied));
  EXPECT_EQ(shared.length, copied.length);
  EXPECT_EQ(shared.full_bytes, copied.full_bytes);
  EXPECT_EQ(shared.delta_bytes, copied.delta_bytes);
  s.put_state(1, true, bytes(50, 4), {});
  s.drop(1);
  EXPECT_EQ(as_bytes(chain), (std::vector<Bytes>{bytes(100, 1), bytes(10, 2)}));
  EXPECT_TRUE(s.state_chain_shared(1).empty());
}

TYPED_TEST(StoreContract, DeltasAndItemsStayInPutOrder) {
  auto& s = *this->store_;
  auto numbered = [](std::uint32_t i) { return Bytes{std::uint8_t(i), std::uint8_t(i >> 8), 0x77}; };
  std::vector<Bytes> chain, items;
  s.put_state(5, true, numbered(0), {});
  chain.push_back(numbered(0));
  for (std::uint32_t i = 1; i <= 600; ++i) {
    s.put_state(5, false, numbered(i), {});
    chain.push_back(numbered(i));
    s.put_items(5, numbered(i), {{0, i, i}});
    items.push_back(numbered(i));
  }
  EXPECT_EQ(s.state_chain(5), chain);
  EXPECT_EQ(s.item_records(5), items);
}

TYPED_TEST(StoreContract, EmptyRecordsRoundTrip) {
  auto& s = *this->store_;
  s.put_state(1, true, {}, {});
  s.put_state(1, false, bytes(3, 1), {});
  s.put_items(1, {}, {{0, 1, 2}});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{Bytes{}, bytes(3, 1)}));
  EXPECT_EQ(s.item_records(1), (std::vector<Bytes>{Bytes{}}));
  EXPECT_EQ(s.stats().bytes_stored, 3u);
}

TYPED_TEST(StoreContract, ItemRecordsAreTrimmedOnlyWhenEveryChannelIsCovered) {
  auto& s = *this->store_;
  // Record A: channel 1 seq 1..10 and channel 2 seq 5..8. Record B: channel 1 seq 11..20. Record C: channel 3.
  s.put_items(4, bytes(40, 0xA), {{1, 1, 10}, {2, 5, 8}});
  s.put_items(4, bytes(30, 0xB), {{1, 11, 20}});
  s.put_items(4, bytes(20, 0xC), {{3, 1, 1}});
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(40, 0xA), bytes(30, 0xB), bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().item_backups, 3u);
  EXPECT_EQ(s.stats().bytes_stored, 90u);

  s.put_state(4, true, bytes(8, 1), {{1, 15}});  // channel 2 of A is not covered at all: nothing is trimmed
  EXPECT_EQ(s.item_records(4).size(), 3u);
  s.put_state(4, false, bytes(8, 2), {{1, 15}, {2, 7}});  // channel 2 covered up to 7 < 8: still not
  EXPECT_EQ(s.item_records(4).size(), 3u);
  EXPECT_EQ(s.stats().bytes_stored, 90u + 16);
  s.put_state(4, false, bytes(8, 3), {{1, 15}, {2, 8}});  // A wholly covered; B only up to 15 < 20
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(30, 0xB), bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().bytes_stored, 50u + 24);
  s.put_state(4, true, bytes(8, 4), {{1, 20}, {2, 8}});  // B covered exactly; C's channel 3 is not mentioned
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().bytes_stored, 20u + 8);   // the full backup also dropped the old chain
  s.put_items(5, bytes(10, 0xD), {{1, 1, 1}});  // other workers' records are untouched by this worker's states
  s.put_state(4, false, bytes(1, 5), {{1, 100}, {3, 100}});
  EXPECT_TRUE(s.item_records(4).empty());
  EXPECT_EQ(s.item_records(5), (std::vector<Bytes>{bytes(10, 0xD)}));
  const StoreStats st = s.stats();
  EXPECT_EQ(st.bytes_stored, 8u + 1 + 10);
  EXPECT_EQ(st.bytes_written, 40u + 30 + 20 + 8 * 4 + 10 + 1);
  EXPECT_EQ(st.state_backups, 5u);
  EXPECT_EQ(st.item_backups, 4u);
}

TYPED_TEST(StoreContract, CorruptStateIsReportedNamingTheWorkerAndNeverReturned) {
  auto& s = *this->store_;
  s.put_state(6, true, bytes(64, 1), {});
  s.put_state(6, false, bytes(16, 2), {});
  s.put_items(6, bytes(8, 3), {{0, 1, 2}});
  s.put_state(7, true, bytes(64, 1), {});
  s.corrupt_latest_state(6);
  try {
    const auto chain = s.state_chain(6);
    ADD_FAILURE() << "a corrupt state backup was returned (" << chain.size() << " records)";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("worker 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
  EXPECT_THROW(s.state_chain(6), FormatError);         // still corrupt when asked again
  EXPECT_THROW(s.state_chain_shared(6), FormatError);  // shared or copied
  EXPECT_EQ(s.state_chain(7).size(), 1u);              // other workers are fine
  EXPECT_EQ(s.item_records(6).size(), 1u);             // and so are this worker's item records
  s.put_state(6, true, bytes(32, 9), {});              // a new full backup replaces the corrupt chain
  EXPECT_EQ(s.state_chain(6), (std::vector<Bytes>{bytes(32, 9)}));
}

TYPED_TEST(StoreContract, DropForgetsAWorker) {
  auto& s = *this->store_;
  s.put_state(1, true, bytes(100, 1), {});
  s.put_items(1, bytes(50, 2), {{0, 1, 5}});
  s.put_state(2, true, bytes(30, 3), {});
  s.put_items(2, bytes(20, 4), {{0, 1, 5}});
  s.drop(1);
  EXPECT_TRUE(s.state_chain(1).empty());
  EXPECT_TRUE(s.item_records(1).empty());
  EXPECT_EQ(s.state_chain(2).size(), 1u);
  EXPECT_EQ(s.item_records(2).size(), 1u);
  EXPECT_EQ(s.stats().bytes_stored, 50u);
  EXPECT_EQ(s.stats().bytes_written, 200u);  // what was written stays counted
  s.drop(1);                                 // dropping twice, or an unknown worker, is harmless
  s.drop(99);
  EXPECT_EQ(s.stats().bytes_stored, 50u);
  s.put_state(1, false, bytes(4, 5), {});  // a worker can start again after drop
  s.put_items(1, bytes(2, 6), {{0, 1, 1}});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(4, 5)}));
  EXPECT_EQ(s.item_records(1), (std::vector<Bytes>{bytes(2, 6)}));
}

// Checkpoint mode's ledger (checkpoint_ledger.h), the same through every backend: a checkpoint is complete once
// every worker of the job confirmed it; a restarted worker opens a new round (the others join it) and reads the
// checkpoint to roll back to, which confirmations of the old round can no longer move.
TYPED_TEST(StoreContract, CheckpointsCompleteWhenEveryWorkerConfirmedAndRoundsFenceOffOldIncarnations) {
  auto& s = *this->store_;
  EXPECT_EQ(s.checkpoint_status(), (CheckpointStatus{0, 0}));
  s.confirm_checkpoint(0, checkpoint_id(0, 1), 3);
  s.confirm_checkpoint(1, checkpoint_id(0, 1), 3);
  EXPECT_EQ(s.checkpoint_status().complete, 0u);  // worker 2 has not confirmed it
  s.confirm_checkpoint(2, checkpoint_id(0, 2), 3);
  EXPECT_EQ(s.checkpoint_status().complete, checkpoint_id(0, 1));  // the lowest mark
  s.confirm_checkpoint(0, checkpoint_id(0, 2), 3);
  s.confirm_checkpoint(1, checkpoint_id(0, 2), 3);
  EXPECT_EQ(s.checkpoint_status(), (CheckpointStatus{checkpoint_id(0, 2), 0}));
  // Worker 1 fails and restarts: a new round; the others join it when they restart.
  EXPECT_EQ(s.rejoin_checkpoints(1), (CheckpointStatus{checkpoint_id(0, 2), 1}));
  s.confirm_checkpoint(0, checkpoint_id(0, 3), 3);  // an old incarnation still running: ignored
  s.confirm_checkpoint(2, checkpoint_id(0, 3), 3);
  EXPECT_EQ(s.rejoin_checkpoints(0), (CheckpointStatus{checkpoint_id(0, 2), 1}));
  EXPECT_EQ(s.rejoin_checkpoints(2), (CheckpointStatus{checkpoint_id(0, 2), 1}));
  s.confirm_checkpoint(0, checkpoint_id(1, 1), 3);
  s.confirm_checkpoint(1, checkpoint_id(1, 1), 3);
  EXPECT_EQ(s.checkpoint_status().complete, checkpoint_id(0, 2));
  s.confirm_checkpoint(2, checkpoint_id(1, 1), 3);
  EXPECT_EQ(s.checkpoint_status(), (CheckpointStatus{checkpoint_id(1, 1), 1}));
  // A worker restarted twice in one round opens another one.
  EXPECT_EQ(s.rejoin_checkpoints(2).round, 2u);
  EXPECT_EQ(s.rejoin_checkpoints(2).round, 3u);
}

TYPED_TEST(StoreContract, WorkersAreIndependentWhateverTheirIds) {
  auto& s = *this->store_;
  const std::vector<int> workers = {INT_MIN, -256, -1, 0, 1, 255, 256, 65536, INT_MAX};
  for (const int w : workers) {
    const auto tag = static_cast<std::uint8_t>(w & 0x7f);
    s.put_state(w, true, bytes(3, tag), {});
    s.put_state(w, false, bytes(2, tag), {});
    s.put_items(w, bytes(1, tag), {{0, 1, 1}});
  }
  s.drop(0);
  s.put_state(-1, true, bytes(5, 0x55), {{0, 1}});  // resets -1's chain and trims its items, nobody else's
  for (const int w : workers) {
    const auto tag = static_cast<std::uint8_t>(w & 0x7f);
    if (w == 0) {
      EXPECT_TRUE(s.state_chain(w).empty());
      EXPECT_TRUE(s.item_records(w).empty());
    } else if (w == -1) {
      EXPECT_EQ(s.state_chain(w), (std::vector<Bytes>{bytes(5, 0x55)}));
      EXPECT_TRUE(s.item_records(w).empty());
    } else {
      EXPECT_EQ(s.state_chain(w), (std::vector<Bytes>{bytes(3, tag), bytes(2, tag)})) << w;
      EXPECT_EQ(s.item_records(w), (std::vector<Bytes>{bytes(1, tag)})) << w;
    }
  }
  EXPECT_EQ(s.stats().bytes_stored, 7u * 6 + 5);
}

TYPED_TEST(StoreContract, ConcurrentWritersKeepConsistentStats) {
  auto& s = *this->store_;
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&s, w] {
      for (std::uint64_t i = 1; i <= 200; ++i) {
        s.put_items(w, bytes(10, 1), {{0, i, i}});
        s.put_state(w, i % 50 == 1, bytes(5, 2), {{0, i}});
      }
    });
  }
  for (auto& t : threads) t.join();
  const StoreStats st = s.stats();
  EXPECT_EQ(st.state_backups, 800u);
  EXPECT_EQ(st.item_backups, 800u);
  EXPECT_EQ(st.bytes_written, 800u * 15);
  for (int w = 0; w < 4; ++w) {
    EXPECT_TRUE(s.item_records(w).empty()) << w;   // every record was covered by the state after it
    EXPECT_EQ(s.state_chain(w).size(), 50u) << w;  // the last full backup (i = 151) and 49 deltas
  }
  EXPECT_EQ(st.bytes_stored, 4u * 50 * 5);
}

// A reader racing a writer sees whole chains only: a full record first, then consecutive deltas.
TYPED_TEST(StoreContract, ReadersSeeOnlyWholeChains) {
  auto& s = *this->store_;
  s.put_state(0, true, {'F', 0}, {});
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint8_t i = 1; i < 200; ++i) s.put_state(0, i % 7 == 0, {std::uint8_t(i % 7 == 0 ? 'F' : 'D'), i}, {});
    done = true;
  });
  int reads = 0;
  std::string bad;  // the first torn chain seen (asserting here would leave the writer running)
  while ((!done || reads == 0) && bad.empty()) {
    const auto chain = s.state_chain(0);
    ++reads;
    if (chain.empty() || chain.front().at(0) != 'F') bad = "a chain without a full backup first";
    for (std::size_t j = 1; j < chain.size() && bad.empty(); ++j) {
      if (chain[j].at(0) != 'D' || chain[j].at(1) != std::uint8_t(chain[0].at(1) + j)) bad = "a torn chain";
    }
  }
  writer.join();
  EXPECT_TRUE(bad.empty()) << bad << " after " << reads << " reads";
  EXPECT_EQ(s.state_chain(0).size(), 199u % 7 + 1);
}

// --- RocksDbStore only ---------------------------------------------------------------------------------------------

// Runs body(options, path) twice, each time on a new store directory: with every state record inside RocksDB, and
// with those of at least value_file_min bytes in value files.
void with_and_without_value_files(std::size_t value_file_min,
                                  const std::function<void(const RocksDbStoreOptions&, const std::string&)>& body) {
  for (const std::size_t min : {std::size_t{0}, value_file_min}) {
    SCOPED_TRACE("value_file_min_bytes " + std::to_string(min));
    TempDir dir;
    body(RocksDbStoreOptions{false, min}, dir.str() + "/db");
  }
}

// With the state records inside RocksDB, and with those of 50 bytes or more in value files.
TEST(RocksDbStore, ReopenKeepsChainsItemsAndBytesStoredAndCarriesOn) {
  with_and_without_value_files(50, [](const RocksDbStoreOptions& o, const std::string& path) {
    {
      RocksDbStore s(path, o);
      s.put_state(1, true, bytes(100, 1), {});
      s.put_state(1, true, bytes(60, 2), {});  // the first chain is gone
      s.put_state(1, false, bytes(10, 3), {{1, 4}});
      s.put_items(1, bytes(40, 0xA), {{1, 1, 10}, {2, 5, 8}});
      s.put_items(1, bytes(30, 0xB), {{1, 11, 20}});
      s.put_state(2, true, bytes(7, 4), {});
      s.put_items(2, bytes(5, 0xC), {{0, 1, 1}});
      s.put_items(3, bytes(9, 0xD), {{0, 1, 1}});
      s.drop(3);
      EXPECT_EQ(s.stats().bytes_stored, 60u + 10 + 40 + 30 + 7 + 5);
    }
    {
      RocksDbStore s(path, o);
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(60, 2), bytes(10, 3)}));
      EXPECT_EQ(s.item_records(1), (std::vector<Bytes>{bytes(40, 0xA), bytes(30, 0xB)}));
      EXPECT_EQ(s.state_chain(2), (std::vector<Bytes>{bytes(7, 4)}));
      EXPECT_EQ(s.item_records(2), (std::vector<Bytes>{bytes(5, 0xC)}));
      EXPECT_TRUE(s.state_chain(3).empty());
      EXPECT_TRUE(s.item_records(3).empty());
      StoreStats st = s.stats();
      EXPECT_EQ(st.bytes_stored, 60u + 10 + 40 + 30 + 7 + 5);
      EXPECT_EQ(st.state_backups, 0u);  // writes of this process only
      EXPECT_EQ(st.item_backups, 0u);
      EXPECT_EQ(st.bytes_written, 0u);

      // New records follow the old ones; trimming uses the item infos stored before the reopen.
      s.put_state(1, false, bytes(11, 5), {{1, 15}, {2, 8}});  // covers A only
      s.put_items(1, bytes(20, 0xE), {{1, 21, 30}});
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(60, 2), bytes(10, 3), bytes(11, 5)}));
      EXPECT_EQ(s.item_records(1), (std::vector<Bytes>{bytes(30, 0xB), bytes(20, 0xE)}));
      st = s.stats();
      EXPECT_EQ(st.bytes_stored, 60u + 10 + 11 + 30 + 20 + 7 + 5);
      EXPECT_EQ(st.state_backups, 1u);
      EXPECT_EQ(st.item_backups, 1u);
      EXPECT_EQ(st.bytes_written, 31u);
    }
    {
      // A compaction is as durable as a put; the chain after it carries on after a reopen.
      RocksDbStore s(path, o);
      ChainInfo info;
      ASSERT_EQ(s.state_chain(1, &info).size(), 3u);
      ASSERT_TRUE(s.compact_state(1, info.generation, 2, bytes(65, 6)));
    }
    {
      RocksDbStore s(path, o);
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(65, 6), bytes(11, 5)}));
      EXPECT_EQ(s.stats().bytes_stored, 65u + 11 + 30 + 20 + 7 + 5);
      s.put_state(1, false, bytes(3, 7), {});
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(65, 6), bytes(11, 5), bytes(3, 7)}));
    }
    {
      RocksDbStore s(path, o);
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(65, 6), bytes(11, 5), bytes(3, 7)}));
      EXPECT_EQ(s.item_records(1), (std::vector<Bytes>{bytes(30, 0xB), bytes(20, 0xE)}));
      s.put_state(1, true, bytes(1, 6), {{1, 30}});  // a full backup after reopens drops the whole old chain
      EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(1, 6)}));
      EXPECT_TRUE(s.item_records(1).empty());
      s.drop(2);
      EXPECT_EQ(s.stats().bytes_stored, 1u);
    }
    RocksDbStore s(path, o);
    EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(1, 6)}));
    EXPECT_TRUE(s.item_records(1).empty());
    EXPECT_TRUE(s.state_chain(2).empty());
    EXPECT_EQ(s.stats().bytes_stored, 1u);
  });
}

TEST(RocksDbStore, ReopenKeepsTheCheckpointLedger) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path);
    s.put_state(0, true, bytes(10, 1), {});
    s.confirm_checkpoint(0, checkpoint_id(0, 4), 2);
    s.confirm_checkpoint(1, checkpoint_id(0, 3), 2);
    EXPECT_EQ(s.rejoin_checkpoints(1), (CheckpointStatus{checkpoint_id(0, 3), 1}));
  }
  RocksDbStore s(path);
  EXPECT_EQ(s.checkpoint_status(), (CheckpointStatus{checkpoint_id(0, 3), 1}));
  EXPECT_EQ(s.state_chain(0).size(), 1u);
  EXPECT_EQ(s.rejoin_checkpoints(0), (CheckpointStatus{checkpoint_id(0, 3), 1}));  // joins round 1
}

TEST(RocksDbStore, CreatesMissingParentDirectories) {
  TempDir dir;
  const std::string path = dir.str() + "/a/b/c";
  RocksDbStore s(path);
  EXPECT_TRUE(std::filesystem::is_directory(path));
  EXPECT_EQ(s.path(), path);
  s.put_state(0, true, bytes(1, 1), {});
  EXPECT_EQ(s.state_chain(0).size(), 1u);
}

void expect_config_error_naming(const std::string& path, const std::string& also = "") {
  try {
    RocksDbStore s(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    if (!also.empty()) {
      EXPECT_NE(msg.find(also), std::string::npos) << msg;
    }
  }
}

TEST(RocksDbStore, UnopenableDirectoryGivesConfigErrorNamingThePath) {
  TempDir dir;
  const std::string file = dir.str() + "/plain-file";
  std::ofstream(file) << "not a directory\n";
  expect_config_error_naming(file);               // a regular file used as the directory
  expect_config_error_naming(file + "/db");       // a path under a regular file
  expect_config_error_naming("/proc/afs-no/db");  // a place nothing can be created in
}

TEST(RocksDbStore, SecondOpenOfAnOpenStoreGivesConfigError) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  RocksDbStore first(path);
  expect_config_error_naming(path, "lock");  // RocksDB's LOCK file keeps a store to one writer
  first.put_state(0, true, bytes(1, 1), {});
  EXPECT_EQ(first.state_chain(0).size(), 1u);
}

// The contents of every file under `path`, by name: what a refused open must leave as it was.
std::map<std::string, std::string> directory_contents(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    out[e.path().lexically_relative(path).string()] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  return out;
}

// A refused second open (the store is open elsewhere: an `afstream backup-server` started twice on one
// --store.path) leaves the directory as it was: it truncated the open store's LOG and wrote its own over it, before
// RocksDB's lock refused it.
TEST(RocksDbStore, RefusedSecondOpenLeavesTheOpenStoresLogAlone) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  RocksDbStore first(path);
  first.put_state(0, true, bytes(1, 1), {});
  std::ifstream before_file(path + "/LOG", std::ios::binary);
  const std::string before(std::istreambuf_iterator<char>(before_file), {});
  ASSERT_FALSE(before.empty());  // RocksDB flushes its info log at the end of an open
  expect_config_error_naming(path, "lock");
  std::ifstream after_file(path + "/LOG", std::ios::binary);
  const std::string after(std::istreambuf_iterator<char>(after_file), {});
  EXPECT_EQ(after.substr(0, before.size()), before) << "the open store's LOG was written over";
}

TEST(RocksDbStore, ForeignRocksDbGivesConfigError) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "hello", "world").ok());
  }
  const auto before = directory_contents(path);
  expect_config_error_naming(path, "not an afstream backup store");
  // Left as it was: the writable open replayed the other database's write-ahead log into a new table, wrote a new
  // MANIFEST and OPTIONS file and its own LOG over the other one's, before it found no format marker.
  const auto after = directory_contents(path);
  EXPECT_EQ(after.size(), before.size());
  for (const auto& [name, bytes] : before) {
    auto it = after.find(name);
    EXPECT_TRUE(it != after.end() && it->second == bytes) << name << " changed or went";
  }
  for (const auto& [name, bytes] : after) EXPECT_TRUE(before.contains(name)) << name << " was added";
}

// A directory of other files is not made a store: RocksDB added its files among them, rotated a file named LOG
// away, and the value-file sweep removed the user's state-values/7. An empty directory is fine, and so is one that
// holds only what a failed first open left (LOCK, LOG).
TEST(RocksDbStore, DirectoryOfOtherFilesGivesConfigErrorAndIsLeftAlone) {
  TempDir dir;
  const std::string path = dir.str() + "/notes";
  std::filesystem::create_directories(path + "/state-values");
  std::ofstream(path + "/LOG") << "my notes\n";
  std::ofstream(path + "/state-values/7") << "x";
  std::ofstream(path + "/notes.txt") << "x";
  expect_config_error_naming(path, "holds 'notes.txt', not a file of an afstream backup store");
  EXPECT_TRUE(std::filesystem::exists(path + "/state-values/7"));
  EXPECT_FALSE(std::filesystem::exists(path + "/CURRENT"));
  std::ifstream log(path + "/LOG");
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(line, "my notes");
  const std::string empty = dir.str() + "/empty";
  std::filesystem::create_directories(empty);
  RocksDbStore store(empty);
  store.put_state(0, true, bytes(1, 1), {});
  EXPECT_EQ(store.state_chain(0).size(), 1u);
  const std::string failed = dir.str() + "/failed-open";
  std::filesystem::create_directories(failed);
  std::ofstream(failed + "/LOCK");
  std::ofstream(failed + "/LOG");
  RocksDbStore reopened(failed);
  EXPECT_TRUE(reopened.state_chain(0).empty());
}

// A write-ahead log corrupted in its middle (not a torn last record) refuses the open, naming the directory: with
// point-in-time recovery RocksDB stopped its replay there and every later put, acknowledged backups, was gone
// without a word.
TEST(RocksDbStore, WriteAheadLogCorruptedInItsMiddleRefusesTheOpen) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path);
    for (int i = 0; i < 200; ++i) s.put_state(i % 4, i < 4, bytes(512, static_cast<std::uint8_t>(i)), {});
  }
  std::string log;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    if (e.path().extension() == ".log" && std::filesystem::file_size(e.path()) > 50000) log = e.path().string();
  }
  ASSERT_FALSE(log.empty()) << "no write-ahead log with the puts";
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(log) / 2));
    const char junk[64] = {'\x5a', '\x5a', '\x5a', '\x5a'};
    f.write(junk, sizeof junk);
  }
  expect_config_error_naming(path, "orruption");
}

TEST(RocksDbStore, CorruptStateStaysReportedAfterReopen) {
  with_and_without_value_files(10, [](const RocksDbStoreOptions& o, const std::string& path) {
    {
      RocksDbStore s(path, o);
      s.put_state(6, true, bytes(64, 1), {});
      s.put_state(6, false, bytes(16, 2), {});
      s.corrupt_latest_state(6);
    }
    RocksDbStore s(path, o);
    EXPECT_THROW(s.state_chain(6), FormatError);
    s.put_state(6, true, bytes(32, 9), {});
    EXPECT_EQ(s.state_chain(6), (std::vector<Bytes>{bytes(32, 9)}));
  });
}

// An item record damaged on disk: reported (never returned), and never trimmed, since its infos cannot be trusted
// either; drop removes it.
TEST(RocksDbStore, CorruptItemRecordOnDiskIsReportedAndNeverTrimmed) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path);
    s.put_state(2, true, bytes(10, 1), {});
    s.put_items(2, bytes(50, 0xA), {{0, 1, 5}});
    s.put_items(3, bytes(50, 0xB), {{0, 1, 5}});
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    std::string key, value;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string k = it->key().ToString();
      // Worker 2 (sign bit flipped, big-endian) and kind 2 (items).
      if (k.size() == 13 && k.substr(0, 5) == std::string("\x80\x00\x00\x02\x02", 5)) {
        key = k;
        value = it->value().ToString();
      }
    }
    ASSERT_FALSE(key.empty());
    value[value.size() - 3] ^= 0x01;
    it.reset();
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  RocksDbStore s(path);
  EXPECT_EQ(s.stats().bytes_stored, 10u + 50 + 50);
  try {
    const auto records = s.item_records(2);
    ADD_FAILURE() << "a corrupt item record was returned (" << records.size() << " records)";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("worker 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("item backup"), std::string::npos) << msg;
  }
  EXPECT_EQ(s.state_chain(2), (std::vector<Bytes>{bytes(10, 1)}));
  EXPECT_EQ(s.item_records(3), (std::vector<Bytes>{bytes(50, 0xB)}));
  s.put_state(2, false, bytes(1, 2), {{0, 1000}});  // would cover it, but its infos cannot be trusted
  EXPECT_THROW(s.item_records(2), FormatError);
  s.drop(2);
  EXPECT_TRUE(s.item_records(2).empty());
  EXPECT_EQ(s.stats().bytes_stored, 50u);
}

// --- RocksDbStore's value files -------------------------------------------------------------------------------------

std::string values_dir(const std::string& path) { return path + "/state-values"; }

std::size_t value_files(const std::string& path) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(values_dir(path))) n += e.is_regular_file() ? 1 : 0;
  return n;
}

// The store's marker key (format), as rocksdb_store.cc writes it.
const std::string kFormatKey = std::string(5, '\0') + "afstream-backup-store";

// A state record of at least value_file_min_bytes lives in a value file: a chain's records are appended to one file,
// a full record or a compaction starts a new one, and a file goes once no record names it (and no delta will follow).
// With sync, at once (the batch that released it is on disk).
TEST(RocksDbStoreValueFiles, LargeRecordsLiveInOneFileAChainAndGoWithIt) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  RocksDbStore s(path, {true, 64});
  s.put_state(1, true, bytes(100, 1), {});  // a new file
  s.put_state(1, false, bytes(10, 2), {});  // inside RocksDB
  s.put_state(1, false, bytes(64, 3), {});  // appended to the chain's file
  EXPECT_EQ(value_files(path), 1u);
  EXPECT_EQ(std::filesystem::file_size(values_dir(path) + "/1"), 164u);
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 1), bytes(10, 2), bytes(64, 3)}));
  s.put_state(2, true, bytes(200, 4), {});  // each worker its own
  EXPECT_EQ(value_files(path), 2u);
  s.put_state(1, true, bytes(70, 5), {});  // a new chain, a new file; the old chain's goes
  EXPECT_EQ(value_files(path), 2u);
  EXPECT_FALSE(std::filesystem::exists(values_dir(path) + "/1"));
  s.put_state(1, false, bytes(80, 6), {});
  s.put_state(1, false, bytes(90, 7), {});
  EXPECT_EQ(value_files(path), 2u);
  ChainInfo info;
  ASSERT_EQ(s.state_chain(1, &info).size(), 3u);
  EXPECT_EQ(info.full_bytes, 70u);
  EXPECT_EQ(info.delta_bytes, 170u);
  // A compaction of the first two: its record starts a new file, the third record keeps the old one alive.
  ASSERT_TRUE(s.compact_state(1, info.generation, 2, bytes(120, 8)));
  EXPECT_EQ(value_files(path), 3u);
  s.put_state(1, false, bytes(64, 9), {});  // follows the compacted record
  EXPECT_EQ(value_files(path), 3u);
  EXPECT_EQ(s.state_chain(1, &info), (std::vector<Bytes>{bytes(120, 8), bytes(90, 7), bytes(64, 9)}));
  ASSERT_TRUE(s.compact_state(1, info.generation, 2, bytes(20, 10)));  // into RocksDB; the old file has no record left
  EXPECT_EQ(value_files(path), 2u);
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(20, 10), bytes(64, 9)}));
  s.put_state(1, true, bytes(30, 11), {});  // a full record inside RocksDB: the chain's file goes
  EXPECT_EQ(value_files(path), 1u);
  s.put_state(1, false, bytes(100, 12), {});  // a new file for the chain's first large record
  EXPECT_EQ(value_files(path), 2u);
  s.drop(2);
  s.drop(1);
  EXPECT_EQ(value_files(path), 0u);
  EXPECT_TRUE(s.state_chain(1).empty());
  EXPECT_EQ(s.stats().bytes_stored, 0u);
}

// A file no record names (left by a crash between writing it and its batch, or between a batch and removing the files
// it released) is removed on open; a file not named by a number is not the store's and stays; numbers are not reused.
TEST(RocksDbStoreValueFiles, FilesNoRecordNamesAreRemovedOnOpen) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  { RocksDbStore(path, {false, 1}).put_state(1, true, bytes(100, 1), {}); }
  ASSERT_EQ(value_files(path), 1u);
  std::ofstream(values_dir(path) + "/7") << "a file written before a crash";
  std::ofstream(values_dir(path) + "/notes") << "not the store's";
  RocksDbStore s(path, {false, 1});
  EXPECT_FALSE(std::filesystem::exists(values_dir(path) + "/7"));
  EXPECT_TRUE(std::filesystem::exists(values_dir(path) + "/notes"));
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 1)}));
  s.put_state(1, false, bytes(5, 2), {});  // after a reopen, a new file
  EXPECT_TRUE(std::filesystem::exists(values_dir(path) + "/8"));
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 1), bytes(5, 2)}));
}

// Without sync, a file no record names waits for one fsync of the write-ahead log for many files (so that a machine
// crash cannot bring back a reference to a file already gone): up to 64 of them, or until the store is closed.
TEST(RocksDbStoreValueFiles, WithoutSyncReleasedFilesGoTogetherAfterTheLogIsOnDisk) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path, {false, 1});
    for (std::uint8_t i = 1; i <= 3; ++i) s.put_state(1, true, bytes(100, i), {});  // three chains, three files
    EXPECT_EQ(value_files(path), 3u);                                               // two of them released, waiting
    for (std::uint8_t i = 4; i <= 70; ++i) s.put_state(1, true, bytes(100, i), {});
    EXPECT_LT(value_files(path), 64u);  // they went together, once 64 were waiting
    EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 70)}));
  }
  EXPECT_EQ(value_files(path), 1u);  // the rest went at the close
  RocksDbStore s(path, {false, 1});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(100, 70)}));
}

// Without sync, a machine crash may leave a reference whose bytes never reached the disk (simulated by cutting and
// removing files before a reopen): reading that chain reports it, naming the file, and never restores it; the other
// workers read as before, and the worker's next full backup starts a chain that reads again.
TEST(RocksDbStoreValueFiles, RecordsWhoseBytesAreMissingAfterAReopenAreReported) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path, {false, 50});
    s.put_state(1, true, bytes(100, 1), {});  // file 1 [0, 100)
    s.put_state(1, false, bytes(10, 2), {});  // inside RocksDB
    s.put_state(1, false, bytes(60, 3), {});  // file 1 [100, 160)
    s.put_state(2, true, bytes(80, 5), {});   // file 2
    s.put_items(2, bytes(9, 0xA), {{0, 1, 1}});
    s.put_state(3, true, bytes(70, 6), {});  // file 3
  }
  std::filesystem::resize_file(values_dir(path) + "/1", 150);  // the delta in it is cut short
  std::filesystem::remove(values_dir(path) + "/2");            // worker 2's full record is gone
  RocksDbStore s(path, {false, 50});
  for (const int w : {1, 2}) {
    try {
      const auto chain = s.state_chain(w);
      ADD_FAILURE() << "worker " << w << ": a chain with missing bytes was read (" << chain.size() << " records)";
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("worker " + std::to_string(w)), std::string::npos) << msg;
      EXPECT_NE(msg.find(values_dir(path) + "/" + std::to_string(w)), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(s.item_records(2), (std::vector<Bytes>{bytes(9, 0xA)}));
  EXPECT_EQ(s.state_chain(3), (std::vector<Bytes>{bytes(70, 6)}));
  s.put_state(1, true, bytes(60, 7), {});
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(60, 7)}));
}

// A chain of a thousand records in one file is read with one descriptor for it, however few the process may open.
TEST(RocksDbStoreValueFiles, ALongChainIsReadWithOneDescriptorAFile) {
  TempDir dir;
  RocksDbStore s(dir.str() + "/db", {false, 1});
  s.put_state(1, true, bytes(64, 0), {});
  for (int i = 1; i <= 1100; ++i) s.put_state(1, false, bytes(16, static_cast<std::uint8_t>(i)), {});
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 200);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<Bytes> chain;
  std::string error;
  try {
    chain = s.state_chain(1);
  } catch (const std::exception& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_EQ(error, "");
  ASSERT_EQ(chain.size(), 1101u);
  EXPECT_EQ(chain.back(), bytes(16, static_cast<std::uint8_t>(1100)));
}

// A value file cut short, changed or gone while the store is open: reading the chain reports it (FormatError naming
// the worker and the file) and never returns it; the next full backup starts a chain that reads again.
TEST(RocksDbStoreValueFiles, DamagedFilesAreReportedNamingTheWorkerAndTheFile) {
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> damages = {
      {"cut short", [](const std::string& f) { std::filesystem::resize_file(f, 99); }},
      {"changed",
       [](const std::string& f) {
         std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
         io.seekp(42);
         io.put('\x5a');
       }},
      {"gone", [](const std::string& f) { std::filesystem::remove(f); }},
  };
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    TempDir dir;
    const std::string path = dir.str() + "/db";
    RocksDbStore s(path, {false, 1});
    s.put_state(4, true, bytes(100, 1), {});
    ASSERT_EQ(value_files(path), 1u);
    const std::string file = std::filesystem::directory_iterator(values_dir(path))->path().string();
    damage(file);
    try {
      const auto chain = s.state_chain(4);
      ADD_FAILURE() << "a damaged value file was read (" << chain.size() << " records)";
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("worker 4"), std::string::npos) << msg;
      EXPECT_NE(msg.find(file), std::string::npos) << msg;
    }
    s.put_state(4, true, bytes(30, 2), {});
    EXPECT_EQ(s.state_chain(4), (std::vector<Bytes>{bytes(30, 2)}));
  }
}

// A store of format 1 (every record inside RocksDB) is read as it is, carries on with value files, and is marked
// format 2 by its first batch with a reference; a format this program does not know is refused.
TEST(RocksDbStoreValueFiles, AFormatOneStoreIsReadAndCarriesOn) {
  TempDir dir;
  const std::string path = dir.str() + "/db";
  {
    RocksDbStore s(path, {false, 0});
    s.put_state(3, true, bytes(100, 1), {});
    s.put_items(3, bytes(10, 0xA), {{0, 1, 2}});
  }
  auto set_format = [&](const std::string& format) {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), kFormatKey, format).ok());
  };
  auto format = [&] {
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string f;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), kFormatKey, &f).ok());
    return f;
  };
  set_format("1");
  {
    RocksDbStore s(path, {false, 1});
    EXPECT_EQ(s.state_chain(3), (std::vector<Bytes>{bytes(100, 1)}));
  }
  EXPECT_EQ(format(), "1");  // nothing a format 1 reader cannot read yet
  {
    RocksDbStore s(path, {false, 1});
    s.put_state(3, false, bytes(50, 2), {});
    EXPECT_EQ(value_files(path), 1u);
  }
  EXPECT_EQ(format(), "2");
  {
    RocksDbStore s(path);
    EXPECT_EQ(s.state_chain(3), (std::vector<Bytes>{bytes(100, 1), bytes(50, 2)}));
    EXPECT_EQ(s.item_records(3), (std::vector<Bytes>{bytes(10, 0xA)}));
    EXPECT_EQ(s.stats().bytes_stored, 160u);
  }
  set_format("3");
  expect_config_error_naming(path, "format '3'");
}

// --- crash test: a writer process killed with SIGKILL -------------------------------------------------------------

constexpr const char* kCrashChildEnv = "AFS_STORE_CRASH_CHILD";  // "<store dir> <ack pipe fd> <value file min>"
constexpr int kCrashWorker = 7;
constexpr std::uint32_t kCrashOps = 200000;

// The payload of operation i: i (4 bytes), a tag ('F' full state, 'D' delta, 'I' items), then filler; 100 to
// 1599 bytes.
Bytes crash_payload(std::uint32_t i, char tag) {
  Bytes b(100 + (i * 7919u) % 1500);
  for (std::size_t j = 0; j < b.size(); ++j) b[j] = static_cast<std::uint8_t>(i * 31 + j);
  for (int k = 0; k < 4; ++k) b[k] = static_cast<std::uint8_t>(i >> (8 * k));
  b[4] = static_cast<std::uint8_t>(tag);
  return b;
}

std::uint32_t crash_index(const Bytes& b) {
  return b.size() < 5 ? 0 : b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t(b[3]) << 24);
}

// Operation i of the workload: a full state every 30 operations, deltas, and item records on two channels;
// every state covers the items up to 6 operations back, so some are trimmed and some kept.
void crash_op(BackupStore& s, std::uint32_t i) {
  if (i % 3 == 2) {
    s.put_items(kCrashWorker, crash_payload(i, 'I'), {{0, i, i}, {1, i, i}});
  } else {
    const bool full = i % 30 == 0;
    SeqByChannel covered;
    if (i >= 6) covered = {{0, i - 6}, {1, i - 6}};
    s.put_state(kCrashWorker, full, crash_payload(i, full ? 'F' : 'D'), covered);
  }
}

// The child: writes the workload, reporting each put that returned with one byte on the pipe.
[[noreturn]] void crash_child(const std::string& spec) {
  const auto last = spec.rfind(' ');
  const auto space = spec.rfind(' ', last - 1);
  const std::string dir = spec.substr(0, space);
  const int fd = std::atoi(spec.c_str() + space + 1);
  const auto value_file_min = static_cast<std::size_t>(std::atoll(spec.c_str() + last + 1));
  try {
    RocksDbStore s(dir, {false, value_file_min});
    for (std::uint32_t i = 0; i < kCrashOps; ++i) {
      crash_op(s, i);
      const char ack = 'x';
      ssize_t n;
      do {
        n = write(fd, &ack, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1) _exit(3);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash child: %s\n", e.what());
    _exit(2);
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));  // wait to be killed, but never forever
  _exit(0);
}

// Reads up to `want` bytes from fd, waiting at most until deadline; returns how many were read (stops at EOF).
std::size_t read_acks(int fd, std::size_t want, std::chrono::steady_clock::time_point deadline) {
  std::size_t got = 0;
  char buf[4096];
  while (got < want) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    const ssize_t n = read(fd, buf, std::min(sizeof buf, want - got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is gone
    got += static_cast<std::size_t>(n);
  }
  return got;
}

// Runs the child until it has reported `kill_after` puts, kills it with SIGKILL, and returns how many puts it
// reported in all (including those still in the pipe).
std::size_t run_and_kill_child(const std::string& store_dir, std::size_t value_file_min, std::size_t kill_after) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  // Everything the child needs is prepared before fork: between fork and exec only async-signal-safe calls.
  const std::string self = "/proc/self/exe";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind(std::string(kCrashChildEnv) + "=", 0) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back(std::string(kCrashChildEnv) + "=" + store_dir + " " + std::to_string(fds[1]) + " " +
                        std::to_string(value_file_min));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {const_cast<char*>(self.c_str()), const_cast<char*>(filter.c_str()), nullptr};
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    if (getppid() != parent) _exit(4);
    close(fds[0]);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);  // keep the child's test banner out of the output
    execve(self.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::size_t acked = read_acks(fds[0], kill_after, deadline);
  kill(pid, SIGKILL);
  int status = 0;
  bool reaped = false;
  for (int i = 0; i < 1000 && !reaped; ++i) {  // at most 10 s
    reaped = waitpid(pid, &status, WNOHANG) == pid;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The pipe now holds whatever the child reported after we stopped reading: those puts were acknowledged too.
  acked += read_acks(fds[0], SIZE_MAX, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  close(fds[0]);
  EXPECT_TRUE(reaped) << "the killed child was not reaped";
  EXPECT_TRUE(reaped && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child ended before it was killed (status " << status << ") after " << acked << " puts";
  return acked;
}

TEST(RocksDbStoreCrash, SigkillLosesNoAcknowledgedBackupAndLeavesNoHalfWrittenOne) {
  if (const char* spec = std::getenv(kCrashChildEnv)) crash_child(spec);

  // Value files for no state record, and for those of 1,000 bytes or more (about a third of them).
  for (const std::size_t value_file_min : {std::size_t{0}, std::size_t{1000}})
    for (const std::size_t kill_after : {std::size_t{1}, std::size_t{777}, std::size_t{100000}}) {
      SCOPED_TRACE("killed after " + std::to_string(kill_after) + " acknowledged puts, value_file_min_bytes " +
                   std::to_string(value_file_min));
      TempDir dir;
      const std::string path = dir.str() + "/db";
      const std::size_t acked = run_and_kill_child(path, value_file_min, kill_after);
      ASSERT_GE(acked, kill_after);

      RocksDbStore s(path, {false, value_file_min});
      const std::vector<Bytes> chain = s.state_chain(kCrashWorker);  // throws FormatError on any bad checksum
      const std::vector<Bytes> items = s.item_records(kCrashWorker);
      ASSERT_FALSE(chain.empty());
      EXPECT_EQ(chain.front().at(4), 'F') << "the chain does not start with a full backup";
      // The last put that reached the store; every put before it must be there, the ones after it not at all.
      std::uint32_t last = 0;
      for (const auto& b : chain) last = std::max(last, crash_index(b));
      for (const auto& b : items) last = std::max(last, crash_index(b));
      const std::size_t persisted = std::size_t{last} + 1;
      EXPECT_GE(persisted, acked) << "acknowledged puts were lost";
      EXPECT_LE(persisted, acked + 1) << "more than the one put in flight was written without being acknowledged";

      // The store must hold exactly what a store that saw those puts and nothing else holds.
      MemoryStore model;
      for (std::uint32_t i = 0; i < persisted; ++i) crash_op(model, i);
      EXPECT_EQ(chain, model.state_chain(kCrashWorker));
      EXPECT_EQ(items, model.item_records(kCrashWorker));
      EXPECT_EQ(s.stats().bytes_stored, model.stats().bytes_stored);
      // The chain's records in value files lie in one file (its records are appended to it), and a file half-written
      // or left by the kill is gone.
      std::size_t in_files = 0;
      for (const auto& b : model.state_chain(kCrashWorker))
        in_files += value_file_min > 0 && b.size() >= value_file_min;
      EXPECT_EQ(value_files(path), in_files > 0 ? 1u : 0u);

      // And it carries on: the next put follows the recovered ones.
      crash_op(s, last + 1);
      crash_op(model, last + 1);
      EXPECT_EQ(s.state_chain(kCrashWorker), model.state_chain(kCrashWorker));
      EXPECT_EQ(s.item_records(kCrashWorker), model.item_records(kCrashWorker));
    }
}

}  // namespace
}  // namespace afs
