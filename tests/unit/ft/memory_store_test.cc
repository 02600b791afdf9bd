// Unit tests of the in-memory backup store (afstream/store/memory_store.h; DESIGN.md sections 4, 5 and 8): state
// chains (a full backup starts a new chain, deltas append), item records trimmed only once a state covers every
// channel they hold, storage accounting, corruption detection and drop.
#include "afstream/store/memory_store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {
namespace {

Bytes bytes(std::size_t n, std::uint8_t fill) { return Bytes(n, fill); }

TEST(MemoryStore, EmptyWorkerHasNothing) {
  MemoryStore s;
  EXPECT_TRUE(s.state_chain(3).empty());
  EXPECT_TRUE(s.item_records(3).empty());
  const StoreStats st = s.stats();
  EXPECT_EQ(st.state_backups, 0u);
  EXPECT_EQ(st.item_backups, 0u);
  EXPECT_EQ(st.bytes_written, 0u);
  EXPECT_EQ(st.bytes_stored, 0u);
}

TEST(MemoryStore, FullStartsAChainAndDeltasAppend) {
  MemoryStore s;
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
  // Workers are independent.
  s.put_state(2, true, bytes(7, 6), {});
  EXPECT_EQ(s.state_chain(1).size(), 2u);
  EXPECT_EQ(s.state_chain(2), (std::vector<Bytes>{bytes(7, 6)}));
  EXPECT_EQ(s.stats().bytes_stored, 62u);
}

TEST(MemoryStore, ItemRecordsAreTrimmedOnlyWhenEveryChannelIsCovered) {
  MemoryStore s;
  // Record A: channel 1 seq 1..10 and channel 2 seq 5..8. Record B: channel 1 seq 11..20. Record C: channel 3.
  s.put_items(4, bytes(40, 0xA), {{1, 1, 10}, {2, 5, 8}});
  s.put_items(4, bytes(30, 0xB), {{1, 11, 20}});
  s.put_items(4, bytes(20, 0xC), {{3, 1, 1}});
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(40, 0xA), bytes(30, 0xB), bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().item_backups, 3u);
  EXPECT_EQ(s.stats().bytes_stored, 90u);

  // Channel 2 of A is not covered at all: nothing is trimmed.
  s.put_state(4, true, bytes(8, 1), {{1, 15}});
  EXPECT_EQ(s.item_records(4).size(), 3u);
  // Channel 2 covered up to 7 < 8: still not.
  s.put_state(4, false, bytes(8, 2), {{1, 15}, {2, 7}});
  EXPECT_EQ(s.item_records(4).size(), 3u);
  EXPECT_EQ(s.stats().bytes_stored, 90u + 16);
  // Both channels of A covered (at or above their last sequence numbers); B is only covered up to 15 < 20.
  s.put_state(4, false, bytes(8, 3), {{1, 15}, {2, 8}});
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(30, 0xB), bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().bytes_stored, 50u + 24);
  // B covered exactly at its last sequence number; C's channel 3 is not mentioned, so C stays.
  s.put_state(4, true, bytes(8, 4), {{1, 20}, {2, 8}});
  EXPECT_EQ(s.item_records(4), (std::vector<Bytes>{bytes(20, 0xC)}));
  EXPECT_EQ(s.stats().bytes_stored, 20u + 8);  // the full backup also dropped the old chain
  // Other workers' records are untouched by this worker's states.
  s.put_items(5, bytes(10, 0xD), {{1, 1, 1}});
  s.put_state(4, false, bytes(1, 5), {{1, 100}, {3, 100}});
  EXPECT_TRUE(s.item_records(4).empty());
  EXPECT_EQ(s.item_records(5), (std::vector<Bytes>{bytes(10, 0xD)}));
  const StoreStats st = s.stats();
  EXPECT_EQ(st.bytes_stored, 8u + 1 + 10);
  EXPECT_EQ(st.bytes_written, 40u + 30 + 20 + 8 * 4 + 10 + 1);
  EXPECT_EQ(st.state_backups, 5u);
  EXPECT_EQ(st.item_backups, 4u);
}

TEST(MemoryStore, CorruptStateMakesStateChainThrowNamingTheWorker) {
  MemoryStore s;
  s.put_state(6, true, bytes(64, 1), {});
  s.put_state(6, false, bytes(16, 2), {});
  s.put_items(6, bytes(8, 3), {{0, 1, 2}});
  s.put_state(7, true, bytes(64, 1), {});
  s.corrupt_latest_state(6);
  try {
    s.state_chain(6);
    ADD_FAILURE() << "a corrupt state backup was returned";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("worker 6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
  EXPECT_EQ(s.state_chain(7).size(), 1u);   // other workers are fine
  EXPECT_EQ(s.item_records(6).size(), 1u);  // and so are this worker's item records
  s.put_state(6, true, bytes(32, 9), {});   // a new full backup replaces the corrupt chain
  EXPECT_EQ(s.state_chain(6), (std::vector<Bytes>{bytes(32, 9)}));
}

TEST(MemoryStore, DropForgetsAWorker) {
  MemoryStore s;
  s.put_state(1, true, bytes(100, 1), {});
  s.put_items(1, bytes(50, 2), {{0, 1, 5}});
  s.put_state(2, true, bytes(30, 3), {});
  s.put_items(2, bytes(20, 4), {{0, 1, 5}});
  s.drop(1);
  EXPECT_TRUE(s.state_chain(1).empty());
  EXPECT_TRUE(s.item_records(1).empty());
  EXPECT_EQ(s.state_chain(2).size(), 1u);
  EXPECT_EQ(s.item_records(2).size(), 1u);
  StoreStats st = s.stats();
  EXPECT_EQ(st.bytes_stored, 50u);
  EXPECT_EQ(st.bytes_written, 200u);  // what was written stays counted
  s.drop(1);                          // dropping twice, or an unknown worker, is harmless
  s.drop(99);
  EXPECT_EQ(s.stats().bytes_stored, 50u);
  s.put_state(1, false, bytes(4, 5), {});  // a worker can start again after drop
  EXPECT_EQ(s.state_chain(1), (std::vector<Bytes>{bytes(4, 5)}));
}

TEST(MemoryStore, ConcurrentWritersKeepConsistentStats) {
  MemoryStore s;
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

}  // namespace
}  // namespace afs
