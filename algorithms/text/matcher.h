// The line matcher of the grep job (issue 4): finds the lines of a text that contain a pattern. Engine-free.
//
// Lines are split at '\n' (the '\n' is not part of the line; a last line without one still counts; "\r" is kept, so
// CRLF lines match as they are). Two kinds of pattern:
//   - substring (the default): the lines containing the pattern's bytes. The whole text is searched at once
//     (memmem, a vectorized two-way search in glibc), and only a hit's line is located, so the cost is that of one
//     pass over the bytes, not one search per line.
//   - regex: RE2's syntax (PCRE's and ECMAScript's, less backreferences and lookaround), searched in each line, byte
//     by byte (Latin-1: '.' is one byte, as std::regex on char had it). RE2 takes time linear in the line and no
//     stack: std::regex, used before, recursed once per character and overflowed the worker's stack on lines of
//     about 40 KB ('.*z'), a crash that a restarted worker met again on the same chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace afs::text {

class LineMatcher {
 public:
  enum class Kind { Substring, Regex };

  // Throws ConfigError naming grep.pattern for an empty pattern, one that holds '\n' (no line can contain it), or
  // a regex that does not compile (with RE2's reason).
  LineMatcher(std::string pattern, Kind kind);

  // Whether one line (no '\n' in it) matches.
  bool matches(std::string_view line) const;

  // Calls f(offset, line) for every matching line of text, in order: offset is where the line starts in text.
  template <typename F>
  void for_each_match(std::string_view text, F&& f) const {
    if (kind_ == Kind::Substring) {
      std::size_t from = 0;
      while (from < text.size()) {
        const std::size_t hit = find(text, from);
        if (hit == std::string_view::npos) return;
        const std::size_t begin = line_begin(text, hit);
        const std::size_t end = line_end(text, hit);
        f(begin, text.substr(begin, end - begin));
        from = end + 1;
      }
      return;
    }
    std::size_t begin = 0;
    while (begin < text.size()) {
      const std::size_t end = line_end(text, begin);
      const auto line = text.substr(begin, end - begin);
      if (matches(line)) f(begin, line);
      begin = end + 1;
    }
  }

  // The number of matching lines of text.
  std::size_t count_matches(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }
  Kind kind() const { return kind_; }

  // Where the line holding text[at] starts / ends (the index of its '\n', or text.size()).
  static std::size_t line_begin(std::string_view text, std::size_t at);
  static std::size_t line_end(std::string_view text, std::size_t at);

 private:
  std::size_t find(std::string_view text, std::size_t from) const;  // the next occurrence of the pattern, or npos

  std::string pattern_;
  Kind kind_;
  std::shared_ptr<const re2::RE2> regex_;  // Kind::Regex only (shared: a matcher is cheap to copy)
};

// "substring" or "regex" as a Kind; ConfigError otherwise.
LineMatcher::Kind parse_match_kind(std::string_view name);

}  // namespace afs::text
