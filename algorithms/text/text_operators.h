// Word count and grep on afstream, written against the operator API as a user would (issue 4; PAPER: "Grep and
// WordCount, throughput only"). An Item is 32 bytes and carries no text (DESIGN 2), so the text flows as chunk
// descriptors and every operator that needs bytes reads them from the corpus directory (all local workers see it):
//
//   text-source    replayable source: one item per chunk of the corpus (corpus.h: files under a directory, cut at
//                  line boundaries): key = chunk index, value = file << 40 | byte offset, time = length. Parallel
//                  instances take contiguous ranges of chunks.
//   text-tokenize  stateless: reads a chunk and emits (word_hash, 1) per word (tokenizer.h). beta = the most words a
//                  chunk can hold, (max chunk length + 1) / 2.
//   wc-count       word counts in a TrackedMap<int64> keyed by word hash, max-abs divergence: the largest rise of
//                  one word's count since the last backup. alpha = max-weight (1: one item adds 1 to one count), so
//                  a failure loses at most theta + l of any one word's count (DESIGN 3), and over any number of
//                  failures at most Theta + L per word. beta = 0: it emits (word_hash, count) for every word at the
//                  end, in key order. Parallel copies partitioned by word hash hold disjoint words.
//   wc-merge       the word-count sink: word_hash -> count from the copies (set, so a resent item changes nothing);
//                  max-abs divergence, alpha = max-count (the largest count one item can carry).
//   grep-match     stateless: reads a chunk and emits (file << 40 | line offset, 1) per matching line
//                  (matcher.h). beta = the most lines a chunk can hold, its longest length.
//   grep-collect   the grep sink: the set of matching lines (TrackedMap, new-keys divergence: lines found since the
//                  last backup; alpha = 1, beta = 0).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "afstream/core/item.h"
#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "afstream/state/tracked_map.h"
#include "algorithms/text/corpus.h"
#include "algorithms/text/matcher.h"

namespace afs::text {

// Chunk descriptors and line ids on the stream: file index below 2^23, byte offsets below 2^40 (1 TiB).
inline constexpr std::uint64_t kMaxFiles = std::uint64_t{1} << 23;
inline constexpr std::uint64_t kMaxOffset = std::uint64_t{1} << 40;
inline std::uint64_t line_id(std::uint32_t file, std::uint64_t offset) {
  return (static_cast<std::uint64_t>(file) << 40) | offset;
}
inline std::uint32_t file_of_line(std::uint64_t id) { return static_cast<std::uint32_t>(id >> 40); }
inline std::uint64_t offset_of_line(std::uint64_t id) { return id & (kMaxOffset - 1); }

Item chunk_item(std::uint64_t index, const Chunk& c);
// The chunk an item describes; FormatError if its fields are out of range (negative, or longer than max_length).
Chunk chunk_of(const Item& item, std::uint64_t max_length);

// Parameters shared by the text operators: dir, chunk-bytes, max-line.
ChunkingOptions chunking_of(const Params& p);
// The corpus at p's dir, checked against the descriptor limits (InputError naming the directory or the file).
Corpus corpus_of(const Params& p);

// Parameters: dir, chunk-bytes, max-line.
class TextSource final : public Source {
 public:
  TextSource(const Params& p, const InstanceInfo& at);
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;

 private:
  std::vector<Chunk> chunks_;
  std::uint64_t begin_ = 0, end_ = 0;
};

// Parameters: dir, seed (of the word hash), chunk-bytes, max-line.
class TextTokenize final : public StatelessOperator {
 public:
  explicit TextTokenize(const Params& p);
  double beta() const override;
  void process(const Item& item, Emitter& out) override;

 private:
  Corpus corpus_;
  ChunkingOptions chunking_;
  std::uint64_t seed_;
  std::string bytes_, word_;
};

// Parameters: dir, pattern, kind (substring | regex), chunk-bytes, max-line.
class GrepMatch final : public StatelessOperator {
 public:
  explicit GrepMatch(const Params& p);
  double beta() const override { return static_cast<double>(max_chunk_length(chunking_)); }
  void process(const Item& item, Emitter& out) override;

 private:
  Corpus corpus_;
  ChunkingOptions chunking_;
  LineMatcher matcher_;
  std::string bytes_;
};

// A TrackedMap<int64> operator state with its backups, restores and distance: the base of the three stateful text
// operators.
class TrackedMapOperator : public Operator {
 public:
  double divergence() const override { return map_.divergence(); }
  void snapshot_full(ByteWriter& out) const override { map_.write_full(out); }
  void snapshot_delta(ByteWriter& out) const override { map_.write_delta(out); }
  void mark_backed_up() override { map_.mark_backed_up(); }
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;
  // The entries, sorted by key.
  std::vector<std::pair<std::uint64_t, std::int64_t>> entries() const;
  std::size_t size() const { return map_.size(); }

 protected:
  TrackedMapOperator(Metric metric, const char* name) : map_(metric), name_(name) {}
  TrackedMap<std::int64_t> map_;

 private:
  const char* name_;
};

// Parameters: max-weight (the largest item value, alpha; default 1).
class WordCount final : public TrackedMapOperator {
 public:
  explicit WordCount(const Params& p);
  double alpha() const override { return static_cast<double>(max_weight_); }
  bool divergence_bounded_by_alpha() const override { return true; }  // one count rises by at most max-weight
  // Max-abs over the words, and a word's count comes from the copy its word is routed to (Corollary P'): each copy
  // may use Theta / 2 instead of Theta / (2n).
  bool divergence_combines_by_max() const override { return true; }
  double beta() const override { return 0; }
  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;
  std::int64_t count(std::uint64_t word_hash) const { return map_.get(word_hash); }

 private:
  std::int64_t max_weight_;
};

// Parameters: max-count (the largest count one item can carry: alpha).
class WordCountMerge final : public TrackedMapOperator {
 public:
  explicit WordCountMerge(const Params& p);
  double alpha() const override { return alpha_; }
  double beta() const override { return 0; }
  void process(const Item& item, Emitter& out) override;

 private:
  double alpha_;
};

class GrepCollect final : public TrackedMapOperator {
 public:
  explicit GrepCollect(const Params& p);
  double alpha() const override { return 1; }
  double beta() const override { return 0; }
  void process(const Item& item, Emitter& out) override;
};

void register_text(Registry& registry);

}  // namespace afs::text
