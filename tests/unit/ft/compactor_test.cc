// Unit tests of state-chain compaction (afstream/ft/compactor.h): a compacted chain restores exactly the state the
// chain restored, with the metadata of its last record; the background compactor keeps chains short on the memory
// and RocksDB stores and through a BackupServer, leaves chains of unknown operators alone (counted, reported), and a
// compaction that lost a race with a full backup is not applied.
#include "afstream/ft/compactor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"
#include "afstream/core/registry.h"
#include "afstream/runtime/backup_server.h"
#include "afstream/state/snapshot.h"
#include "afstream/state/tracked_array.h"
#include "afstream/store/local_recovery_store.h"
#include "afstream/store/memory_store.h"
#include "afstream/store/remote_store.h"
#include "afstream/store/rocksdb_store.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

// A user operator as any other: n counters (parameter n), item.value added to counter key % n.
class Slots : public Operator {
 public:
  explicit Slots(const Params& p) : slots_(static_cast<std::size_t>(p.get_uint("n", 64)), Metric::MaxAbs) {}
  void process(const Item& item, Emitter&) override { slots_.add(item.key % slots_.size(), item.value); }
  double alpha() const override { return 100; }
  double beta() const override { return 0; }
  double divergence() const override { return slots_.divergence(); }
  void snapshot_full(ByteWriter& out) const override { slots_.write_full(out); }
  void snapshot_delta(ByteWriter& out) const override { slots_.write_delta(out); }
  void mark_backed_up() override { slots_.mark_backed_up(); }
  double backup_partial_delta(ByteWriter& out, double residual) override {
    return slots_.backup_partial_delta(out, residual);
  }
  void restore_full(ByteReader& in) override { slots_.read_full(in); }
  void apply_delta(ByteReader& in) override { slots_.apply_delta(in); }
  double distance(const Operator& other) const override {
    return slots_.distance(dynamic_cast<const Slots&>(other).slots_);
  }
  std::vector<std::int64_t> values() const { return {slots_.values().begin(), slots_.values().end()}; }

 private:
  TrackedArray<std::int64_t> slots_;
};

struct NoEmit final : Emitter {
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
};

const OperatorSpec kSpec{"slots", Params().set("n", 97), 1, 2};

Registry slots_registry() {
  Registry r;
  r.add_operator("slots", "test counters",
                 [](const Params& p, const InstanceInfo&) { return std::make_unique<Slots>(p); });
  return r;
}

OperatorMaker maker(const Registry& r) {
  return [&r](const OperatorSpec& s) { return r.make_operator(s.kind, s.params, {s.index, s.parallelism}); };
}

// Writes records the way a worker does: a full one with the spec, then deltas (partial ones every third), each
// with its own metadata; feeds items in between.
class Writer {
 public:
  explicit Writer(std::uint64_t seed) : op_(kSpec.params), rng_(seed) {}

  void feed(int items) {
    NoEmit out;
    for (int i = 0; i < items; ++i) op_.process(Item{rng_(), static_cast<std::int64_t>(rng_() % 100), 0, 0}, out);
    processed_ += static_cast<std::uint64_t>(items);
  }

  Bytes record(bool full, std::uint64_t checkpoint = 0) {
    StateRecord rec;
    rec.full = full;
    rec.checkpoint = checkpoint;
    ByteWriter w;
    w.buffer().resize(kSnapshotHeaderSize);
    if (full) {
      op_.snapshot_full(w);
      op_.mark_backed_up();
      rec.op_spec = kSpec;
    } else if (++deltas_ % 3 == 0) {
      rec.residual = op_.backup_partial_delta(w, 150);
    } else {
      op_.snapshot_delta(w);
      op_.mark_backed_up();
    }
    rec.snapshot = w.take();
    seal_snapshot_in_place(rec.snapshot, type_id_of(kSpec.kind), full ? SnapshotKind::Full : SnapshotKind::Delta);
    rec.inputs = {{4, processed_}};
    rec.outputs = {{9, processed_ / 2}};
    rec.source_offset = processed_;
    rec.missing_by_failure = {static_cast<std::int64_t>(deltas_)};
    rec.residual_by_failure = {0.5};
    return rec.encode();
  }

  const Slots& op() const { return op_; }

 private:
  Slots op_;
  std::mt19937_64 rng_;
  std::uint64_t processed_ = 0;
  int deltas_ = 0;
};

// What restoring a chain gives, as the worker restores it.
std::vector<std::int64_t> restored(const std::vector<Bytes>& chain) {
  Slots op(kSpec.params);
  for (const auto& b : chain) {
    const StateRecord rec = StateRecord::decode(b);
    const auto opened = open_snapshot(rec.snapshot, type_id_of(kSpec.kind));
    ByteReader r(opened.payload);
    rec.full ? op.restore_full(r) : op.apply_delta(r);
  }
  return op.values();
}

TEST(CompactChain, RestoresTheSameStateWithTheLastRecordsMetadata) {
  const Registry reg = slots_registry();
  Writer w(7);
  std::vector<Bytes> chain;
  w.feed(500);
  chain.push_back(w.record(true));
  for (int i = 0; i < 12; ++i) {
    w.feed(200);
    chain.push_back(w.record(false));
  }
  const Bytes compacted = compact_chain(chain, maker(reg));
  const StateRecord out = StateRecord::decode(compacted);
  const StateRecord last = StateRecord::decode(chain.back());
  EXPECT_TRUE(out.full);
  ASSERT_TRUE(out.op_spec);
  EXPECT_EQ(*out.op_spec, kSpec);
  EXPECT_EQ(out.inputs, last.inputs);
  EXPECT_EQ(out.outputs, last.outputs);
  EXPECT_EQ(out.source_offset, last.source_offset);
  EXPECT_EQ(out.missing_by_failure, last.missing_by_failure);
  EXPECT_EQ(out.residual, last.residual);  // the compacted state is the chain's, residual and all
  EXPECT_EQ(out.residual_by_failure, last.residual_by_failure);
  EXPECT_EQ(restored({compacted}), restored(chain));
  EXPECT_NE(restored(chain), std::vector<std::int64_t>(97, 0));
  // A chain of one full record compacts to itself (the same state).
  EXPECT_EQ(restored({compact_chain({chain[0]}, maker(reg))}), restored({chain[0]}));
}

TEST(CompactChain, RefusesWhatItCannotRebuild) {
  const Registry reg = slots_registry();
  Writer w(1);
  w.feed(10);
  const Bytes full = w.record(true);
  w.feed(10);
  const Bytes delta = w.record(false);
  EXPECT_EQ(testing::error_message<FormatError>([&] { compact_chain({}, maker(reg)); }),
            "compaction: the chain is empty");
  EXPECT_EQ(testing::error_message<FormatError>([&] { compact_chain({delta}, maker(reg)); }),
            "compaction: the chain starts with a delta");
  EXPECT_NE(testing::error_message<FormatError>([&] {
              compact_chain({full, full}, maker(reg));
            }).find("full record"),
            std::string::npos);
  StateRecord anonymous = StateRecord::decode(full);
  anonymous.op_spec.reset();
  EXPECT_NE(testing::error_message<FormatError>([&] {
              compact_chain({anonymous.encode()}, maker(reg));
            }).find("names no operator"),
            std::string::npos);
  const Registry empty;
  EXPECT_NE(testing::error_message<ConfigError>([&] {
              compact_chain({full, delta}, maker(empty));
            }).find("slots"),
            std::string::npos);
  Bytes corrupt = delta;
  corrupt[corrupt.size() / 2] ^= 0x40;  // inside the sealed snapshot: its checksum no longer matches
  EXPECT_THROW(compact_chain({full, corrupt}, maker(reg)), FormatError);
}

TEST(CompactionPolicy, CompactsByWeightOrByCount) {
  const CompactionPolicy p{1.0, 64};
  EXPECT_FALSE(needs_compaction({1, 1, 100, 0}, p));
  EXPECT_FALSE(needs_compaction({1, 10, 100, 99}, p));
  EXPECT_TRUE(needs_compaction({1, 10, 100, 100}, p));
  EXPECT_TRUE(needs_compaction({1, 65, 1000000, 64}, p));
  EXPECT_FALSE(needs_compaction({1, 64, 1000000, 63}, p));
}

// Puts through a store with a compactor behind it, as the backup server makes them: chains stay short, and every
// chain restores what the writer holds.
template <class Store>
void keeps_chains_short(Store& store) {
  const Registry reg = slots_registry();
  ChainCompactor compactor(store, maker(reg), CompactionPolicy{1.0, 8});
  Writer w(3);
  w.feed(1000);
  compactor.notify(1, store.put_state(1, true, w.record(true), {}));
  std::uint64_t longest = 0;
  for (int i = 0; i < 200; ++i) {
    w.feed(50);
    const ChainInfo info = store.put_state(1, false, w.record(false), {});
    longest = std::max(longest, info.length);
    compactor.notify(1, info);
    if (i % 25 == 0) compactor.wait_idle();  // let it catch up now and then, as a real server's pace would
  }
  compactor.wait_idle();
  const auto c = compactor.counters();
  EXPECT_GT(c.compactions, 0u);
  EXPECT_EQ(c.unknown + c.failures, 0u);
  EXPECT_LE(store.state_chain(1).size(), 9u);
  EXPECT_LT(longest, 200u);
  EXPECT_EQ(restored(store.state_chain(1)), w.op().values());
}

TEST(ChainCompactor, KeepsMemoryChainsShort) {
  MemoryStore store;
  keeps_chains_short(store);
}

TEST(ChainCompactor, KeepsRocksDbChainsShort) {
  testing::TempDir dir;
  RocksDbStore store(dir.str() + "/db");
  keeps_chains_short(store);
}

// Puts a full record, then `deltas` deltas with items fed in between, into worker's chain, as a worker does, with
// the compactor told of each put and given time to act on it.
void put_chain(ChainCompactor& compactor, MemoryStore& store, Writer& w, int worker, int deltas) {
  compactor.notify(worker, store.put_state(worker, true, w.record(true), {}));
  for (int i = 0; i < deltas; ++i) {
    w.feed(20);
    compactor.notify(worker, store.put_state(worker, false, w.record(false), {}));
    compactor.wait_idle();
  }
}

TEST(ChainCompactor, LeavesChainsOfUnknownOperatorsAloneAndSaysWhy) {
  MemoryStore store;
  const Registry empty;
  std::atomic<int> reports{0};
  std::string reason;
  ChainCompactor compactor(store, maker(empty), CompactionPolicy{1.0, 2}, [&](int worker, const std::string& why) {
    EXPECT_EQ(worker, 4);
    reason = why;
    ++reports;
  });
  Writer w(5);
  put_chain(compactor, store, w, 4, 10);
  EXPECT_EQ(store.state_chain(4).size(), 11u);  // untouched
  EXPECT_EQ(compactor.counters().unknown, 1u);  // given up once for this chain, not at every put
  EXPECT_EQ(reports.load(), 1);
  EXPECT_NE(reason.find("slots"), std::string::npos) << reason;
}

// Checkpoint mode's chains hold the records of checkpoints that may still be the latest complete one: merged, they
// would be lost, so the compactor leaves them alone, silently (it is not a problem), once per chain.
TEST(ChainCompactor, LeavesCheckpointChainsAlone) {
  MemoryStore store;
  const Registry reg = slots_registry();
  int reports = 0;
  ChainCompactor compactor(store, maker(reg), CompactionPolicy{1.0, 2}, [&](int, const std::string&) { ++reports; });
  Writer w(6);
  compactor.notify(2, store.put_state(2, true, w.record(true, 1), {}));
  for (std::uint64_t i = 2; i <= 9; ++i) {
    w.feed(20);
    compactor.notify(2, store.put_state(2, false, w.record(false, i), {}));
    compactor.wait_idle();
  }
  EXPECT_EQ(store.state_chain(2).size(), 9u);
  EXPECT_EQ(compactor.counters().checkpoint_chains, 1u);
  EXPECT_EQ(compactor.counters().compactions, 0u);
  EXPECT_EQ(reports, 0);
}

// An operator whose deltas are applied by replaying their items (Operator::store_compacts_deltas false): the
// compactor leaves its chain to the worker, silently, once per chain, and compacts others as before.
TEST(ChainCompactor, LeavesChainsWhoseDeltasAreReplaysToTheWorker) {
  struct Replayed final : Slots {
    using Slots::Slots;
    bool store_compacts_deltas() const override { return false; }
  };
  Registry reg;
  reg.add_operator("slots", "test counters whose deltas are replays",
                   [](const Params& p, const InstanceInfo&) { return std::make_unique<Replayed>(p); });
  MemoryStore store;
  int reports = 0;
  ChainCompactor compactor(store, maker(reg), CompactionPolicy{1.0, 2}, [&](int, const std::string&) { ++reports; });
  Writer w(8);
  put_chain(compactor, store, w, 3, 10);
  EXPECT_EQ(store.state_chain(3).size(), 11u);  // untouched
  EXPECT_EQ(compactor.counters().left_to_worker, 1u);
  EXPECT_EQ(compactor.counters().compactions, 0u);
  EXPECT_EQ(reports, 0);
  // A new full record starts a new chain: looked at again (once), left again.
  put_chain(compactor, store, w, 3, 3);
  EXPECT_EQ(compactor.counters().left_to_worker, 2u);
}

// The race: the chain is read, then a full backup replaces it before the compacted record is swapped in.
TEST(ChainCompactor, ACompactionOvertakenByAFullBackupIsNotApplied) {
  MemoryStore store;
  const Registry reg = slots_registry();
  Writer w(9);
  store.put_state(2, true, w.record(true), {});
  w.feed(10);
  store.put_state(2, false, w.record(false), {});
  ChainInfo read;
  const auto chain = store.state_chain(2, &read);
  const Bytes compacted = compact_chain(chain, maker(reg));
  w.feed(10);
  const Bytes newer = w.record(true);
  store.put_state(2, true, newer, {});
  EXPECT_FALSE(store.compact_state(2, read.generation, chain.size(), compacted));
  EXPECT_EQ(store.state_chain(2), std::vector<Bytes>{newer});
}

// A backup server on a thread of this process, serving a MemoryStore and compacting at 1x or 4 deltas.
class CompactingServer {
 public:
  CompactingServer() : server_("tcp://127.0.0.1:0", std::make_unique<MemoryStore>(), options()) {
    serving_ = std::thread([this] { server_.run(stop_); });
  }
  ~CompactingServer() {
    stop_ = true;
    serving_.join();
  }
  BackupServer& operator*() { return server_; }
  BackupServer* operator->() { return &server_; }

  // Writes worker 6's chain as a worker does (a full record, then 31 deltas), letting each compaction finish
  // before the next put; returns the chain after the last put.
  ChainInfo write_chain(BackupStore& client, Writer& w) {
    client.put_state(6, true, w.record(true), {});
    for (int i = 0; i < 30; ++i) {
      w.feed(40);
      client.put_state(6, false, w.record(false), {});
      server_.wait_compactions();
    }
    w.feed(40);
    return client.put_state(6, false, w.record(false), {});  // after the last compaction
  }

 private:
  BackupServerOptions options() {
    BackupServerOptions o;
    o.make_operator = maker(reg_);
    o.compaction = CompactionPolicy{1.0, 4};
    return o;
  }
  const Registry reg_ = slots_registry();
  BackupServer server_;
  std::atomic<bool> stop_{false};
  std::thread serving_;
};

// The backup server compacts in the background when given an operator maker, and answers puts with the chain, so
// a worker sees the compacted length.
TEST(ChainCompactor, TheBackupServerCompactsWhatWorkersPut) {
  CompactingServer server;
  RemoteStore client(server->bound_endpoint());
  Writer w(11);
  const ChainInfo info = server.write_chain(client, w);
  EXPECT_LE(info.length, 6u);
  EXPECT_GT(server->compactor_counters().compactions, 0u);
  EXPECT_EQ(restored(client.state_chain(6)), w.op().values());
}

// A worker keeping its own copy (LocalRecoveryStore) against a server that compacts its chain: the server follows
// each compaction with the digests it keeps, so the worker's next incarnation still restores from its copy (the
// records the compacted full record stands for, and the deltas after it), and gets the same state.
TEST(ChainCompactor, CompactedChainsStillRestoreFromTheWorkersCopies) {
  testing::TempDir tmp;
  CompactingServer server;
  Writer w(12);
  {
    RemoteStore client(server->bound_endpoint());
    LocalRecoveryStore local(client, tmp.str());
    server.write_chain(local, w);
  }
  ASSERT_GT(server->compactor_counters().compactions, 2u);
  RemoteStore client(server->bound_endpoint());
  LocalRecoveryStore next(client, tmp.str());
  const auto chain = next.state_chain(6);
  EXPECT_EQ(next.counters().restores_local, 1u);
  EXPECT_EQ(chain.size(), 32u);  // the copy's records: the full one and every delta
  EXPECT_EQ(restored(chain), w.op().values());
  EXPECT_EQ(restored(client.state_chain(6)), w.op().values());  // what the server holds, compacted
  EXPECT_LT(client.state_chain(6).size(), 8u);
}

}  // namespace
}  // namespace afs
