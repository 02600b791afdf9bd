// LocalRecoveryStore: a worker's own copy of its state chain beside the backup server's (local_recovery_store.h).
#include "afstream/store/local_recovery_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

namespace afs {

namespace {

constexpr std::uint32_t kMagic = 0x524C4641;  // "AFLR" little-endian
constexpr std::uint32_t kFullFlag = 1;
constexpr std::size_t kHeaderBytes = 24;

std::uint64_t digest_of(const Bytes& b) { return XXH3_64bits(b.data(), b.size()); }

// A frame's header: magic, flags, record size, record digest (afstream/core/bytes.h's byte order).
std::array<std::uint8_t, kHeaderBytes> header_of(bool full, std::uint64_t size, std::uint64_t digest) {
  ByteWriter w;
  w.put<std::uint32_t>(kMagic);
  w.put<std::uint32_t>(full ? kFullFlag : 0);
  w.put<std::uint64_t>(size);
  w.put<std::uint64_t>(digest);
  std::array<std::uint8_t, kHeaderBytes> h{};
  std::memcpy(h.data(), w.buffer().data(), h.size());
  return h;
}

// Writes header + record + an end marker (a zeroed header) at `offset`; false on any error. The marker stops a
// reader there, before whatever an earlier, longer chain left after it (the file is written over in place: its
// pages are reused instead of freed and allocated again at each full record).
bool write_frame(int fd, std::uint64_t offset, bool full, std::uint64_t digest, const Bytes& record) {
  auto header = header_of(full, record.size(), digest);
  const std::array<std::uint8_t, kHeaderBytes> marker{};
  iovec iov[3] = {{header.data(), header.size()},
                  {const_cast<std::uint8_t*>(record.data()), record.size()},
                  {const_cast<std::uint8_t*>(marker.data()), marker.size()}};
  int first = 0;
  while (first < 3) {
    const ssize_t n = ::pwritev(fd, iov + first, 3 - first, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto done = static_cast<std::size_t>(n);
    offset += done;
    while (first < 3 && done >= iov[first].iov_len) {
      done -= iov[first].iov_len;
      ++first;
    }
    if (first < 3) {
      iov[first].iov_base = static_cast<std::uint8_t*>(iov[first].iov_base) + done;
      iov[first].iov_len -= done;
    }
  }
  return true;
}

bool write_marker(int fd, std::uint64_t offset) {
  const std::array<std::uint8_t, kHeaderBytes> marker{};
  return ::pwrite(fd, marker.data(), marker.size(), static_cast<off_t>(offset)) == static_cast<ssize_t>(marker.size());
}

bool read_exact(int fd, void* to, std::size_t n, std::uint64_t offset) {
  auto* p = static_cast<std::uint8_t*>(to);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

LocalRecoveryStore::LocalRecoveryStore(RemoteStore& remote, std::string dir, bool offer_copies)
    : remote_(remote), dir_(std::move(dir)), offer_copies_(offer_copies) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_)) {
    throw ConfigError("local recovery directory '" + dir_ +
                      "': " + (ec ? "cannot be created: " + ec.message() : std::string("not a directory")));
  }
}

LocalRecoveryStore::~LocalRecoveryStore() {
  for (auto& [worker, copy] : copies_) ::close(copy.fd);
}

std::string LocalRecoveryStore::path(const std::string& dir, int worker) {
  return dir + "/worker-" + std::to_string(worker) + ".chain";
}

std::optional<Bytes> LocalRecoveryStore::read_record(const std::string& dir, int worker, std::uint64_t offset,
                                                     std::uint64_t size, std::uint64_t digest, std::string* why) {
  const std::string file = path(dir, worker);
  auto fail = [&](const std::string& what) -> std::optional<Bytes> {
    if (why) *why = "worker " + std::to_string(worker) + "'s local copy " + file + ": " + what;
    return std::nullopt;
  };
  // A regular file only (no symlink out of dir, no FIFO to block the server on).
  Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) return fail(std::string("cannot open it: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail("not a regular file");
  bool bad = false;
  auto frame = read_frame(fd.get(), offset, static_cast<std::uint64_t>(st.st_size), &bad);
  if (!frame || frame->record.size() != size || frame->digest != digest) {
    return fail("no whole frame of " + std::to_string(size) + " bytes with digest " + std::to_string(digest) + " at " +
                std::to_string(offset));
  }
  return std::move(frame->record);
}

std::optional<LocalRecoveryStore::Frame> LocalRecoveryStore::read_frame(int fd, std::uint64_t at,
                                                                        std::uint64_t file_size, bool* bad) {
  *bad = false;
  std::array<std::uint8_t, kHeaderBytes> header{};
  if (at > file_size || file_size - at < kHeaderBytes || !read_exact(fd, header.data(), header.size(), at)) {
    return std::nullopt;
  }
  ByteReader r(header);
  const auto magic = r.get<std::uint32_t>();
  if (magic == 0) return std::nullopt;  // the end marker
  const auto flags = r.get<std::uint32_t>();
  const auto bytes = r.get<std::uint64_t>();
  Frame f;
  f.full = (flags & kFullFlag) != 0;
  f.digest = r.get<std::uint64_t>();
  *bad = true;
  if (magic != kMagic || (flags & ~kFullFlag) != 0 || bytes > file_size - at - kHeaderBytes) return std::nullopt;
  f.record.resize(bytes);
  if (!read_exact(fd, f.record.data(), bytes, at + kHeaderBytes) || digest_of(f.record) != f.digest) {
    return std::nullopt;
  }
  *bad = false;
  f.end = at + kHeaderBytes + bytes;
  return f;
}

LocalRecoveryCounters LocalRecoveryStore::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void LocalRecoveryStore::remove_copy(int worker) const {
  if (auto it = copies_.find(worker); it != copies_.end()) {
    ::close(it->second.fd);
    copies_.erase(it);
  }
  (void)::unlink(path(worker).c_str());
}

LocalRecoveryStore::Copy* LocalRecoveryStore::open_copy(int worker, bool full) const {
  auto it = copies_.find(worker);
  if (it == copies_.end()) {
    std::uint64_t end = 0;
    if (!full) {
      // A delta before any read of the copy (not what a worker does: it restores, or starts with a full record):
      // it goes after the frames there.
      const auto frames = read_frames(worker);
      if (frames.empty()) return nullptr;
      end = frames.back().end;
    }
    const int fd = ::open(path(worker).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return nullptr;
    it = copies_.emplace(worker, Copy{fd, end}).first;
  }
  return &it->second;
}

std::optional<std::uint64_t> LocalRecoveryStore::append(int worker, bool full, std::uint64_t digest,
                                                        const Bytes& record) const {
  Copy* copy = open_copy(worker, full);
  const std::uint64_t at = full ? 0 : (copy ? copy->end : 0);
  if (copy == nullptr || !write_frame(copy->fd, at, full, digest, record)) {
    ++counters_.write_errors;
    remove_copy(worker);
    return std::nullopt;
  }
  copy->end = at + kHeaderBytes + record.size();
  ++counters_.records_written;
  counters_.bytes_written += kHeaderBytes + record.size();
  return at;
}

void LocalRecoveryStore::cut(int worker, std::uint64_t end) const {
  Copy* copy = open_copy(worker, true);
  if (copy == nullptr || !write_marker(copy->fd, end)) {
    remove_copy(worker);
    return;
  }
  copy->end = end;
}

std::vector<LocalRecoveryStore::Frame> LocalRecoveryStore::read_frames(int worker) const {
  std::vector<Frame> frames;
  Fd fd(::open(path(worker).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return frames;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return frames;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // The copy must start with a full record and hold only one.
  for (;;) {
    bool bad = false;
    auto f = read_frame(fd.get(), frames.empty() ? 0 : frames.back().end, size, &bad);
    if (f && f->full != frames.empty()) bad = true;
    if (bad) ++counters_.bad_frames;
    if (!f || bad) break;
    frames.push_back(std::move(*f));
  }
  return frames;
}

void LocalRecoveryStore::rewrite(int worker, const std::vector<Bytes>& records) const {
  if (records.empty()) {
    remove_copy(worker);
    return;
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!append(worker, i == 0, digest_of(records[i]), records[i])) return;
  }
}

ChainInfo LocalRecoveryStore::put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) {
  std::lock_guard lock(mu_);
  const std::uint64_t digest = digest_of(record);
  const std::optional<std::uint64_t> at = append(worker, full, digest, record);
  try {
    if (at && offer_copies_ && refusals_in_a_row_ < kMaxRefusals) {
      if (auto info = remote_.put_state_in_copy(worker, full, *at, record.size(), digest, covered)) {
        refusals_in_a_row_ = 0;
        ++counters_.puts_in_copy;
        return *info;
      }
      ++refusals_in_a_row_;
      ++counters_.copies_refused;
    }
    return remote_.put_state(worker, full, std::move(record), covered, at ? digest : 0);
  } catch (...) {
    // The server did not take it: the copy ends where it did (a full record had replaced it: none is left).
    if (at && full) {
      remove_copy(worker);
    } else if (at) {
      cut(worker, *at);
    }
    throw;
  }
}

std::vector<Bytes> LocalRecoveryStore::state_chain(int worker, ChainInfo* info) const {
  std::lock_guard lock(mu_);
  std::vector<Frame> frames = read_frames(worker);
  RemoteStore::HeldChain chain;
  if (frames.empty()) {
    chain.records = remote_.state_chain(worker, &chain.info);
  } else {
    std::vector<std::uint64_t> held;
    held.reserve(frames.size());
    for (const auto& f : frames) held.push_back(f.digest);
    chain = remote_.state_chain_held(worker, std::move(held));
  }
  if (info) *info = chain.info;
  if (chain.held == 0) {
    ++counters_.restores_remote;
    rewrite(worker, chain.records);
    return std::move(chain.records);
  }
  ++counters_.restores_local;
  const auto n = static_cast<std::size_t>(chain.held);
  // The copy goes on after them (a record the server does not hold, when the last put did not reach it, is cut).
  cut(worker, frames[n - 1].end);
  std::vector<Bytes> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(std::move(frames[i].record));
  return out;
}

void LocalRecoveryStore::drop(int worker) {
  std::lock_guard lock(mu_);
  remote_.drop(worker);
  remove_copy(worker);
}

}  // namespace afs
