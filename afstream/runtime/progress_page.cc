// The worker process's input positions for its next incarnation (progress_page.h).
#include "afstream/runtime/progress_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {
namespace {

constexpr std::uint64_t kMagic = 0x32474f5250534641ull;  // "AFSPROG2", little-endian (1: no losses in the header)
constexpr std::size_t kMaxChannels = 1u << 20;           // a reader's sanity bound on the header's count

std::string errno_text() { return std::strerror(errno); }

// Reads exactly n bytes at offset; false on a short file or an error.
bool read_at(int fd, void* out, std::size_t n, off_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += r;
  }
  return true;
}

}  // namespace

std::string ProgressPage::path_in(const std::string& dir, int worker) {
  return dir + "/worker-" + std::to_string(worker) + ".progress";
}

std::optional<ProgressPage::Seen> ProgressPage::read(const std::string& dir, int worker, std::uint32_t epoch) {
  static_assert(sizeof(Header) == 40 && sizeof(Cell) == 16);
  const int fd = ::open(path_in(dir, worker).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<Seen> out;
  Header h{};
  if (read_at(fd, &h, sizeof h, 0) && h.magic == kMagic && h.worker == static_cast<std::uint32_t>(worker) &&
      h.epoch + 1 == epoch && h.channels <= kMaxChannels) {
    std::vector<Cell> cells(h.channels);
    if (h.channels == 0 || read_at(fd, cells.data(), cells.size() * sizeof(Cell), sizeof h)) {
      out.emplace();
      for (const auto& c : cells) out->processed[c.channel] = c.processed;
      out->lost_items = h.lost_items;
      out->lost_outputs = h.lost_outputs;
    }
  }
  ::close(fd);
  return out;
}

ProgressPage::ProgressPage(const std::string& dir, int worker, std::uint32_t epoch,
                           std::span<const std::uint32_t> channels, const SeqByChannel& floor)
    : bytes_(sizeof(Header) + channels.size() * sizeof(Cell)) {
  const std::string path = path_in(dir, worker);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw RuntimeError("progress page " + path + ": cannot open: " + errno_text());
  if (::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
    const auto e = errno_text();
    ::close(fd);
    throw RuntimeError("progress page " + path + ": cannot size it to " + std::to_string(bytes_) + " bytes: " + e);
  }
  // Its blocks allocated now: a store through the mapping into a hole that a full tmpfs cannot fill is a SIGBUS,
  // which the controller would take for a crash and restart into the same death.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_)); err != 0) {
    ::close(fd);
    throw RuntimeError("progress page " + path + ": cannot allocate " + std::to_string(bytes_) +
                       " bytes: " + std::strerror(err));
  }
  map_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const auto e = errno_text();
  ::close(fd);  // the mapping keeps the file
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw RuntimeError("progress page " + path + ": cannot map it: " + e);
  }
  auto* h = static_cast<Header*>(map_);
  std::atomic_ref<std::uint64_t> magic(h->magic);
  magic.store(0, std::memory_order_release);  // laid out anew: unreadable until complete
  h->worker = static_cast<std::uint32_t>(worker);
  h->epoch = epoch;
  h->channels = static_cast<std::uint32_t>(channels.size());
  h->zero = 0;
  h->lost_items = 0;
  h->lost_outputs = 0;
  header_ = h;
  cells_ = reinterpret_cast<Cell*>(static_cast<char*>(map_) + sizeof(Header));
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const auto it = floor.find(channels[i]);
    cells_[i] = Cell{channels[i], 0, it == floor.end() ? 0 : it->second};
  }
  magic.store(kMagic, std::memory_order_release);
}

ProgressPage::~ProgressPage() {
  if (map_) ::munmap(map_, bytes_);
}

}  // namespace afs
