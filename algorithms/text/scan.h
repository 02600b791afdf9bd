// Ground truth by a direct scan of a corpus, file by file, with no chunks and no engine: the exact word counts and
// the exact matching lines that the word-count and grep jobs are checked against (issue 4: exact results without
// failures). Engine-free.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/text/corpus.h"
#include "algorithms/text/matcher.h"

namespace afs::text {

struct WordEntry {
  std::string word;
  std::int64_t count = 0;
};

struct WordCountScan {
  std::unordered_map<std::uint64_t, WordEntry> words;  // word_hash(word, seed) -> the word and its count
  TextTotals totals;
};

// Every word of the corpus with its count, keyed by its hash. The job's output maps hashes back to words through
// it, so two different words with one hash would make the results ambiguous: that throws InputError naming both
// words (never seen with XXH3-64 on real vocabularies; another --wordcount.hash-seed avoids it).
WordCountScan scan_word_counts(const Corpus& corpus, std::uint64_t seed);

struct MatchedLine {
  std::uint32_t file = 0;
  std::uint64_t offset = 0;  // of the line's first byte in its file
  std::uint64_t line = 0;    // 1-based line number
  std::string text;          // the line without its '\n'
};

struct GrepScan {
  std::vector<MatchedLine> matches;  // in corpus order (file, then offset)
  TextTotals totals;
};

GrepScan scan_grep(const Corpus& corpus, const LineMatcher& matcher);

// The (1-based) line numbers of the lines starting at the given offsets of text (offsets sorted ascending, each at
// a line start). For turning a stream's (file, offset) matches into file:line.
std::vector<std::uint64_t> line_numbers(std::string_view text, const std::vector<std::uint64_t>& sorted_offsets);

}  // namespace afs::text
