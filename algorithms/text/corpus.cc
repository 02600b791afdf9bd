// Corpus listing, chunking at line boundaries, and chunk reads (pread).
#include "algorithms/text/corpus.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <system_error>

#include "afstream/core/errors.h"
#include "algorithms/text/tokenizer.h"

namespace afs::text {

namespace fs = std::filesystem;

namespace {

// An open file, closed on scope exit; InputError naming the path if it cannot be opened.
class File {
 public:
  explicit File(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw InputError("text corpus: cannot open '" + path + "': " + std::strerror(errno));
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Reads up to n bytes at offset; returns how many (fewer only at the end of the file).
  std::size_t pread(char* out, std::size_t n, std::uint64_t offset) const {
    std::size_t got = 0;
    while (got < n) {
      const auto r = ::pread(fd_, out + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw InputError("text corpus: cannot read '" + path_ + "': " + std::strerror(errno));
      }
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }

 private:
  std::string path_;
  int fd_;
};

}  // namespace

Corpus Corpus::list(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError("text corpus: '" + dir + "' is not a directory" + (ec ? ": " + ec.message() : std::string()));
  }
  Corpus c;
  c.dir_ = dir;
  while (c.dir_.size() > 1 && c.dir_.back() == '/') c.dir_.pop_back();
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) throw InputError("text corpus: cannot list '" + dir + "': " + ec.message());
  fs::path last = dir;  // the entry before the one that failed: a subdirectory that cannot be listed, usually
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw InputError("text corpus: cannot list '" + last.string() + "': " + ec.message());
    const auto& e = *it;
    last = e.path();
    std::error_code fe;
    if (!e.is_regular_file(fe)) continue;  // directories are descended into; links to them, devices, fifos skipped
    const auto size = e.file_size(fe);
    if (fe) throw InputError("text corpus: cannot stat '" + e.path().string() + "': " + fe.message());
    // Lexically: fs::relative resolves symbolic links, and a link to a file was listed under its target's path
    // ("real.txt" for "alias.txt", "../c1/a.txt" for a link out of the directory).
    c.files_.push_back({e.path().lexically_relative(c.dir_).generic_string(), size});
  }
  if (ec) throw InputError("text corpus: cannot list '" + last.string() + "': " + ec.message());
  std::sort(c.files_.begin(), c.files_.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return c;
}

std::string Corpus::digest() const {
  // XXH3 over (path, '\0', size as 8 little-endian bytes) per file, in order: stable across processes and builds.
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state);
  for (const auto& f : files_) {
    unsigned char size[8];
    for (int i = 0; i < 8; ++i) size[i] = static_cast<unsigned char>(f.size >> (8 * i));
    XXH3_64bits_update(state, f.path.data(), f.path.size() + 1);  // with its terminating '\0'
    XXH3_64bits_update(state, size, sizeof size);
  }
  const auto h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::to_string(files_.size()) + "-" + hex;
}

std::uint64_t Corpus::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& f : files_) n += f.size;
  return n;
}

std::vector<Chunk> Corpus::chunks(const ChunkingOptions& o) const {
  if (o.chunk_bytes == 0) throw ConfigError("text.chunk-bytes: expected >= 1, got 0");
  if (o.max_line == 0) throw ConfigError("text.max-line: expected >= 1, got 0");
  std::vector<Chunk> out;
  // The line end after a cut point is usually a few dozen bytes on: each search reads a small block first and
  // doubles it while no '\n' turns up (reading 64 KB at every cut point read the whole corpus again, 190 ms for
  // 1 GB at every start and restart of a text source).
  constexpr std::size_t kFirstRead = 512, kLargestRead = 65536;
  std::string block(kLargestRead, '\0');
  for (std::uint32_t f = 0; f < files_.size(); ++f) {
    const auto size = files_[f].size;
    if (size == 0) continue;
    const File file(path_of(f));
    std::uint64_t start = 0;  // of the chunk being cut
    while (start < size) {
      // The first '\n' at or after start + chunk_bytes - 1 ends the chunk, so the chunk is at most
      // max_chunk_length bytes unless the line crossing that point is longer than max_line.
      std::uint64_t end = size;
      std::uint64_t pos = start + o.chunk_bytes - 1;
      const std::uint64_t limit = start + max_chunk_length(o);  // the chunk may not end after this
      std::size_t read_size = kFirstRead;
      while (pos < size) {
        if (pos >= limit) {
          throw InputError("text corpus: '" + path_of(f) + "': no line end within text.max-line (" +
                           std::to_string(o.max_line) + " bytes) after byte offset " +
                           std::to_string(start + o.chunk_bytes - 1) +
                           ": a longer line (a binary file?); raise text.max-line to accept it");
        }
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(read_size, limit - pos));
        const auto got = file.pread(block.data(), want, pos);
        if (got == 0) break;  // the file shrank: its end ends the chunk (read() reports it)
        const void* nl = std::memchr(block.data(), '\n', got);
        if (nl) {
          end = pos + static_cast<std::uint64_t>(static_cast<const char*>(nl) - block.data()) + 1;
          break;
        }
        pos += got;
        read_size = std::min(read_size * 2, kLargestRead);
      }
      const auto chunk_len = end - start;
      out.push_back({f, start, chunk_len});
      start = end;
    }
  }
  return out;
}

void Corpus::read(const Chunk& chunk, std::string& out) const {
  if (chunk.file >= files_.size()) {
    throw InputError("text corpus: chunk of file " + std::to_string(chunk.file) + " but '" + dir_ + "' has " +
                     std::to_string(files_.size()) + " files");
  }
  out.resize(static_cast<std::size_t>(chunk.length));
  const File file(path_of(chunk.file));
  const auto got = file.pread(out.data(), out.size(), chunk.offset);
  if (got != out.size()) {
    throw InputError("text corpus: '" + path_of(chunk.file) + "' is shorter than when it was listed (wanted " +
                     std::to_string(chunk.length) + " bytes at offset " + std::to_string(chunk.offset) + ", got " +
                     std::to_string(got) + ")");
  }
}

std::string Corpus::read_file(std::uint32_t file) const {
  std::string s;
  read({file, 0, files_.at(file).size}, s);
  return s;
}

TextTotals text_totals(std::string_view text) {
  TextTotals t;
  t.bytes = text.size();
  t.lines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') ++t.lines;
  t.words = count_words(text);
  return t;
}

}  // namespace afs::text
