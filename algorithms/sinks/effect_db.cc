// The effects database on RocksDB: key and value encoding, opening (with the lock wait of a restarted worker),
// atomic batch writes, the read-only reader and the checker (see effect_db.h for the layout).
#include "algorithms/sinks/effect_db.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::sinks {
namespace {

constexpr char kEffectPrefix = 'e';
constexpr std::size_t kKeySize = 1 + 4 + 8;
constexpr std::uint8_t kValueVersion = 1;
constexpr std::size_t kValueSize = 1 + 8 + 8 + 8;
const std::string kMetaKey = "mafstream-effects";
const std::string kMetaFormat = "1";

void put_be(char* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
std::uint64_t get_be(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}
void put_le(char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
std::uint64_t get_le(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void encode_key(char* k, std::uint32_t channel, std::uint64_t seq) {
  k[0] = kEffectPrefix;
  put_be(k + 1, channel, 4);
  put_be(k + 5, seq, 8);
}

void encode_value(char* v, const Item& item) {
  v[0] = static_cast<char>(kValueVersion);
  put_le(v + 1, item.key);
  put_le(v + 9, static_cast<std::uint64_t>(item.value));
  put_le(v + 17, static_cast<std::uint64_t>(item.time));
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// An effects database has the marker; an empty one gets it; anything else is refused.
void check_marker(rocksdb::DB& db, const std::string& path, bool writable, bool sync) {
  std::string format;
  const rocksdb::Status m = db.Get(rocksdb::ReadOptions(), kMetaKey, &format);
  if (m.ok()) {
    if (format != kMetaFormat) {
      throw ConfigError("effects database '" + path + "' has format '" + format + "', this program reads format '" +
                        kMetaFormat + "'");
    }
    return;
  }
  if (!m.IsNotFound()) throw ConfigError("effects database '" + path + "': cannot read: " + m.ToString());
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
  it->SeekToFirst();
  if (it->Valid()) {
    throw ConfigError("effects database '" + path +
                      "': the directory holds a RocksDB database that is not an afstream effects table");
  }
  if (!writable) return;  // an empty database: no effects
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  const rocksdb::Status w = db.Put(wo, kMetaKey, kMetaFormat);
  if (!w.ok()) throw ConfigError("effects database '" + path + "': cannot initialise: " + w.ToString());
}

}  // namespace

EffectDb::EffectDb(std::string path, EffectDbOptions options) : path_(std::move(path)), options_(options) {
  if (path_.empty()) throw ConfigError("effects database: the path is empty");
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  rocksdb::Options o;
  o.create_if_missing = true;
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;  // a torn WAL tail: keep the prefix
  o.keep_log_file_num = 2;
  // The sink only writes (readers open their own read-only view): a vector memtable appends each write and sorts
  // once when it is flushed, instead of a skip-list insert per effect.
  o.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  o.allow_concurrent_memtable_write = false;  // only the skip list supports it
  o.compression = rocksdb::kNoCompression;    // 38-byte records of random keys: little to gain, CPU to lose
  // Closing does not flush the memtable into a table file: the write-ahead log holds every write, and whoever
  // opens the database next replays it.
  o.avoid_flush_during_shutdown = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.lock_wait_ms);
  for (;;) {
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(o, path_, &raw);
    if (s.ok()) {
      db_.reset(raw);
      break;
    }
    // The lock of a killed incarnation is released when its process is gone: wait for that, not for ever.
    const bool locked = s.IsIOError() && s.ToString().find("lock") != std::string::npos;
    if (!locked || std::chrono::steady_clock::now() >= deadline) {
      std::string msg = "effects database: cannot open RocksDB directory '" + path_ + "': " + s.ToString();
      if (ec) msg += " (creating the directory: " + ec.message() + ")";
      throw ConfigError(msg);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check_marker(*db_, path_, true, options_.sync);
}

EffectDb::~EffectDb() {
  if (db_) db_->Close();  // the write-ahead log already holds every write
}

void EffectDb::write(std::span<const Effect> effects) {
  if (effects.empty()) return;
  rocksdb::WriteBatch batch(0, 0, 0, 0);
  char key[kKeySize];
  char value[kValueSize];
  for (const auto& e : effects) {
    encode_key(key, e.channel, e.item.seq);
    encode_value(value, e.item);
    const rocksdb::Status s = batch.Put(rocksdb::Slice(key, kKeySize), rocksdb::Slice(value, kValueSize));
    if (!s.ok()) throw RuntimeError("effects database '" + path_ + "': cannot batch a write: " + s.ToString());
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  const rocksdb::Status s = db_->Write(wo, &batch);
  if (!s.ok()) throw RuntimeError("effects database '" + path_ + "': write failed: " + s.ToString());
}

void read_effects(const std::string& path, const std::function<void(const Effect&)>& fn) {
  if (!std::filesystem::is_directory(path)) {
    throw ConfigError("effects database '" + path + "': no such directory");
  }
  // A sink that never wrote leaves no database (it opens it at its first write), or one a killed incarnation was
  // still creating: no effects.
  if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT")) return;
  rocksdb::Options o;
  o.create_if_missing = false;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(o, path, &raw);
  if (!s.ok()) throw ConfigError("effects database: cannot open '" + path + "' to read: " + s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  check_marker(*db, path, false, false);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(rocksdb::Slice(&kEffectPrefix, 1)); it->Valid(); it->Next()) {
    const auto k = it->key();
    if (k.size() == 0 || k[0] != kEffectPrefix) break;
    const auto v = it->value();
    if (k.size() != kKeySize || v.size() != kValueSize || static_cast<std::uint8_t>(v[0]) != kValueVersion) {
      throw FormatError("effects database '" + path + "': a record of " + std::to_string(k.size()) + "-byte key and " +
                        std::to_string(v.size()) + "-byte value is not an effect (expected " +
                        std::to_string(kKeySize) + " and " + std::to_string(kValueSize) + ", version " +
                        std::to_string(kValueVersion) + ")");
    }
    Effect e;
    e.channel = static_cast<std::uint32_t>(get_be(k.data() + 1, 4));
    e.item.seq = get_be(k.data() + 5, 8);
    e.item.key = get_le(v.data() + 1);
    e.item.value = static_cast<std::int64_t>(get_le(v.data() + 9));
    e.item.time = static_cast<std::int64_t>(get_le(v.data() + 17));
    fn(e);
  }
  if (!it->status().ok()) {
    throw RuntimeError("effects database '" + path + "': reading failed: " + it->status().ToString());
  }
  it.reset();  // before the database it reads
  db->Close();
}

std::string part_path(const std::string& dir, int instance) {
  return (std::filesystem::path(dir) / ("part-" + std::to_string(instance))).string();
}

void read_effect_parts(const std::string& dir, const std::function<void(const Effect&)>& fn) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw ConfigError("effects directory '" + dir + "': no such directory");
  std::vector<std::string> parts;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("part-", 0) == 0) parts.push_back(entry.path().string());
  }
  if (ec) throw ConfigError("effects directory '" + dir + "': cannot list: " + ec.message());
  if (parts.empty()) throw ConfigError("effects directory '" + dir + "': no part-* database in it");
  std::sort(parts.begin(), parts.end());
  for (const auto& p : parts) read_effects(p, fn);
}

std::uint64_t effect_digest(const Effect& e) {
  std::uint64_t h = mix(e.channel);
  h = mix(h ^ e.item.seq);
  h = mix(h ^ e.item.key);
  h = mix(h ^ static_cast<std::uint64_t>(e.item.value));
  return mix(h ^ static_cast<std::uint64_t>(e.item.time));
}

EffectCheck check_effects(const std::function<void(const std::function<void(const Effect&)>&)>& enumerate,
                          std::uint64_t expected, const std::function<Item(std::uint64_t)>& expected_at) {
  EffectCheck c;
  c.expected = expected;
  std::vector<std::uint32_t> seen(expected, 0);  // effects of the right contents per stream position
  struct ChannelSeqs {
    std::uint64_t count = 0;
    std::uint64_t max_seq = 0;
  };
  std::map<std::uint32_t, ChannelSeqs> channels;
  enumerate([&](const Effect& e) {
    ++c.records;
    c.digest += effect_digest(e);
    auto& ch = channels[e.channel];
    ++ch.count;
    ch.max_seq = std::max(ch.max_seq, e.item.seq);
    if (e.item.time < 0 || static_cast<std::uint64_t>(e.item.time) >= expected) {
      ++c.wrong;
      return;
    }
    const auto p = static_cast<std::uint64_t>(e.item.time);
    const Item want = expected_at(p);
    if (want.key != e.item.key || want.value != e.item.value) {
      ++c.wrong;
      return;
    }
    if (seen[p]++ > 0) ++c.duplicates;
  });
  for (const auto n : seen) {
    if (n > 0) {
      ++c.present;
    } else {
      ++c.missing;
    }
  }
  // Sequence numbers start at 1 on every channel; a table keyed by them holds each at most once.
  for (const auto& [channel, s] : channels) c.seq_gaps += s.max_seq - std::min(s.max_seq, s.count);
  return c;
}

}  // namespace afs::sinks
