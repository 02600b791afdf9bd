// Direct scans of a corpus for ground truth: word counts (with a hash-collision check) and matching lines.
#include "algorithms/text/scan.h"

#include <algorithm>

#include "afstream/core/errors.h"
#include "algorithms/text/tokenizer.h"

namespace afs::text {

WordCountScan scan_word_counts(const Corpus& corpus, std::uint64_t seed) {
  WordCountScan s;
  std::string buffer;
  for (std::uint32_t f = 0; f < corpus.files().size(); ++f) {
    const auto text = corpus.read_file(f);
    s.totals += text_totals(text);
    for_each_word(text, buffer, [&](std::string_view w) {
      auto& e = s.words[word_hash(w, seed)];
      if (e.count == 0) {
        e.word = w;
      } else if (e.word != w) [[unlikely]] {
        throw InputError("text corpus '" + corpus.dir() + "': the words '" + e.word + "' and '" + std::string(w) +
                         "' have the same 64-bit hash with seed " + std::to_string(seed) +
                         "; choose another --wordcount.hash-seed");
      }
      ++e.count;
    });
  }
  return s;
}

GrepScan scan_grep(const Corpus& corpus, const LineMatcher& matcher) {
  GrepScan s;
  for (std::uint32_t f = 0; f < corpus.files().size(); ++f) {
    const auto text = corpus.read_file(f);
    s.totals += text_totals(text);
    // Line by line, independently of the matcher's whole-text search: the reference it is checked against.
    std::uint64_t line = 0;
    for (std::size_t begin = 0; begin < text.size();) {
      ++line;
      const auto end = LineMatcher::line_end(text, begin);
      const std::string_view l(text.data() + begin, end - begin);
      if (matcher.matches(l)) s.matches.push_back({f, begin, line, std::string(l)});
      begin = end + 1;
    }
  }
  return s;
}

std::vector<std::uint64_t> line_numbers(std::string_view text, const std::vector<std::uint64_t>& sorted_offsets) {
  std::vector<std::uint64_t> out;
  out.reserve(sorted_offsets.size());
  std::uint64_t line = 1;
  std::size_t pos = 0;
  for (const auto off : sorted_offsets) {
    const auto upto = static_cast<std::size_t>(std::min<std::uint64_t>(off, text.size()));
    if (upto > pos) {
      line += static_cast<std::uint64_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(pos),
                                                    text.begin() + static_cast<std::ptrdiff_t>(upto), '\n'));
      pos = upto;
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace afs::text
