// Durable backup store on RocksDB: key and value encoding, the in-memory index rebuilt on open, and the atomic
// write batches behind every put (see rocksdb_store.h for the layout and what survives what).
#include "afstream/store/rocksdb_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>

#include "afstream/core/errors.h"
#include "afstream/state/snapshot.h"
#include "afstream/store/crc32c.h"

// RocksDB's CRC-32C, defined in the program so that the dynamic linker binds librocksdb's calls here (see
// crc32c.h): the same checksums, with the crc32 instruction instead of Debian's portable build's tables. x86-64 only
// (elsewhere librocksdb's own tables are faster than crc32c.cc's). Each call is counted for
// `RocksDbStore.LibrocksdbsChecksumsRunOnTheCrc32Instruction`, which checks that the binding holds.
#if defined(__x86_64__)
namespace rocksdb::crc32c {
std::uint32_t Extend(std::uint32_t init_crc, const char* data, std::size_t n) {
  afs::count_rocksdb_crc32c_call();
  return afs::crc32c_extend(init_crc, data, n);
}
}  // namespace rocksdb::crc32c
#endif

namespace afs {
namespace {

constexpr std::uint8_t kStateKind = 1;
constexpr std::uint8_t kItemsKind = 2;
constexpr std::uint8_t kValueFormatVersion = 1;
constexpr std::size_t kKeySize = 4 + 1 + 8;
constexpr std::size_t kChecksumSize = 8;
constexpr std::size_t kStateHeaderSize = kChecksumSize + 1 + 1 + 1;       // checksum | version | kind | full
constexpr std::size_t kItemsFixedHeaderSize = kChecksumSize + 1 + 1 + 4;  // checksum | version | kind | count
constexpr std::size_t kItemInfoSize = 4 + 8 + 8;
constexpr std::uint8_t kReferenceFormatVersion = 2;  // a state record in a value file: the value is a reference
constexpr std::size_t kReferenceSize = kChecksumSize + 1 + 1 + 1 + 8 + 8 + 8 + 8;  // header | file | at | size | xxh3
const char* const kValuesDir = "state-values";

// The format marker: a key no record can have (kind 0), written when a store is created.
const std::string kMetaKey = std::string(5, '\0') + "afstream-backup-store";
// Format 2 may hold references to value files (format version 2 values), which format 1's readers do not know; a
// format 1 store is read as it is and marked format 2 by its first batch with a reference.
const std::string kMetaFormat = "2";
const std::string kMetaFormatWithoutValueFiles = "1";
// The checkpoint ledger (checkpoint mode), one value beside the records (kind 0 too).
const std::string kLedgerKey = std::string(5, '\0') + "afstream-checkpoint-ledger";

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_be(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

// The sign bit is flipped so that negative workers sort before non-negative ones.
std::uint32_t worker_bits(int worker) { return static_cast<std::uint32_t>(worker) ^ 0x80000000u; }
int worker_of_bits(std::uint32_t bits) { return static_cast<int>(bits ^ 0x80000000u); }

std::string record_key(int worker, std::uint8_t kind, std::uint64_t counter) {
  std::string k;
  k.reserve(kKeySize);
  put_be(k, worker_bits(worker), 4);
  k.push_back(static_cast<char>(kind));
  put_be(k, counter, 8);
  return k;
}

std::uint64_t checksum_of(std::string_view bytes) {
  return checksum(std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

void seal(std::string& value) {
  const std::uint64_t sum = checksum_of(std::string_view(value).substr(kChecksumSize));
  for (std::size_t i = 0; i < kChecksumSize; ++i) value[i] = static_cast<char>((sum >> (8 * i)) & 0xff);
}

// A state record's value is this header followed by the record. The two go into the write batch as parts
// (rocksdb::SliceParts), so that the record is not first copied into a value of its own (for a KDD-like learner's
// 310 KB deltas that copy was about 7% of the backup server's main thread in a perf record of a run on processes).
struct StateHeader {
  std::array<std::uint8_t, kStateHeaderSize> bytes{};
  rocksdb::Slice slice() const { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }
};

StateHeader state_header(bool full, const Bytes& record) {
  StateHeader h;
  h.bytes[kChecksumSize] = kValueFormatVersion;
  h.bytes[kChecksumSize + 1] = kStateKind;
  h.bytes[kChecksumSize + 2] = full ? 1 : 0;
  const std::uint64_t sum = checksum(std::span(h.bytes).subspan(kChecksumSize), record);
  for (std::size_t i = 0; i < kChecksumSize; ++i) h.bytes[i] = static_cast<std::uint8_t>((sum >> (8 * i)) & 0xff);
  return h;
}

// batch.Put(key, header + record).
void put_inline_state(rocksdb::WriteBatch& batch, const std::string& key, bool full, const Bytes& record) {
  const StateHeader header = state_header(full, record);
  const rocksdb::Slice key_part(key);
  const rocksdb::Slice value_parts[2] = {header.slice(), {reinterpret_cast<const char*>(record.data()), record.size()}};
  batch.Put(rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(value_parts, 2));
}

// A state record kept in a value file: which file, where in it, and the size and xxh3 its bytes must have.
struct Reference {
  bool full = false;
  std::uint64_t file = 0;
  std::uint64_t at = 0;
  std::uint64_t size = 0;
  std::uint64_t digest = 0;
};

std::string reference_value(const Reference& r) {
  std::string v;
  v.reserve(kReferenceSize);
  v.append(kChecksumSize, '\0');
  v.push_back(static_cast<char>(kReferenceFormatVersion));
  v.push_back(static_cast<char>(kStateKind));
  v.push_back(static_cast<char>(r.full ? 1 : 0));
  put_le(v, r.file, 8);
  put_le(v, r.at, 8);
  put_le(v, r.size, 8);
  put_le(v, r.digest, 8);
  seal(v);
  return v;
}

std::string items_value(const std::vector<ItemRecordInfo>& infos, const Bytes& record) {
  std::string v;
  v.reserve(kItemsFixedHeaderSize + kItemInfoSize * infos.size() + record.size());
  v.append(kChecksumSize, '\0');
  v.push_back(static_cast<char>(kValueFormatVersion));
  v.push_back(static_cast<char>(kItemsKind));
  put_le(v, infos.size(), 4);
  for (const auto& info : infos) {
    put_le(v, info.channel, 4);
    put_le(v, info.first_seq, 8);
    put_le(v, info.last_seq, 8);
  }
  v.append(reinterpret_cast<const char*>(record.data()), record.size());
  seal(v);
  return v;
}

const char* what_of(std::uint8_t kind) { return kind == kStateKind ? "state backup" : "item backup"; }

// A verified value: the record bytes and, for item records, the infos; or, for a state record in a value file,
// its reference (record empty).
struct OpenedValue {
  std::string_view record;
  std::vector<ItemRecordInfo> infos;
  std::optional<Reference> reference;
};

// Verifies the checksum, the format version and the kind of a value; throws FormatError naming the worker and
// the record otherwise.
OpenedValue open_value(std::string_view v, std::uint8_t kind, const std::string& path, int worker,
                       std::uint64_t counter) {
  auto fail = [&](const std::string& why) {
    return FormatError("backup store '" + path + "': corrupt " + std::string(what_of(kind)) + " #" +
                       std::to_string(counter) + " of worker " + std::to_string(worker) + " (" + why +
                       "); it will not be restored");
  };
  const std::size_t fixed = kind == kStateKind ? kStateHeaderSize : kItemsFixedHeaderSize;
  if (v.size() < fixed) {
    throw fail("truncated: " + std::to_string(v.size()) + " bytes, shorter than its " + std::to_string(fixed) +
               "-byte header");
  }
  if (get_le(v.data(), 8) != checksum_of(v.substr(kChecksumSize))) throw fail("checksum mismatch");
  const auto version = static_cast<std::uint8_t>(v[kChecksumSize]);
  if (version == kReferenceFormatVersion && kind == kStateKind) {
    if (static_cast<std::uint8_t>(v[kChecksumSize + 1]) != kind) throw fail("wrong record kind");
    if (v.size() != kReferenceSize) throw fail("a value file reference of " + std::to_string(v.size()) + " bytes");
    OpenedValue out;
    const char* p = v.data() + kStateHeaderSize;
    out.reference =
        Reference{v[kChecksumSize + 2] != 0, get_le(p, 8), get_le(p + 8, 8), get_le(p + 16, 8), get_le(p + 24, 8)};
    return out;
  }
  if (version != kValueFormatVersion) {
    throw fail("unsupported record format version " + std::to_string(version) + ", expected " +
               std::to_string(kValueFormatVersion) +
               (kind == kStateKind ? " or " + std::to_string(kReferenceFormatVersion) : std::string()));
  }
  if (static_cast<std::uint8_t>(v[kChecksumSize + 1]) != kind) throw fail("wrong record kind");
  OpenedValue out;
  if (kind == kStateKind) {
    out.record = v.substr(kStateHeaderSize);
    return out;
  }
  const std::uint64_t count = get_le(v.data() + kChecksumSize + 2, 4);
  if (count > (v.size() - fixed) / kItemInfoSize) throw fail("item infos run past the end");
  out.infos.reserve(count);
  const char* p = v.data() + fixed;
  for (std::uint64_t i = 0; i < count; ++i, p += kItemInfoSize) {
    out.infos.push_back({static_cast<std::uint32_t>(get_le(p, 4)), get_le(p + 4, 8), get_le(p + 12, 8)});
  }
  out.record = v.substr(fixed + count * kItemInfoSize);
  return out;
}

std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

// RocksDB's info log (its LOG file in the store's directory), written with stdio, whose write errors are ignored:
// RocksDB's own file logger asserted on a write after a failed one (Debian's librocksdb keeps assertions on), and a
// full disk made the backup server abort while it logged the error it was about to return. At most kMaxLogBytes.
// Called from RocksDB's background threads too: one line per call, under a lock. The file starts anew at each open,
// once the open has succeeded (start()): RocksDB logs before it takes its lock, and a refused open (the store open
// elsewhere, or another program's database) wrote over the LOG of the store, or of the database, it was refused.
// Until then lines are kept in memory (at most kMaxPendingBytes).
class StoreInfoLog final : public rocksdb::Logger {
 public:
  explicit StoreInfoLog(std::string path) : path_(std::move(path)) {}
  ~StoreInfoLog() override {
    if (file_) std::fclose(file_);
  }
  // The open succeeded: the LOG starts anew with the lines logged so far.
  void start() {
    const std::lock_guard lock(mu_);
    if (started_) return;
    started_ = true;
    file_ = std::fopen(path_.c_str(), "w");
    if (file_) written_ += std::fwrite(pending_.data(), 1, pending_.size(), file_);
    pending_.clear();
    pending_.shrink_to_fit();
  }
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    const int n = std::vsnprintf(line, sizeof line - 1, format, ap);
    if (n < 0) return;
    std::size_t len = std::min(static_cast<std::size_t>(n), sizeof line - 2);
    line[len++] = '\n';
    const std::lock_guard lock(mu_);
    if (!started_) {
      if (pending_.size() < kMaxPendingBytes) pending_.append(line, len);
      return;
    }
    if (!file_ || written_ > kMaxLogBytes) return;
    written_ += std::fwrite(line, 1, len, file_);
  }
  void Flush() override {
    const std::lock_guard lock(mu_);
    if (file_) std::fflush(file_);
  }

 private:
  static constexpr std::size_t kMaxLogBytes = std::size_t{64} << 20;
  static constexpr std::size_t kMaxPendingBytes = std::size_t{1} << 20;
  std::mutex mu_;
  const std::string path_;
  bool started_ = false;
  std::string pending_;
  std::FILE* file_ = nullptr;
  std::size_t written_ = 0;
};

// Logs nothing: the read-only look at a database before a writable open (RocksDbStore::RocksDbStore).
class DiscardInfoLog final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

// The store's format marker in db; nullopt for an empty database (a new store). ConfigError for a database that holds
// data without the marker (another program's) or cannot be read.
std::optional<std::string> format_marker(rocksdb::DB& db, const std::string& path) {
  std::string format;
  const rocksdb::Status m = db.Get(rocksdb::ReadOptions(), kMetaKey, &format);
  if (m.ok()) return format;
  if (!m.IsNotFound()) {
    throw ConfigError("backup store: cannot read RocksDB directory '" + path + "': " + m.ToString());
  }
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
  it->SeekToFirst();
  if (it->Valid()) {
    throw ConfigError("backup store: RocksDB directory '" + path +
                      "' holds data but is not an afstream backup store (no format marker)");
  }
  if (!it->status().ok()) {
    throw ConfigError("backup store: cannot read RocksDB directory '" + path + "': " + it->status().ToString());
  }
  return std::nullopt;
}

std::string hex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    out.push_back(digits[static_cast<std::uint8_t>(c) >> 4]);
    out.push_back(digits[static_cast<std::uint8_t>(c) & 0xf]);
  }
  return out;
}

}  // namespace

RocksDbStore::RocksDbStore(std::string path, RocksDbStoreOptions options) : path_(std::move(path)), options_(options) {
  if (path_.empty()) throw ConfigError("backup store: the RocksDB directory path is empty");
  // RocksDB creates only the last component of the path; create the parents too. If that fails, RocksDB's own
  // error below names the problem, with this one added.
  std::error_code ec;
  // A directory that holds other files than a store's is not one: opened, RocksDB would add its files among them,
  // rewrite a file named LOG, and the value-file sweep remove files under state-values/. A store's own names are
  // RocksDB's and state-values/ (an open that failed early may have left only LOCK and LOG).
  if (std::filesystem::is_directory(path_, ec) && !std::filesystem::exists(path_ + "/CURRENT", ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) {
      const std::string name = e.path().filename().string();
      const bool ours = name == "LOCK" || name == "LOG" || name.starts_with("LOG.old") || name == "IDENTITY" ||
                        name.starts_with("MANIFEST-") || name.starts_with("OPTIONS-") || name.ends_with(".log") ||
                        name.ends_with(".sst") || name.ends_with(".dbtmp") || name == kValuesDir;
      if (ours) continue;
      throw ConfigError("backup store: directory '" + path_ + "' holds '" + name +
                        "', not a file of an afstream backup store (and no RocksDB database): give a new or empty "
                        "directory");
    }
  }
  std::filesystem::create_directories(path_, ec);

  rocksdb::Options o;
  o.create_if_missing = true;
  // A torn last record of the write-ahead log (a crash while writing it) is dropped; a corruption before it refuses
  // the open: kPointInTimeRecovery stopped the replay there without a word, silently rolling back every later put
  // (acknowledged backups) and then sweeping value files only they referenced.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  // A database this program has never opened as a store (no state-values/: every store has it from its first open)
  // is looked at read-only first: a writable open of another program's database replays its write-ahead log into a
  // new table and writes a new MANIFEST before the format marker can be read, so it was no longer as it was when
  // refused. (A store of format 1, before value files, has its marker and is then opened as before.)
  std::error_code probe_ec;
  if (std::filesystem::exists(path_ + "/CURRENT", probe_ec) &&
      !std::filesystem::exists(path_ + "/" + kValuesDir, probe_ec)) {
    rocksdb::Options ro_options;
    ro_options.info_log = std::make_shared<DiscardInfoLog>();
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(ro_options, path_, &raw);
    if (!s.ok()) throw ConfigError("backup store: cannot open RocksDB directory '" + path_ + "': " + s.ToString());
    const std::unique_ptr<rocksdb::DB> probe(raw);
    (void)format_marker(*probe, path_);
  }
  const auto info_log = std::make_shared<StoreInfoLog>(path_ + "/LOG");
  o.info_log = info_log;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(o, path_, &raw);
  if (!s.ok()) {
    std::string msg = "backup store: cannot open RocksDB directory '" + path_ + "': " + s.ToString();
    if (ec) msg += " (creating the directory: " + ec.message() + ")";
    throw ConfigError(msg);
  }
  db_.reset(raw);
  info_log->start();

  const std::optional<std::string> format = format_marker(*db_, path_);
  if (!format) {
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    const rocksdb::Status w = db_->Put(wo, kMetaKey, kMetaFormat);
    if (!w.ok()) {
      throw ConfigError("backup store: cannot initialise RocksDB directory '" + path_ + "': " + w.ToString());
    }
  } else if (*format == kMetaFormatWithoutValueFiles) {
    format_1_ = true;  // marked format 2 by the first batch that writes a reference
  } else if (*format != kMetaFormat) {
    throw ConfigError("backup store: RocksDB directory '" + path_ + "' has backup store format '" + *format +
                      "', this program reads formats '" + kMetaFormatWithoutValueFiles + "' and '" + kMetaFormat + "'");
  }
  values_dir_ = path_ + "/" + kValuesDir;
  std::filesystem::create_directories(values_dir_, ec);
  if (ec) {
    throw ConfigError("backup store: cannot create the value file directory '" + values_dir_ + "': " + ec.message());
  }
  load_index();
  remove_unreferenced_value_files();
}

RocksDbStore::~RocksDbStore() {
  if (!db_) return;
  remove_retired_value_files();
  db_->Close();  // best effort: the write-ahead log already holds every put
}

void RocksDbStore::load_index() {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view key = view(it->key());
    if (key == kMetaKey) continue;
    if (key == kLedgerKey) {
      const auto v = view(it->value());
      try {
        ledger_ = CheckpointLedger::decode(Bytes(v.begin(), v.end()));
      } catch (const FormatError& e) {
        throw FormatError("backup store: RocksDB directory '" + path_ + "': " + e.what());
      }
      continue;
    }
    const auto kind = key.size() == kKeySize ? static_cast<std::uint8_t>(key[4]) : std::uint8_t{0};
    if (kind != kStateKind && kind != kItemsKind) {
      throw FormatError("backup store: RocksDB directory '" + path_ + "' holds an unexpected key 0x" + hex(key) +
                        " (not an afstream backup record)");
    }
    const int worker = worker_of_bits(static_cast<std::uint32_t>(get_be(key.data(), 4)));
    const std::uint64_t counter = get_be(key.data() + 5, 8);
    const std::string_view value = view(it->value());
    WorkerIndex& w = index_[worker];
    w.next_counter = std::max(w.next_counter, counter + 1);
    if (kind == kStateKind) {
      StateEntry e{counter, value.size() - std::min(value.size(), kStateHeaderSize), 0};
      if (value.size() > kChecksumSize && static_cast<std::uint8_t>(value[kChecksumSize]) == kReferenceFormatVersion) {
        e.size = 0;  // a corrupt reference: reading it reports the corruption
        try {
          const Reference r = *open_value(value, kStateKind, path_, worker, counter).reference;
          e.size = r.size;
          e.file = r.file;
          e.at = r.at;
          next_file_ = std::max(next_file_, r.file + 1);
        } catch (const FormatError&) {
        }
      }
      w.chain.push_back(e);
      stats_.bytes_stored += e.size;
    } else {
      ItemEntry e;
      e.counter = counter;
      try {
        OpenedValue opened = open_value(value, kItemsKind, path_, worker, counter);
        e.size = opened.record.size();
        e.infos = std::move(opened.infos);
      } catch (const FormatError&) {
        // Its infos cannot be trusted, so it is never trimmed; reading it reports the corruption.
        // Its size is what the header claims if that fits, so that drop subtracts what was added here.
        e.infos_known = false;
        e.size = value.size() - std::min(value.size(), kItemsFixedHeaderSize);
        if (value.size() >= kItemsFixedHeaderSize) {
          const std::uint64_t count = get_le(value.data() + kChecksumSize + 2, 4);
          if (count <= e.size / kItemInfoSize) e.size -= count * kItemInfoSize;
        }
      }
      stats_.bytes_stored += e.size;
      w.items.push_back(std::move(e));
    }
  }
  if (!it->status().ok()) {
    throw ConfigError("backup store: cannot read RocksDB directory '" + path_ + "': " + it->status().ToString());
  }
  for (auto& entry : index_) entry.second.generation = next_generation_++;
}

std::string RocksDbStore::value_file_path(std::uint64_t file) const { return values_dir_ + "/" + std::to_string(file); }

// Files named by a number that no reference names are left over from a crash (written but their batch not, or a
// batch written but the files it released not yet removed) and are removed. Other names are not the store's.
void RocksDbStore::remove_unreferenced_value_files() {
  for (const auto& [worker, w] : index_) {
    for (const auto& e : w.chain) {
      if (e.file != 0) ++file_refs_[e.file];
    }
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(values_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    std::uint64_t file = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), file);
    if (err != std::errc() || end != name.data() + name.size() || file == 0) continue;
    next_file_ = std::max(next_file_, file + 1);
    if (!file_refs_.contains(file)) remove_value_file(file);
  }
  if (ec) {
    throw ConfigError("backup store: cannot list the value file directory '" + values_dir_ + "': " + ec.message());
  }
}

// Best effort: a file left behind is removed on the next open.
void RocksDbStore::remove_value_file(std::uint64_t file) const {
  if (file != 0) ::unlink(value_file_path(file).c_str());
}

// A file no record names any more goes once the batch that released it is on disk: with sync that is now; without,
// the files wait for one fsync of the write-ahead log for many of them (a machine crash could otherwise bring back a
// reference to a file already gone). At most kRetiredBytesMax bytes or kRetiredFilesMax files of them wait.
void RocksDbStore::retire_value_file(std::uint64_t file) {
  if (options_.sync) {
    remove_value_file(file);
    return;
  }
  retired_.push_back(file);
  std::error_code ec;
  retired_bytes_ += std::filesystem::file_size(value_file_path(file), ec);
  if (retired_bytes_ >= kRetiredBytesMax || retired_.size() >= kRetiredFilesMax) remove_retired_value_files();
}

void RocksDbStore::remove_retired_value_files() {
  if (retired_.empty()) return;
  if (!db_->SyncWAL().ok()) return;  // they wait for the next try (or the next open)
  for (const std::uint64_t f : retired_) remove_value_file(f);
  retired_.clear();
  retired_bytes_ = 0;
}

// One reference fewer to file: with none left it goes, unless its worker still appends to it.
void RocksDbStore::release_value_file(const WorkerIndex& w, std::uint64_t file) {
  if (file == 0) return;
  auto it = file_refs_.find(file);
  if (it == file_refs_.end() || --it->second > 0) return;
  file_refs_.erase(it);
  if (file != w.append_file) retire_value_file(file);
}

// The worker's records go to `file` from now on (0: to a new file at the next large record); the file it appended to
// before goes if no reference names it.
void RocksDbStore::set_append_file(WorkerIndex& w, std::uint64_t file, std::uint64_t at) {
  const std::uint64_t old = w.append_file;
  w.append_file = file;
  w.append_at = at;
  if (old != 0 && old != file && !file_refs_.contains(old)) retire_value_file(old);
}

RocksDbStore::ValueWrite RocksDbStore::write_value(int worker, const WorkerIndex& w, bool new_file,
                                                   const Bytes& record) {
  ValueWrite out;
  out.created = new_file || w.append_file == 0;
  out.file = out.created ? next_file_++ : w.append_file;
  out.at = out.created ? 0 : w.append_at;
  const std::string path = value_file_path(out.file);
  auto fail = [&](const std::string& what) {
    return RuntimeError("backup store '" + path_ + "': put_state of worker " + std::to_string(worker) + ": " + what +
                        " value file '" + path + "' failed: " + std::strerror(errno));
  };
  const int fd = out.created ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)
                             : ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw fail(out.created ? "creating" : "opening");
  auto give_up = [&](const std::string& what) {
    const RuntimeError e = fail(what);
    ::close(fd);
    if (out.created) ::unlink(path.c_str());  // else the bytes past the last reference are written over next time
    return e;
  };
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::pwrite(fd, record.data() + done, record.size() - done, static_cast<off_t>(out.at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      throw give_up("writing");
    }
    done += static_cast<std::size_t>(n);
  }
  if (options_.sync && ::fdatasync(fd) != 0) throw give_up("syncing");
  ::close(fd);
  if (options_.sync && out.created) {  // the file's name too, before a reference to it can be durable
    const int dir = ::open(values_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = dir >= 0 && ::fsync(dir) == 0;
    if (dir >= 0) ::close(dir);
    if (!synced) {
      const RuntimeError e = fail("syncing the directory of");
      ::unlink(path.c_str());
      throw e;
    }
  }
  return out;
}

std::optional<RocksDbStore::ValueWrite> RocksDbStore::put_state_value(rocksdb::WriteBatch& batch, int worker,
                                                                      const WorkerIndex& w, std::uint64_t counter,
                                                                      bool full, bool new_file, const Bytes& record) {
  const std::string key = record_key(worker, kStateKind, counter);
  if (options_.value_file_min_bytes == 0 || record.empty() || record.size() < options_.value_file_min_bytes) {
    put_inline_state(batch, key, full, record);
    return std::nullopt;
  }
  const ValueWrite v = write_value(worker, w, new_file, record);
  batch.Put(key, reference_value({full, v.file, v.at, record.size(), checksum(record)}));
  return v;
}

// Writes the batch that references `value` (if any), which then counts one more record and takes the worker's next
// ones. If the batch fails, a file the value created goes; the worker's next record goes after bytes it appended.
void RocksDbStore::write_with_value(rocksdb::WriteBatch& batch, const char* operation, int worker, WorkerIndex& w,
                                    const std::optional<ValueWrite>& value, std::uint64_t size) {
  if (value && format_1_) batch.Put(kMetaKey, kMetaFormat);  // the store holds references from now on
  try {
    write(batch, operation, worker);
  } catch (...) {
    if (value && value->created) {
      remove_value_file(value->file);
    } else if (value) {
      w.append_at = value->at + size;  // never over bytes a batch may have named after all
    }
    throw;
  }
  if (value && format_1_) format_1_ = false;
  if (value) {
    ++file_refs_[value->file];
    set_append_file(w, value->file, value->at + size);
  }
}

void RocksDbStore::write(rocksdb::WriteBatch& batch, const char* operation, int worker) {
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  const rocksdb::Status s = db_->Write(wo, &batch);
  if (!s.ok()) {
    throw RuntimeError("backup store '" + path_ + "': " + operation + " of worker " + std::to_string(worker) +
                       " failed: " + s.ToString());
  }
}

ChainInfo RocksDbStore::info_of(const WorkerIndex& w) {
  ChainInfo info;
  info.generation = w.generation;
  info.length = w.chain.size();
  for (std::size_t i = 0; i < w.chain.size(); ++i) (i == 0 ? info.full_bytes : info.delta_bytes) += w.chain[i].size;
  return info;
}

ChainInfo RocksDbStore::put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) {
  std::lock_guard lock(mu_);
  WorkerIndex& w = index_[worker];
  rocksdb::WriteBatch batch;
  std::uint64_t dropped_bytes = 0;
  if (full) {
    for (const auto& s : w.chain) {
      batch.Delete(record_key(worker, kStateKind, s.counter));
      dropped_bytes += s.size;
    }
  }
  const std::uint64_t counter = w.next_counter;
  // A new chain starts a new file: the old chain's file goes whole once the new full record is written.
  const auto value = put_state_value(batch, worker, w, counter, full, full, record);
  // Drop item records wholly covered by this state, in the same batch.
  std::vector<bool> trimmed(w.items.size(), false);
  for (std::size_t i = 0; i < w.items.size(); ++i) {
    const ItemEntry& e = w.items[i];
    if (!e.infos_known) continue;
    bool covered_all = true;
    for (const auto& info : e.infos) {
      auto c = covered.find(info.channel);
      if (c == covered.end() || c->second < info.last_seq) {
        covered_all = false;
        break;
      }
    }
    if (covered_all) {
      trimmed[i] = true;
      batch.Delete(record_key(worker, kItemsKind, e.counter));
      dropped_bytes += e.size;
    }
  }
  write_with_value(batch, "put_state", worker, w, value, record.size());

  // Written: update the index to match.
  if (!value && full) set_append_file(w, 0, 0);
  if (full) {
    for (const auto& s : w.chain) release_value_file(w, s.file);
  }
  w.next_counter = counter + 1;
  if (full || w.generation == 0) {
    w.chain.clear();
    w.generation = next_generation_++;
  }
  w.chain.push_back({counter, record.size(), value ? value->file : 0, value ? value->at : 0});
  std::deque<ItemEntry> kept;
  for (std::size_t i = 0; i < w.items.size(); ++i) {
    if (!trimmed[i]) kept.push_back(std::move(w.items[i]));
  }
  w.items = std::move(kept);
  stats_.state_backups++;
  stats_.bytes_written += record.size();
  stats_.bytes_stored = stats_.bytes_stored - dropped_bytes + record.size();
  return info_of(w);
}

bool RocksDbStore::compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) {
  std::lock_guard lock(mu_);
  auto it = index_.find(worker);
  if (it == index_.end() || count == 0) return false;
  WorkerIndex& w = it->second;
  if (w.generation != generation || w.chain.size() < count) return false;
  rocksdb::WriteBatch batch;
  std::uint64_t dropped_bytes = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (i + 1 < count) batch.Delete(record_key(worker, kStateKind, w.chain[i].counter));
    dropped_bytes += w.chain[i].size;
  }
  const std::uint64_t counter = w.chain[count - 1].counter;
  // The compacted record starts a new file, which the deltas after it then follow: the files of the records it
  // replaces go as soon as no record names them.
  const auto value = put_state_value(batch, worker, w, counter, true, true, full);
  write_with_value(batch, "compact_state", worker, w, value, full.size());
  for (std::uint64_t i = 0; i < count; ++i) release_value_file(w, w.chain[i].file);
  w.chain.erase(w.chain.begin(), w.chain.begin() + static_cast<std::ptrdiff_t>(count - 1));
  w.chain.front() = {counter, full.size(), value ? value->file : 0, value ? value->at : 0};
  w.generation = next_generation_++;
  stats_.bytes_stored = stats_.bytes_stored - dropped_bytes + full.size();
  return true;
}

void RocksDbStore::put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) {
  if (infos.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw RuntimeError("backup store '" + path_ + "': put_items of worker " + std::to_string(worker) + ": " +
                       std::to_string(infos.size()) + " item infos in one record, at most 2^32 - 1");
  }
  std::lock_guard lock(mu_);
  WorkerIndex& w = index_[worker];
  const std::uint64_t counter = w.next_counter;
  rocksdb::WriteBatch batch;
  batch.Put(record_key(worker, kItemsKind, counter), items_value(infos, record));
  write(batch, "put_items", worker);

  w.next_counter = counter + 1;
  w.items.push_back({counter, record.size(), std::move(infos), true});
  stats_.item_backups++;
  stats_.bytes_written += record.size();
  stats_.bytes_stored += record.size();
}

// Item records need no lock: a RocksDB iterator sees one consistent snapshot, and every put is one atomic batch, so a
// concurrent put shows either wholly or not at all. State records do (state_chain).
std::vector<Bytes> RocksDbStore::item_records(int worker) const {
  constexpr std::uint8_t kind = kItemsKind;
  const std::string lower = record_key(worker, kind, 0);
  const std::string upper = record_key(worker, static_cast<std::uint8_t>(kind + 1), 0);
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  std::vector<Bytes> out;
  for (it->Seek(lower); it->Valid(); it->Next()) {
    const std::string_view key = view(it->key());
    const OpenedValue opened = open_value(view(it->value()), kind, path_, worker, get_be(key.data() + 5, 8));
    out.emplace_back(opened.record.begin(), opened.record.end());
  }
  if (!it->status().ok()) {
    throw RuntimeError("backup store '" + path_ + "': reading the " + what_of(kind) + "s of worker " +
                       std::to_string(worker) + " failed: " + it->status().ToString());
  }
  return out;
}

namespace {

// The value files a read opened under the lock, each once (a chain may name one file a thousand times), closed when
// the read ends.
class OpenFiles {
 public:
  OpenFiles() = default;
  OpenFiles(const OpenFiles&) = delete;
  OpenFiles& operator=(const OpenFiles&) = delete;
  ~OpenFiles() {
    for (const auto& [file, f] : files_) {
      if (f.fd >= 0) ::close(f.fd);
    }
  }
  void open(std::uint64_t file, const std::string& path) {
    if (files_.contains(file)) return;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    files_[file] = {fd, fd < 0 ? errno : 0};
  }
  // The file's descriptor, or -1 with the open's errno.
  std::pair<int, int> get(std::uint64_t file) const {
    const auto& f = files_.at(file);
    return {f.fd, f.error};
  }

 private:
  struct Opened {
    int fd = -1;
    int error = 0;
  };
  std::unordered_map<std::uint64_t, Opened> files_;
};

}  // namespace

// A state record as read under the lock: the record itself, or its reference.
struct RocksDbStore::PendingState {
  std::uint64_t counter = 0;
  Bytes record;
  std::optional<Reference> reference;
};

// The chain's references are read and their files opened under the lock, so that no put removes a file between the
// two (an open file stays readable once removed); the files are read after it is released.
std::vector<Bytes> RocksDbStore::state_chain(int worker, ChainInfo* info) const {
  std::vector<PendingState> pending;
  OpenFiles files;
  {
    std::lock_guard lock(mu_);
    const std::string lower = record_key(worker, kStateKind, 0);
    const std::string upper = record_key(worker, kItemsKind, 0);
    const rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    for (it->Seek(lower); it->Valid(); it->Next()) {
      PendingState p;
      p.counter = get_be(it->key().data() + 5, 8);
      OpenedValue opened = open_value(view(it->value()), kStateKind, path_, worker, p.counter);
      if (opened.reference) {
        p.reference = opened.reference;
        files.open(p.reference->file, value_file_path(p.reference->file));
      } else {
        p.record.assign(opened.record.begin(), opened.record.end());
      }
      pending.push_back(std::move(p));
    }
    if (!it->status().ok()) {
      throw RuntimeError("backup store '" + path_ + "': reading the state backups of worker " + std::to_string(worker) +
                         " failed: " + it->status().ToString());
    }
    if (info) {
      *info = {};
      auto w = index_.find(worker);
      if (w != index_.end()) *info = info_of(w->second);
    }
  }
  std::vector<Bytes> out;
  out.reserve(pending.size());
  for (PendingState& p : pending) {
    if (!p.reference) {
      out.push_back(std::move(p.record));
      continue;
    }
    const Reference& r = *p.reference;
    const std::string path = value_file_path(r.file);
    auto fail = [&](const std::string& why) {
      return FormatError("backup store '" + path_ + "': corrupt state backup #" + std::to_string(p.counter) +
                         " of worker " + std::to_string(worker) + " (its value file '" + path + "' " + why +
                         "); it will not be restored");
    };
    const auto [fd, open_error] = files.get(r.file);
    if (fd < 0 && open_error == ENOENT) throw fail("is missing");
    if (fd < 0) {
      throw RuntimeError("backup store '" + path_ + "': reading state backup #" + std::to_string(p.counter) +
                         " of worker " + std::to_string(worker) + ": cannot open its value file '" + path +
                         "': " + std::strerror(open_error));
    }
    Bytes record(r.size);
    std::size_t done = 0;
    while (done < record.size()) {
      const ssize_t n = ::pread(fd, record.data() + done, record.size() - done, static_cast<off_t>(r.at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        throw RuntimeError("backup store '" + path_ + "': reading state backup #" + std::to_string(p.counter) +
                           " of worker " + std::to_string(worker) + " from its value file '" + path +
                           "' failed: " + std::strerror(errno));
      }
      if (n == 0) {
        throw fail("ends " + std::to_string(r.size - done) + " bytes short of the record's " + std::to_string(r.size) +
                   " bytes at offset " + std::to_string(r.at));
      }
      done += static_cast<std::size_t>(n);
    }
    if (checksum(record) != r.digest) throw fail("checksum mismatch at offset " + std::to_string(r.at));
    out.push_back(std::move(record));
  }
  return out;
}

ChainInfo RocksDbStore::chain_info(int worker) const {
  std::lock_guard lock(mu_);
  auto it = index_.find(worker);
  return it == index_.end() ? ChainInfo{} : info_of(it->second);
}

void RocksDbStore::drop(int worker) {
  std::lock_guard lock(mu_);
  if (ledger_ != CheckpointLedger()) {
    ledger_.clear(worker);
    save_ledger("drop", worker);
  }
  auto it = index_.find(worker);
  if (it == index_.end()) return;
  rocksdb::WriteBatch batch;
  std::uint64_t dropped_bytes = 0;
  for (const auto& s : it->second.chain) {
    batch.Delete(record_key(worker, kStateKind, s.counter));
    dropped_bytes += s.size;
  }
  for (const auto& e : it->second.items) {
    batch.Delete(record_key(worker, kItemsKind, e.counter));
    dropped_bytes += e.size;
  }
  write(batch, "drop", worker);
  set_append_file(it->second, 0, 0);
  for (const auto& s : it->second.chain) release_value_file(it->second, s.file);
  stats_.bytes_stored -= dropped_bytes;
  index_.erase(it);
}

void RocksDbStore::save_ledger(const char* operation, int worker) {
  const Bytes b = ledger_.encode();
  rocksdb::WriteBatch batch;
  batch.Put(kLedgerKey, rocksdb::Slice(reinterpret_cast<const char*>(b.data()), b.size()));
  write(batch, operation, worker);
}

void RocksDbStore::confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final) {
  std::lock_guard lock(mu_);
  if (ledger_.confirm(worker, id, workers, final)) save_ledger("checkpoint confirmation", worker);
}

CheckpointStatus RocksDbStore::checkpoint_status() const {
  std::lock_guard lock(mu_);
  return ledger_.status();
}

CheckpointStatus RocksDbStore::rejoin_checkpoints(int worker) {
  std::lock_guard lock(mu_);
  const auto st = ledger_.rejoin(worker);
  save_ledger("checkpoint rejoin", worker);
  return st;
}

StoreStats RocksDbStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void RocksDbStore::corrupt_latest_state(int worker) {
  std::lock_guard lock(mu_);
  auto it = index_.find(worker);
  if (it == index_.end() || it->second.chain.empty()) return;
  if (const std::uint64_t file = it->second.chain.back().file; file != 0) {
    const int fd = ::open(value_file_path(file).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    const StateEntry& e = it->second.chain.back();
    const auto middle = static_cast<off_t>(e.at + e.size / 2);
    char c = 0;
    if (::pread(fd, &c, 1, middle) == 1) {
      c = static_cast<char>(c ^ 0x5a);
      (void)!::pwrite(fd, &c, 1, middle);
    }
    ::close(fd);
    return;
  }
  const std::string key = record_key(worker, kStateKind, it->second.chain.back().counter);
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (!s.ok()) {
    throw RuntimeError("backup store '" + path_ + "': corrupt_latest_state of worker " + std::to_string(worker) +
                       " failed: " + s.ToString());
  }
  if (value.empty()) return;
  value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x5a);
  rocksdb::WriteBatch batch;
  batch.Put(key, value);
  write(batch, "corrupt_latest_state", worker);
}

}  // namespace afs
