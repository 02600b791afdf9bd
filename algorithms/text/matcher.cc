// The line matcher: substring search over a whole text with memmem, or RE2 per line.
#include "algorithms/text/matcher.h"

#include <re2/re2.h>
#include <string.h>

#include <cstring>

#include "afstream/core/errors.h"

namespace afs::text {

LineMatcher::LineMatcher(std::string pattern, Kind kind) : pattern_(std::move(pattern)), kind_(kind) {
  if (pattern_.empty()) throw ConfigError("grep.pattern: expected a non-empty pattern");
  if (pattern_.find('\n') != std::string::npos) {
    throw ConfigError("grep.pattern: a pattern holding a newline matches no line (lines are split at '\\n')");
  }
  if (kind_ == Kind::Regex) {
    RE2::Options options;
    options.set_encoding(RE2::Options::EncodingLatin1);  // bytes, as the text is (any encoding, or none)
    options.set_log_errors(false);
    auto re = std::make_shared<const RE2>(pattern_, options);
    if (!re->ok()) {
      throw ConfigError("grep.pattern: '" + pattern_ +
                        "' is not a valid regular expression (RE2 syntax): " + re->error());
    }
    regex_ = std::move(re);
  }
}

bool LineMatcher::matches(std::string_view line) const {
  if (kind_ == Kind::Substring) return find(line, 0) != std::string_view::npos;
  return RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *regex_);
}

std::size_t LineMatcher::count_matches(std::string_view text) const {
  std::size_t n = 0;
  for_each_match(text, [&](std::size_t, std::string_view) { ++n; });
  return n;
}

std::size_t LineMatcher::find(std::string_view text, std::size_t from) const {
  if (from >= text.size()) return std::string_view::npos;
  const void* hit = ::memmem(text.data() + from, text.size() - from, pattern_.data(), pattern_.size());
  return hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - text.data()) : std::string_view::npos;
}

std::size_t LineMatcher::line_begin(std::string_view text, std::size_t at) {
  const auto nl = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
  return nl == std::string_view::npos ? 0 : nl + 1;
}

std::size_t LineMatcher::line_end(std::string_view text, std::size_t at) {
  if (at >= text.size()) return text.size();
  const void* nl = std::memchr(text.data() + at, '\n', text.size() - at);
  return nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text.data()) : text.size();
}

LineMatcher::Kind parse_match_kind(std::string_view name) {
  if (name == "substring") return LineMatcher::Kind::Substring;
  if (name == "regex") return LineMatcher::Kind::Regex;
  throw ConfigError("grep kind: expected substring or regex, got '" + std::string(name) + "'");
}

}  // namespace afs::text
