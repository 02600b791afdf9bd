// The external database of the exactly-once sink (issue 6, item 6): an engine-free RocksDB table of effects, each
// keyed by the identity the runtime dedupes items by, (input channel, sequence number) (DESIGN sections 2 and 5),
// whose value is the item (key, value, time). Writing an effect is an idempotent put: writing it again, as a retry,
// a replay or a restarted worker does, leaves the table as it was ("Idempotence", ../shared/seeds/
// ddia-stream-fault-tolerance.txt). Also the reader and the checker that read a table back and compare it with the
// effects a stream should have left: every item exactly once, with the right contents.
//
// Layout (one RocksDB database per directory): key 'e' | channel (4 bytes, big-endian) | seq (8 bytes, big-endian),
// so iteration follows (channel, seq); value = format version (1 byte) | key (8) | value (8) | time (8), little-endian.
// A marker key 'm' "afstream-effects" holds the format ("1"); a directory whose database lacks it is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "afstream/core/item.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace afs::sinks {

// One effect: the item's identity (channel, item.seq) and the item.
struct Effect {
  std::uint32_t channel = 0;
  Item item;

  friend bool operator==(const Effect&, const Effect&) = default;
};

struct EffectDbOptions {
  // false: a write is in RocksDB's write-ahead log (the OS page cache) when write() returns, so it survives a
  // SIGKILL of the process but not a machine crash; true: it is also fsynced (survives power loss; slower).
  bool sync = false;
  // How long open waits for the database's lock while another handle holds it (a killed incarnation of the same
  // worker whose process is still being torn down); then it gives up with ConfigError.
  int lock_wait_ms = 10000;
};

// An open effects database. Not thread-safe; one handle per database per process (RocksDB's lock).
class EffectDb {
 public:
  // Opens the database in directory `path`, creating it (and its parents) if missing. Throws ConfigError naming
  // the path and RocksDB's message when it cannot be created or opened (a file in the way, no permission, locked
  // longer than lock_wait_ms) or when it is a RocksDB database that is not an effects table.
  explicit EffectDb(std::string path, EffectDbOptions options = {});
  ~EffectDb();
  EffectDb(const EffectDb&) = delete;
  EffectDb& operator=(const EffectDb&) = delete;

  // Writes the effects in one atomic rocksdb::WriteBatch: after a crash the table holds all of them or none.
  // A put of an identity already present replaces it (with the same item, in a replay: a no-op). RocksDB failures
  // throw RuntimeError naming the path.
  void write(std::span<const Effect> effects);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  EffectDbOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
};

// Calls fn for every effect of the database in `path`, in (channel, seq) order, reading a read-only view (which
// also sees what a handle still open in this process has written). A directory without a database yet (a sink that
// never wrote) has no effects. Throws ConfigError when `path` is no directory or a database that is not an effects
// table, FormatError on a record that does not decode.
void read_effects(const std::string& path, const std::function<void(const Effect&)>& fn);

// The directories a sink with several parallel instances writes: `dir`/part-<instance> (exactly_once_sink.h).
std::string part_path(const std::string& dir, int instance);
// Calls fn for every effect of every part-* database under `dir` (ConfigError if there is none).
void read_effect_parts(const std::string& dir, const std::function<void(const Effect&)>& fn);

// An order-independent digest of a set of effects: the wrapping sum of a 64-bit mix of each (channel, seq, key,
// value, time). Equal sets have equal digests; the sink keeps the digest of what it processed in its state, so the
// evaluator can compare what the engine's exactly-once state reflects with what the database holds.
std::uint64_t effect_digest(const Effect& e);

// What a database holds against the stream it should hold: items are identified by their `time`, which is the
// position 0 .. expected - 1 in the source's stream (as the Zipf source sets it); expected_at(p) is the item at p.
struct EffectCheck {
  std::uint64_t expected = 0;    // items in the stream
  std::uint64_t records = 0;     // effects in the database
  std::uint64_t present = 0;     // stream items with at least one effect of the right contents
  std::uint64_t missing = 0;     // stream items with none (lost effects)
  std::uint64_t duplicates = 0;  // further effects of an item already present (under another identity)
  std::uint64_t wrong = 0;       // effects that are no stream item: time out of range, or other key or value
  std::uint64_t seq_gaps = 0;    // per channel, sequence numbers from 1 to its largest that have no effect
  std::uint64_t digest = 0;      // sum of effect_digest over the records
  bool exactly_once() const {
    return missing == 0 && duplicates == 0 && wrong == 0 && seq_gaps == 0 && present == expected;
  }
};

// Checks the effects fn enumerates (read_effects or read_effect_parts bound to a path) against the stream.
EffectCheck check_effects(const std::function<void(const std::function<void(const Effect&)>&)>& enumerate,
                          std::uint64_t expected, const std::function<Item(std::uint64_t)>& expected_at);

}  // namespace afs::sinks
