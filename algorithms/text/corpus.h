// A corpus: every regular file under a directory, in a fixed order, cut into chunks at line boundaries so that a
// stream of small chunk descriptors can stand for the text (an afstream Item is 32 bytes and carries no text,
// DESIGN 2). Engine-free: the text source, the operators and the ground-truth scans all use it.
//
// Policy (algorithms/text/README.md): the files are the regular files under the directory, recursively (symbolic
// links to files are followed, links to directories are not), ordered by their path relative to the directory
// (byte order); empty files are kept (they have no chunk). Bytes are bytes: no decoding, lines end at '\n'. A chunk
// starts at a line start and ends just after a '\n' (or at the end of its file): the first '\n' at or after
// chunk-bytes from its start. No '\n' within max-line bytes after that point (a line longer than max-line) is an
// InputError naming the file and offset, so one binary file without newlines cannot make a chunk as big as itself. A
// missing directory or an unreadable file is an InputError naming the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace afs::text {

struct CorpusFile {
  std::string path;  // relative to the corpus directory
  std::uint64_t size = 0;
};

// One chunk: bytes [offset, offset + length) of file `file` (an index into Corpus::files()).
struct Chunk {
  std::uint32_t file = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  friend bool operator==(const Chunk&, const Chunk&) = default;
};

struct ChunkingOptions {
  std::uint64_t chunk_bytes = 16384;                // target chunk size: a chunk ends at the first '\n' from here on
  std::uint64_t max_line = std::uint64_t{1} << 20;  // longest line accepted (bytes, '\n' included)
};

class Corpus {
 public:
  // Lists the files under dir. Throws InputError naming dir if it is missing or not a directory, or naming a
  // file or subdirectory that cannot be read.
  static Corpus list(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::vector<CorpusFile>& files() const { return files_; }
  std::string path_of(std::uint32_t file) const { return dir_ + "/" + files_.at(file).path; }
  std::uint64_t total_bytes() const;
  // A digest of the listing: every file's relative path and size, in order (hex). Two listings with the same
  // digest give every file the same index and cut the same chunks (unless a file was rewritten in place at the
  // same size), so a restarted worker can check that its listing is the one the run started with.
  std::string digest() const;

  // Cuts every file into chunks (see above), in file order. Reads only a little of each file around the cut
  // points. Throws ConfigError for chunk_bytes 0 or max_line 0, InputError for an unreadable file or a line longer
  // than max_line (naming the file and the offset).
  std::vector<Chunk> chunks(const ChunkingOptions& options) const;

  // Reads a chunk's bytes into out (resized). Throws InputError naming the file if it cannot be read or is shorter
  // than the chunk (it changed after it was listed).
  void read(const Chunk& chunk, std::string& out) const;
  // A whole file.
  std::string read_file(std::uint32_t file) const;

 private:
  std::string dir_;
  std::vector<CorpusFile> files_;
};

// The largest chunk options allow: chunk_bytes - 1 + max_line (the line reaching the target may be that long).
inline std::uint64_t max_chunk_length(const ChunkingOptions& o) { return o.chunk_bytes - 1 + o.max_line; }

// Counts over a whole text: bytes, lines (a last line without '\n' counts) and words (tokenizer.h).
struct TextTotals {
  std::uint64_t bytes = 0;
  std::uint64_t lines = 0;
  std::uint64_t words = 0;
  TextTotals& operator+=(const TextTotals& o) {
    bytes += o.bytes;
    lines += o.lines;
    words += o.words;
    return *this;
  }
};
// The totals of one file's (or chunk's) bytes. Chunks end at '\n' or at the end of their file, so the sum over a
// file's chunks equals the file's totals.
TextTotals text_totals(std::string_view text);

}  // namespace afs::text
