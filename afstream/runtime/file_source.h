// A replayable source over a text file: one item per line, "key" or "key,value". A key that is an unsigned
// integer is used as is; any other key (a word, an address) is hashed (XXH3). Offsets are line numbers, so the
// source replays from any position; parallel instances read disjoint line ranges.
//
// Parameters: path, on-error = fail | skip (a malformed line is an InputError naming file and line, or is skipped
// and counted).
#pragma once

#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"

namespace afs {

// A file's items as read_all parses them, and the malformed lines skipped (on-error skip).
struct FileItems {
  std::vector<Item> items;
  std::uint64_t skipped = 0;
};

class FileSource final : public Source {
 public:
  FileSource(const Params& p, const InstanceInfo& at);  // throws InputError if the file cannot be read
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;
  std::uint64_t skipped() const { return all_->skipped; }

  // Parses a whole file (all instances' lines); the same rules as the source. For ground truth.
  static std::vector<Item> read_all(const std::string& path, bool skip_bad, std::uint64_t* skipped = nullptr);
  // The same, parsed once per process while the file stays as it was (same size and modification time): the
  // job's topology, its evaluation and every source instance, and a restarted one, share one parse instead of
  // each reading the file again (a 5e6-line file took about 0.5 s a read, which every recovery of a source paid).
  // The last few files are kept. Thread-safe.
  static std::shared_ptr<const FileItems> load(const std::string& path, bool skip_bad);
  // Where the index-th item of load(path, skip_bad) is: its line number (1-based; 0 if there is no such item) and
  // the line (its first 80 bytes, trimmed), so that a job refusing an item can name the file and line. Reads the
  // file again: for error messages.
  static std::pair<std::uint64_t, std::string> line_of(const std::string& path, bool skip_bad, std::uint64_t index);
  // Writes items as this source reads them: a "key,value" line each (keys as unsigned integers), so that read_all
  // gives back their keys and values (`afstream gen`). Throws InputError naming `name` if the stream fails.
  static void write(std::ostream& out, std::span<const Item> items, const std::string& name);

 private:
  std::shared_ptr<const FileItems> all_;
  std::uint64_t begin_ = 0, end_ = 0;  // this instance's lines of all_->items
};

// Registers the engine's own sources ("file").
void register_builtin_sources(Registry& registry);

}  // namespace afs
