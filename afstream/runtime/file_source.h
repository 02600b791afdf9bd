// A replayable source over a text file: one item per line, "key" or "key,value". A key that is an unsigned
// integer is used as is; any other key (a word, an address) is hashed (XXH3). Offsets are line numbers, so the
// source replays from any position; parallel instances read disjoint line ranges.
//
// Parameters: path, on-error = fail | skip (a malformed line is an InputError naming file and line, or is skipped
// and counted).
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"

namespace afs {

class FileSource final : public Source {
 public:
  FileSource(const Params& p, const InstanceInfo& at);  // throws InputError if the file cannot be read
  std::uint64_t size() const override { return items_.size(); }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;
  std::uint64_t skipped() const { return skipped_; }

  // Parses a whole file (all instances' lines); the same rules as the source. For ground truth.
  static std::vector<Item> read_all(const std::string& path, bool skip_bad, std::uint64_t* skipped = nullptr);
  // Writes items as this source reads them: a "key,value" line each (keys as unsigned integers), so that read_all
  // gives back their keys and values (`afstream gen`). Throws InputError naming `name` if the stream fails.
  static void write(std::ostream& out, std::span<const Item> items, const std::string& name);

 private:
  std::vector<Item> items_;
  std::uint64_t skipped_ = 0;
};

// Registers the engine's own sources ("file").
void register_builtin_sources(Registry& registry);

}  // namespace afs
