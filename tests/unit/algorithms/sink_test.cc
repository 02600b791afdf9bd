// Unit tests of the exactly-once sink (algorithms/sinks): the effects table (writes, idempotent rewrites, a reopened
// database holds everything, the checker counts what is missing, duplicated or wrong), the sink operator (keyed by
// the emitter's input channel, writes before every snapshot, a crash loses only what a replay writes again), the
// conformance kit, and bad paths and parameters as ConfigError naming the parameter.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/testing/conformance.h"
#include "algorithms/sinks/effect_db.h"
#include "algorithms/sinks/sink_operators.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs::sinks {
namespace {

namespace fs = std::filesystem;
using afs::testing::expect_throw_mentioning;
using afs::testing::TempDir;

// An emitter that says which channel the item in process came from, as the runtime's does.
struct ChannelEmitter final : Emitter {
  std::uint32_t channel = 0;
  void emit(std::uint64_t, std::int64_t, std::int64_t) override {}
  std::uint32_t input_channel() const override { return channel; }
};

std::vector<Effect> effects(std::uint32_t channel, std::uint64_t first_seq, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Effect> v;
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back({channel,
                 {rng(), static_cast<std::int64_t>(rng() % 1000) - 500, static_cast<std::int64_t>(rng() % 100000),
                  first_seq + i}});
  }
  return v;
}

std::vector<Effect> read_all(const std::string& path) {
  std::vector<Effect> v;
  read_effects(path, [&](const Effect& e) { v.push_back(e); });
  return v;
}

std::vector<Effect> sorted(std::vector<Effect> v) {
  std::sort(v.begin(), v.end(), [](const Effect& a, const Effect& b) {
    return std::pair(a.channel, a.item.seq) < std::pair(b.channel, b.item.seq);
  });
  return v;
}

TEST(EffectDb, WritesReadBackInIdentityOrder) {
  TempDir t;
  const auto path = (t.path() / "db").string();
  auto a = effects(7, 1, 500, 1), b = effects(2, 1, 300, 2);
  {
    EffectDb db(path);
    db.write(a);
    db.write(b);
  }
  std::vector<Effect> want = a;
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_EQ(read_all(path), sorted(want));  // channel 2 first, then 7, each by seq
}

TEST(EffectDb, RewritesAreIdempotentAndAReopenedDatabaseHoldsEverything) {
  TempDir t;
  const auto path = (t.path() / "db").string();
  const auto a = effects(1, 1, 1000, 3);
  {
    EffectDb db(path);
    db.write(a);
    db.write({a.data() + 100, 400});  // a replay of part of the stream
    db.write(a);                      // and a retry of all of it
  }
  EXPECT_EQ(read_all(path), a);
  {
    EffectDb db(path);             // reopened: everything is there, more is added
    EXPECT_EQ(read_all(path), a);  // a read-only view while this handle holds the lock
    db.write(effects(1, 1001, 10, 4));
  }
  EXPECT_EQ(read_all(path).size(), 1010u);
}

TEST(EffectDb, ASecondHandleWaitsForTheLockThenNamesIt) {
  TempDir t;
  const auto path = (t.path() / "db").string();
  EffectDb first(path);
  expect_throw_mentioning<ConfigError>([&] { EffectDb second(path, {.sync = false, .lock_wait_ms = 50}); }, path);
}

TEST(EffectDb, BadPathsAreConfigErrorsNamingThePath) {
  TempDir t;
  const auto file = t.path() / "a-file";
  std::ofstream(file) << "x";
  expect_throw_mentioning<ConfigError>([&] { EffectDb db((file / "db").string()); }, (file / "db").string());
  expect_throw_mentioning<ConfigError>([&] { EffectDb db(""); }, "path is empty");
  expect_throw_mentioning<ConfigError>([&] { read_all((t.path() / "none").string()); }, "no such directory");
  expect_throw_mentioning<ConfigError>([&] { read_effect_parts(t.str(), [](const Effect&) {}); }, "no part-* database");
}

TEST(EffectDb, ARocksDbThatIsNoEffectsTableIsRefused) {
  TempDir t;
  const auto path = (t.path() / "db").string();
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "someone-else", "data").ok());
  }
  expect_throw_mentioning<ConfigError>([&] { EffectDb db(path); }, "not an afstream effects table");
  expect_throw_mentioning<ConfigError>([&] { read_all(path); }, "not an afstream effects table");
}

TEST(EffectCheck, CountsMissingDuplicateWrongAndGaps) {
  // The stream: position p holds {key p * 3, value 1, time p}.
  auto at = [](std::uint64_t p) { return Item{p * 3, 1, static_cast<std::int64_t>(p), 0}; };
  std::vector<Effect> db;
  for (std::uint64_t p = 0; p < 100; ++p) {
    if (p == 10 || p == 11) continue;  // two lost
    auto it = at(p);
    it.seq = p + 1;
    db.push_back({0, it});
  }
  db.push_back({1, {20 * 3, 1, 20, 1}});  // position 20 again under another identity: a duplicate
  db.push_back({1, {21 * 3, 2, 21, 2}});  // wrong value
  db.push_back({1, {0, 1, 5000, 4}});     // past the stream; and seq 3 of channel 1 is a gap
  const auto c = check_effects(
      [&](const auto& fn) {
        for (const auto& e : db) fn(e);
      },
      100, at);
  EXPECT_EQ(c.expected, 100u);
  EXPECT_EQ(c.records, 101u);
  EXPECT_EQ(c.present, 98u);
  EXPECT_EQ(c.missing, 2u);
  EXPECT_EQ(c.duplicates, 1u);
  EXPECT_EQ(c.wrong, 2u);
  EXPECT_EQ(c.seq_gaps, 2u + 1u);  // channel 0: seqs 11, 12; channel 1: seq 3
  EXPECT_FALSE(c.exactly_once());
  std::vector<Effect> clean;
  for (std::uint64_t p = 0; p < 100; ++p) {
    auto it = at(p);
    it.seq = p + 1;
    clean.push_back({0, it});
  }
  const auto ok = check_effects(
      [&](const auto& fn) {
        for (const auto& e : clean) fn(e);
      },
      100, at);
  EXPECT_TRUE(ok.exactly_once());
  std::uint64_t digest = 0;
  for (const auto& e : clean) digest += effect_digest(e);
  EXPECT_EQ(ok.digest, digest);
}

Params sink_params(const std::string& dir, std::uint64_t flush_every) {
  return Params().set("path", dir).set("flush-every", flush_every);
}

// Feeds items[from, to) on channel ch (seqs from + 1 ...).
void feed(EffectSink& s, ChannelEmitter& out, std::uint32_t ch, const std::vector<Item>& items, std::size_t from,
          std::size_t to) {
  out.channel = ch;
  for (std::size_t i = from; i < to; ++i) s.process(items[i], out);
}

std::vector<Item> stream(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Item> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = {rng() % 5000, 1, static_cast<std::int64_t>(i), i + 1};
  return v;
}

TEST(ExactlyOnceSink, KeysEffectsByChannelAndSeqAndWritesBeforeEverySnapshot) {
  TempDir t;
  const auto items = stream(10000, 1);
  EffectSink sink(sink_params(t.str(), 1000000), {0, 1}, true);
  ChannelEmitter out;
  feed(sink, out, 5, items, 0, 2500);
  const auto part = part_path(t.str(), 0);
  EXPECT_FALSE(fs::exists(fs::path(part) / "CURRENT"));  // nothing written yet: opened at the first write
  ByteWriter w;
  sink.snapshot_delta(w);  // the snapshot exists only once its effects are in the database
  auto got = read_all(part);
  ASSERT_EQ(got.size(), 2500u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].channel, 5u);
    EXPECT_EQ(got[i].item, items[i]);
  }
  sink.mark_backed_up();
  EXPECT_EQ(sink.divergence(), 0);
  feed(sink, out, 9, items, 2500, 10000);
  EXPECT_EQ(sink.divergence(), 7500);
  ChannelEmitter end;
  sink.finish(end);
  EXPECT_EQ(read_all(part).size(), 10000u);
  EXPECT_EQ(sink.items(), 10000u);
  EXPECT_EQ(sink.value_sum(), 10000);
  EXPECT_EQ(sink.effects_written(), 10000u);
  EXPECT_EQ(sink.batches_written(), 2u);
}

TEST(ExactlyOnceSink, FlushEveryBoundsTheBuffer) {
  TempDir t;
  const auto items = stream(1000, 2);
  EffectSink sink(sink_params(t.str(), 64), {0, 1}, true);
  ChannelEmitter out;
  feed(sink, out, 0, items, 0, 1000);
  EXPECT_EQ(read_all(part_path(t.str(), 0)).size(), 1000u / 64 * 64);
  EXPECT_EQ(sink.batches_written(), 1000u / 64);
}

// A crash after a backup: the buffered effects are lost with the process; the restored sink gets the items after
// its backup again (replay) and writes them under the same identities, effects written early are rewritten: every
// effect exactly once, and the restored state's digest equals the database's.
TEST(ExactlyOnceSink, CrashRestoreAndReplayLeaveEveryEffectOnce) {
  TempDir t;
  const auto items = stream(20000, 3);
  std::vector<std::uint8_t> backup;
  {
    EffectSink sink(sink_params(t.str(), 1000), {0, 1}, true);
    ChannelEmitter out;
    feed(sink, out, 3, items, 0, 7000);
    ByteWriter w;
    sink.snapshot_full(w);
    sink.mark_backed_up();
    backup = w.take();
    feed(sink, out, 3, items, 7000, 12345);  // 5000 of these written early (flush-every), 345 only buffered
  }                                          // crash: destroyed without finish
  EXPECT_EQ(read_all(part_path(t.str(), 0)).size(), 12000u);
  EffectSink restored(sink_params(t.str(), 1000), {0, 1}, true);
  ByteReader r(backup);
  restored.restore_full(r);
  EXPECT_EQ(restored.items(), 7000u);
  ChannelEmitter out;
  feed(restored, out, 3, items, 7000, 20000);  // replay, then the rest
  ChannelEmitter end;
  restored.finish(end);
  const auto c = check_effects([&](const auto& fn) { read_effects(part_path(t.str(), 0), fn); }, items.size(),
                               [&](std::uint64_t p) { return items[p]; });
  EXPECT_TRUE(c.exactly_once()) << c.missing << " missing, " << c.duplicates << " duplicates";
  EXPECT_EQ(c.records, 20000u);
  EXPECT_EQ(c.digest, restored.digest());
  EXPECT_EQ(restored.items(), 20000u);
}

TEST(ExactlyOnceSink, Conforms) {
  TempDir t;
  int made = 0;
  // Each instance writes a database of its own (the database is not state; one handle per database).
  auto make = [&] {
    return std::make_unique<EffectSink>(sink_params((t.path() / std::to_string(made++)).string(), 97),
                                        InstanceInfo{0, 1}, true);
  };
  EXPECT_TRUE(afs::testing::OperatorConforms(make, stream(3000, 4)));
  EXPECT_TRUE(afs::testing::OperatorConforms(
      [] {
        return std::make_unique<EffectSink>(Params(), InstanceInfo{0, 1}, false);
      },
      stream(3000, 5)));
}

TEST(ExactlyOnceSink, BadParametersAreConfigErrorsNamingTheParameter) {
  TempDir t;
  auto make = [](const Params& p) { EffectSink s(p, {0, 1}, true); };
  expect_throw_mentioning<ConfigError>([&] { make(Params()); }, "'path'");
  expect_throw_mentioning<ConfigError>([&] { make(sink_params(t.str(), 0)); }, "'flush-every'");
  expect_throw_mentioning<ConfigError>([&] { make(sink_params(t.str(), 1u << 25)); }, "'flush-every'");
  expect_throw_mentioning<ConfigError>([&] { make(sink_params(t.str(), 10).set("sync", "maybe")); }, "'sync'");
  expect_throw_mentioning<ConfigError>([&] { make(sink_params(t.str(), 10).set("flush-every", "many")); },
                                       "'flush-every'");
  const auto file = t.path() / "a-file";
  std::ofstream(file) << "x";
  expect_throw_mentioning<ConfigError>([&] { make(sink_params(file.string(), 10)); }, "'path'");
  fs::create_directories(t.path() / "full" / "part-0");
  std::ofstream(t.path() / "full" / "part-0" / "notes.txt") << "mine";
  expect_throw_mentioning<ConfigError>([&] { make(sink_params((t.path() / "full").string(), 10)); },
                                       "neither empty nor a RocksDB database");
  // A database a killed incarnation was creating: RocksDB opens its info log before it takes its LOCK file.
  fs::create_directories(t.path() / "begun" / "part-0");
  std::ofstream(t.path() / "begun" / "part-0" / "LOG") << "";
  EXPECT_NO_THROW(make(sink_params((t.path() / "begun").string(), 10)));
}

TEST(ExactlyOnceSink, ParallelInstancesWriteTheirOwnParts) {
  TempDir t;
  const auto items = stream(3000, 6);
  for (int i = 0; i < 3; ++i) {
    EffectSink s(sink_params(t.str(), 100), {i, 3}, true);
    ChannelEmitter out;
    feed(s, out, static_cast<std::uint32_t>(i), items, static_cast<std::size_t>(i) * 1000,
         static_cast<std::size_t>(i + 1) * 1000);
    ChannelEmitter end;
    s.finish(end);
  }
  std::map<std::uint32_t, std::size_t> per_channel;
  read_effect_parts(t.str(), [&](const Effect& e) { ++per_channel[e.channel]; });
  EXPECT_EQ(per_channel, (std::map<std::uint32_t, std::size_t>{{0, 1000}, {1, 1000}, {2, 1000}}));
}

}  // namespace
}  // namespace afs::sinks
