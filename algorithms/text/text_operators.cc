// The word-count and grep operators: chunk descriptors in, words or matching lines out, tracked maps as state.
#include "algorithms/text/text_operators.h"

#include <algorithm>
#include <memory>

#include "afstream/core/errors.h"
#include "algorithms/text/tokenizer.h"

namespace afs::text {

Item chunk_item(std::uint64_t index, const Chunk& c) {
  Item it;
  it.key = index;
  it.value = static_cast<std::int64_t>(line_id(c.file, c.offset));
  it.time = static_cast<std::int64_t>(c.length);
  return it;
}

Chunk chunk_of(const Item& item, std::uint64_t max_length) {
  if (item.value < 0 || item.time < 0 || static_cast<std::uint64_t>(item.time) > max_length) {
    throw FormatError("text chunk descriptor: item (" + std::to_string(item.key) + ", " + std::to_string(item.value) +
                      ", " + std::to_string(item.time) + ") is not a chunk of at most " + std::to_string(max_length) +
                      " bytes");
  }
  const auto id = static_cast<std::uint64_t>(item.value);
  return {file_of_line(id), offset_of_line(id), static_cast<std::uint64_t>(item.time)};
}

ChunkingOptions chunking_of(const Params& p) {
  ChunkingOptions o;
  o.chunk_bytes = p.get_uint("chunk-bytes", o.chunk_bytes);
  o.max_line = p.get_uint("max-line", o.max_line);
  if (o.chunk_bytes < 1 || o.chunk_bytes > (std::uint64_t{1} << 30)) {
    throw ConfigError("text.chunk-bytes: expected 1 .. 2^30, got " + std::to_string(o.chunk_bytes));
  }
  if (o.max_line < 1 || o.max_line > (std::uint64_t{1} << 30)) {
    throw ConfigError("text.max-line: expected 1 .. 2^30, got " + std::to_string(o.max_line));
  }
  return o;
}

Corpus corpus_of(const Params& p) {
  const auto dir = p.get_string("dir", "");
  if (dir.empty()) throw ConfigError("text operators: missing parameter dir (the corpus directory)");
  auto c = Corpus::list(dir);
  if (c.files().size() >= kMaxFiles) {
    throw InputError("text corpus '" + dir + "': " + std::to_string(c.files().size()) + " files, more than the " +
                     std::to_string(kMaxFiles - 1) + " a chunk descriptor can name");
  }
  for (std::uint32_t f = 0; f < c.files().size(); ++f) {
    if (c.files()[f].size >= kMaxOffset) {
      throw InputError("text corpus: '" + c.path_of(f) + "' is larger than 1 TiB, the most a chunk descriptor holds");
    }
  }
  // The listing the job started with (TextJob::corpus_params): a chunk descriptor names a file by its index and a
  // source position is a chunk's index, so a worker that lists a changed directory (a restarted one, after a file
  // was added, removed, grown or truncated) would read other files' bytes or replay other chunks, silently.
  const auto want = p.get_string("corpus-digest", "");
  if (!want.empty()) {
    const auto got = c.digest();
    if (got != want) {
      throw InputError("text corpus: the files under '" + dir + "' changed since the run listed them (" +
                       std::to_string(c.files().size()) + " files, " + std::to_string(c.total_bytes()) +
                       " bytes now; listing " + got + ", the run's " + want +
                       "): a worker starting now would read other bytes than the others; leave the corpus unchanged "
                       "during a run");
    }
  }
  return c;
}

TextSource::TextSource(const Params& p, const InstanceInfo& at) : chunks_(corpus_of(p).chunks(chunking_of(p))) {
  const auto n = static_cast<std::uint64_t>(chunks_.size());
  begin_ = n * static_cast<std::uint64_t>(at.index) / static_cast<std::uint64_t>(at.parallelism);
  end_ = n * static_cast<std::uint64_t>(at.index + 1) / static_cast<std::uint64_t>(at.parallelism);
}

std::size_t TextSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  for (std::size_t i = 0; i < n; ++i) {
    const auto index = begin_ + offset + i;
    out[i] = chunk_item(index, chunks_[static_cast<std::size_t>(index)]);
  }
  return n;
}

TextTokenize::TextTokenize(const Params& p)
    : corpus_(corpus_of(p)), chunking_(chunking_of(p)), seed_(p.get_uint("seed", 1)) {}

double TextTokenize::beta() const { return static_cast<double>((max_chunk_length(chunking_) + 1) / 2); }

void TextTokenize::process(const Item& item, Emitter& out) {
  corpus_.read(chunk_of(item, max_chunk_length(chunking_)), bytes_);
  const auto chunk = static_cast<std::int64_t>(item.key);
  for_each_word_hash(bytes_, seed_, word_, [&](std::uint64_t h) { out.emit(h, 1, chunk); });
}

GrepMatch::GrepMatch(const Params& p)
    : corpus_(corpus_of(p)),
      chunking_(chunking_of(p)),
      matcher_(p.get_string("pattern", ""), parse_match_kind(p.get_string("kind", "substring"))) {}

void GrepMatch::process(const Item& item, Emitter& out) {
  const auto chunk = chunk_of(item, max_chunk_length(chunking_));
  corpus_.read(chunk, bytes_);
  const auto index = static_cast<std::int64_t>(item.key);
  matcher_.for_each_match(bytes_, [&](std::size_t offset, std::string_view) {
    out.emit(line_id(chunk.file, chunk.offset + offset), 1, index);
  });
}

void TrackedMapOperator::restore_full(ByteReader& in) {
  auto m = map_;
  m.read_full(in);
  in.expect_end(name_);
  map_ = std::move(m);
}

void TrackedMapOperator::apply_delta(ByteReader& in) {
  const auto d = map_.read_delta(in);  // checked first, applied without copying the map
  in.expect_end(name_);
  map_.apply_delta(d);
}

double TrackedMapOperator::distance(const Operator& other) const {
  return map_.distance(dynamic_cast<const TrackedMapOperator&>(other).map_);
}

std::vector<std::pair<std::uint64_t, std::int64_t>> TrackedMapOperator::entries() const {
  std::vector<std::pair<std::uint64_t, std::int64_t>> v;
  v.reserve(map_.size());
  map_.for_each([&](std::uint64_t k, std::int64_t c) { v.emplace_back(k, c); });
  std::sort(v.begin(), v.end());
  return v;
}

WordCount::WordCount(const Params& p)
    : TrackedMapOperator(Metric::MaxAbs, "wc-count state"), max_weight_(p.get_int("max-weight", 1)) {
  if (max_weight_ < 1) throw ConfigError("wc-count max-weight: expected >= 1, got " + std::to_string(max_weight_));
}

void WordCount::process(const Item& item, Emitter&) {
  if (item.value < 1 || item.value > max_weight_) {
    throw FormatError("wc-count: item (" + std::to_string(item.key) + ", " + std::to_string(item.value) +
                      ") does not carry a count of 1 .. " + std::to_string(max_weight_));
  }
  map_.add(item.key, item.value);
}

void WordCount::finish(Emitter& out) {
  for (const auto& [word, count] : entries()) out.emit(word, count);
}

WordCountMerge::WordCountMerge(const Params& p)
    : TrackedMapOperator(Metric::MaxAbs, "wc-merge state"),
      alpha_(static_cast<double>(p.get_uint("max-count", std::uint64_t{1} << 40))) {}

void WordCountMerge::process(const Item& item, Emitter&) {
  if (item.value < 0) {
    throw FormatError("wc-merge: item (" + std::to_string(item.key) + ", " + std::to_string(item.value) +
                      ") is not a word count");
  }
  map_.set(item.key, item.value);
}

GrepCollect::GrepCollect(const Params&) : TrackedMapOperator(Metric::NewKeys, "grep-collect state") {}

void GrepCollect::process(const Item& item, Emitter&) { map_.set(item.key, 1); }

void register_text(Registry& registry) {
  registry.add_source("text-source", "chunks of the text files under a directory (dir, chunk-bytes, max-line)",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<TextSource>(p, at); });
  registry.add_operator("text-tokenize",
                        "reads chunks, emits (word hash, 1) per word (dir, seed, chunk-bytes, max-line)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<TextTokenize>(p); });
  registry.add_operator("wc-count", "word counts by word hash, max-abs divergence (max-weight)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<WordCount>(p); });
  registry.add_operator("wc-merge", "merges word counts (sink; max-count)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<WordCountMerge>(p); });
  registry.add_operator(
      "grep-match", "reads chunks, emits matching lines (dir, pattern, kind=substring|regex, chunk-bytes, max-line)",
      [](const Params& p, const InstanceInfo&) { return std::make_unique<GrepMatch>(p); });
  registry.add_operator("grep-collect", "the set of matching lines (sink)",
                        [](const Params& p, const InstanceInfo&) { return std::make_unique<GrepCollect>(p); });
}

}  // namespace afs::text
