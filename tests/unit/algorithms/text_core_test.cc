// Unit tests of the engine-free text core (algorithms/text): the tokenizer, the line matcher against a naive
// line-by-line search, corpus listing and chunking (every byte in exactly one chunk, chunks end at line ends), the
// errors for bad input, the synthetic corpus, and the ground-truth scans.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/text/corpus.h"
#include "algorithms/text/matcher.h"
#include "algorithms/text/scan.h"
#include "algorithms/text/synthetic.h"
#include "algorithms/text/tokenizer.h"
#include "tests/temp_dir.h"

namespace afs::text {
namespace {

namespace fs = std::filesystem;
using afs::testing::TempDir;

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> v;
  std::string buf;
  for_each_word(text, buf, [&](std::string_view w) { v.emplace_back(w); });
  return v;
}

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// Random text with long and short lines, empty lines, punctuation, upper case, UTF-8 and a missing last '\n'.
std::string random_text(std::uint64_t seed, std::size_t bytes) {
  std::mt19937_64 rng(seed);
  static const std::vector<std::string> pieces = {"the",  "The", "quick", "fox", "THE", "\xc3\xa9t\xc3\xa9",
                                                  "a1b2", ",",   ".",     " ",   "  ",  "\n",
                                                  "\n\n", "\t",  "don't", "x"};
  std::string s;
  while (s.size() < bytes) {
    s += pieces[rng() % pieces.size()];
    if (rng() % 50 == 0) s += std::string(rng() % 3000, 'z');  // a long word / line
    if (rng() % 3) s += ' ';
  }
  return s;
}

TEST(TextTokenizer, SplitsAtNonWordBytesAndFoldsAsciiCase) {
  EXPECT_EQ(words_of("The quick, brown FOX... jumps!"),
            (std::vector<std::string>{"the", "quick", "brown", "fox", "jumps"}));
  EXPECT_EQ(words_of("don't x2 A1b\t\n\r\n  "), (std::vector<std::string>{"don", "t", "x2", "a1b"}));
  EXPECT_EQ(words_of("\xc3\x89T\xc3\x89 caf\xc3\xa9"), (std::vector<std::string>{"\xc3\x89t\xc3\x89", "caf\xc3\xa9"}));
  EXPECT_TRUE(words_of("").empty());
  EXPECT_TRUE(words_of(" ,.;\n").empty());
  EXPECT_EQ(words_of(std::string("a\0b", 3)), (std::vector<std::string>{"a", "b"}));  // NUL separates
  EXPECT_EQ(count_words("The quick, brown FOX... jumps!"), 5u);
}

TEST(TextTokenizer, HashesTheFoldedWordWithItsSeed) {
  std::vector<std::uint64_t> h;
  std::string buf;
  for_each_word_hash("Word WORD word other", 7, buf, [&](std::uint64_t x) { h.push_back(x); });
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0], h[1]);
  EXPECT_EQ(h[1], h[2]);
  EXPECT_NE(h[2], h[3]);
  EXPECT_EQ(h[0], word_hash("word", 7));
  EXPECT_NE(word_hash("word", 7), word_hash("word", 8));
}

TEST(TextTokenizer, CountEqualsTheWordsFoundOnRandomText) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto t = random_text(seed, 20000);
    EXPECT_EQ(count_words(t), words_of(t).size()) << seed;
  }
}

// The matcher's whole-text search against the plainest reference: split into lines, search each.
std::vector<std::size_t> naive_matches(const std::string& text, const std::string& pattern) {
  std::vector<std::size_t> v;
  std::size_t b = 0;
  while (b < text.size()) {
    auto e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    if (text.substr(b, e - b).find(pattern) != std::string::npos) v.push_back(b);
    b = e + 1;
  }
  return v;
}

TEST(TextMatcher, SubstringEqualsNaiveLineSearchAndRegexAgrees) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const auto t = random_text(seed, 30000);
    for (const std::string pattern : {"the", "fox", "zz", "The quick", "e t", "\xc3\xa9"}) {
      const LineMatcher sub(pattern, LineMatcher::Kind::Substring);
      std::vector<std::size_t> got;
      sub.for_each_match(t, [&](std::size_t off, std::string_view line) {
        got.push_back(off);
        EXPECT_EQ(line.find('\n'), std::string_view::npos);
        EXPECT_NE(line.find(pattern), std::string_view::npos);
      });
      EXPECT_EQ(got, naive_matches(t, pattern)) << pattern << " seed " << seed;
      EXPECT_EQ(sub.count_matches(t), got.size());
    }
    // A regex of a plain word finds the same lines as the substring.
    const LineMatcher re("fox", LineMatcher::Kind::Regex);
    std::vector<std::size_t> got;
    re.for_each_match(t, [&](std::size_t off, std::string_view) { got.push_back(off); });
    EXPECT_EQ(got, naive_matches(t, "fox"));
  }
}

TEST(TextMatcher, RegexAndEdgeLines) {
  const LineMatcher re("^[a-c]+$", LineMatcher::Kind::Regex);
  std::vector<std::size_t> got;
  re.for_each_match("abc\nabd\n\ncab\nccc", [&](std::size_t off, std::string_view) { got.push_back(off); });
  EXPECT_EQ(got, (std::vector<std::size_t>{0, 9, 13}));
  const LineMatcher sub("x", LineMatcher::Kind::Substring);
  EXPECT_EQ(sub.count_matches("x"), 1u);                // a last line without '\n'
  EXPECT_EQ(sub.count_matches("xx x\nx\n\nax\n"), 3u);  // one per line, however many hits
  EXPECT_EQ(sub.count_matches(""), 0u);
}

// Long lines: std::regex recursed once per character and overflowed the stack on a line of about 40 KB ('.*z');
// the matcher now takes time linear in the line and no stack. Bytes are matched as bytes (Latin-1): '.' is one byte
// of a UTF-8 character or of invalid UTF-8 alike.
TEST(TextMatcher, RegexOnLongLinesAndAnyBytes) {
  const std::string line(4 << 20, 'x');
  EXPECT_FALSE(LineMatcher(".*z", LineMatcher::Kind::Regex).matches(line));
  EXPECT_TRUE(LineMatcher(".*x$", LineMatcher::Kind::Regex).matches(line));
  EXPECT_TRUE(LineMatcher("x+y", LineMatcher::Kind::Regex).matches(line + "y"));
  EXPECT_EQ(LineMatcher("[a-z]+ing", LineMatcher::Kind::Regex).count_matches(line + "ing\n" + line + "\nsing"), 2u);
  EXPECT_TRUE(LineMatcher("^..$", LineMatcher::Kind::Regex).matches("\xc3\xbc"));  // u-umlaut in UTF-8: two bytes
  EXPECT_TRUE(LineMatcher("a.b", LineMatcher::Kind::Regex)
                  .matches("a\xff"
                           "b"));  // invalid UTF-8
  EXPECT_TRUE(LineMatcher("\xc3\xbc", LineMatcher::Kind::Regex).matches("gr\xc3\xbcn"));
  EXPECT_TRUE(LineMatcher("\\d{3}", LineMatcher::Kind::Regex).matches("id 042"));
}

TEST(TextMatcher, BadPatternsAreConfigErrors) {
  EXPECT_THROW(LineMatcher("", LineMatcher::Kind::Substring), ConfigError);
  EXPECT_THROW(LineMatcher("a\nb", LineMatcher::Kind::Substring), ConfigError);
  try {
    LineMatcher("a(b", LineMatcher::Kind::Regex);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("grep.pattern: 'a(b'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_match_kind("glob"), ConfigError);
}

TEST(TextCorpus, ListsRegularFilesRecursivelyInPathOrder) {
  TempDir d;
  write(d.path() / "b.txt", "bee\n");
  write(d.path() / "a" / "z.txt", "zed\n");
  write(d.path() / "a" / "c.txt", "");
  write(d.path() / "A.txt", "upper\n");
  const auto c = Corpus::list(d.str());
  ASSERT_EQ(c.files().size(), 4u);
  EXPECT_EQ(c.files()[0].path, "A.txt");
  EXPECT_EQ(c.files()[1].path, "a/c.txt");
  EXPECT_EQ(c.files()[2].path, "a/z.txt");
  EXPECT_EQ(c.files()[3].path, "b.txt");
  EXPECT_EQ(c.total_bytes(), 14u);
}

// A symbolic link to a file is listed under its own path, not its target's; links to directories are not followed.
TEST(TextCorpus, LinksToFilesAreListedUnderTheirOwnPaths) {
  TempDir d, outside;
  write(d.path() / "real.txt", "one\n");
  write(outside.path() / "far.txt", "two\n");
  std::filesystem::create_directories(d.path() / "sub");
  std::filesystem::create_symlink("real.txt", d.path() / "alias.txt");
  std::filesystem::create_symlink("../real.txt", d.path() / "sub" / "alias2.txt");
  std::filesystem::create_symlink(outside.path() / "far.txt", d.path() / "abs.txt");
  std::filesystem::create_directory_symlink(outside.path(), d.path() / "linked-dir");
  for (const std::string& dir : {d.str(), d.str() + "/"}) {
    const auto c = Corpus::list(dir);
    std::vector<std::string> paths;
    for (const auto& f : c.files()) paths.push_back(f.path);
    EXPECT_EQ(paths, (std::vector<std::string>{"abs.txt", "alias.txt", "real.txt", "sub/alias2.txt"})) << dir;
  }
}

// Every byte of every file is in exactly one chunk, chunks are in order, each ends at '\n' or at its file's end,
// and none is longer than chunk_bytes - 1 + max_line; for many chunk sizes and random files.
TEST(TextCorpus, ChunksCoverEveryByteExactlyOnceAndEndAtLineEnds) {
  TempDir d;
  std::vector<std::string> texts;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    texts.push_back(random_text(seed, 5000 * seed));
    write(d.path() / ("f" + std::to_string(seed) + ".txt"), texts.back());
  }
  write(d.path() / "g-empty.txt", "");
  write(d.path() / "h-newlines.txt", std::string(100, '\n'));
  // Lines longer than the first read at a cut point (512 bytes), up to max_line: the search reads on in growing
  // blocks, and a line end just past a block's end is found as well as one within it.
  std::string long_lines;
  for (const std::size_t n : {511, 512, 513, 700, 1023, 1024, 1025, 1500, 2047, 3000, 3999, 5, 3999}) {
    long_lines += std::string(n, 'x') + '\n';
  }
  write(d.path() / "i-long-lines.txt", long_lines);
  const auto c = Corpus::list(d.str());
  for (const std::uint64_t cb : {1ull, 2ull, 7ull, 100ull, 4096ull, 1ull << 20}) {
    const ChunkingOptions o{.chunk_bytes = cb, .max_line = 4000};
    const auto chunks = c.chunks(o);
    std::vector<std::uint64_t> next(c.files().size(), 0);
    std::string bytes;
    for (const auto& ch : chunks) {
      ASSERT_LT(ch.file, c.files().size());
      ASSERT_EQ(ch.offset, next[ch.file]) << "chunk size " << cb;  // contiguous, in order, no overlap
      ASSERT_GT(ch.length, 0u);
      ASSERT_LE(ch.length, max_chunk_length(o));
      next[ch.file] += ch.length;
      c.read(ch, bytes);
      const bool at_end = next[ch.file] == c.files()[ch.file].size;
      ASSERT_TRUE(bytes.back() == '\n' || at_end);
      // The chunk ends at the first '\n' at or after chunk_bytes - 1 (or earlier only at the file's end).
      const auto first_nl = bytes.find('\n', cb - 1);
      if (first_nl != std::string::npos) {
        ASSERT_EQ(first_nl + 1, bytes.size());
      }
    }
    for (std::size_t f = 0; f < next.size(); ++f) EXPECT_EQ(next[f], c.files()[f].size) << f << " at " << cb;
    // Totals over chunks equal those over files.
    TextTotals by_chunk, by_file;
    for (const auto& ch : chunks) {
      c.read(ch, bytes);
      by_chunk += text_totals(bytes);
    }
    for (std::uint32_t f = 0; f < c.files().size(); ++f) by_file += text_totals(c.read_file(f));
    EXPECT_EQ(by_chunk.bytes, by_file.bytes);
    EXPECT_EQ(by_chunk.lines, by_file.lines);
    EXPECT_EQ(by_chunk.words, by_file.words);
  }
}

TEST(TextCorpus, BadInputIsAnInputErrorNamingThePath) {
  TempDir d;
  const auto missing = (d.path() / "nope").string();
  try {
    (void)Corpus::list(missing);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // A line longer than max_line (a binary file without newlines) names the file and the offset.
  write(d.path() / "bin.dat", std::string(10000, '\x01'));
  const auto c = Corpus::list(d.str());
  try {
    (void)c.chunks({.chunk_bytes = 100, .max_line = 1000});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bin.dat"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("text.max-line"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.chunks({.chunk_bytes = 100, .max_line = 20000}).size(), 1u);  // accepted when allowed
  EXPECT_THROW((void)c.chunks({.chunk_bytes = 0, .max_line = 10}), ConfigError);
  // A file that shrank after listing.
  const auto chunks = c.chunks({.chunk_bytes = 100, .max_line = 20000});
  write(d.path() / "bin.dat", "short");
  std::string out;
  try {
    c.read(chunks[0], out);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter"), std::string::npos) << e.what();
  }
  // An unreadable file (not when running as root, who reads everything).
  if (::geteuid() != 0) {
    write(d.path() / "locked.txt", "secret\n");
    ::chmod((d.path() / "locked.txt").c_str(), 0);
    const auto c2 = Corpus::list(d.str());
    EXPECT_THROW((void)c2.read_file(1), InputError);
  }
}

TEST(TextSynthetic, DeterministicZipfTextFromADistinctVocabulary) {
  SyntheticCorpusParams p{.bytes = 200000, .files = 3, .vocabulary = 2000, .skew = 1.0, .seed = 9};
  const auto v = synthetic_vocabulary(p);
  ASSERT_EQ(v.size(), 2000u);
  EXPECT_EQ(std::set<std::string>(v.begin(), v.end()).size(), 2000u);
  EXPECT_EQ(synthetic_file(p, 1), synthetic_file(p, 1));
  EXPECT_NE(synthetic_file(p, 0), synthetic_file(p, 1));
  // Word frequencies follow the ranks: the rank-0 word is the most frequent.
  std::map<std::string, int> counts;
  for (std::uint32_t f = 0; f < 3; ++f) {
    for (const auto& w : words_of(synthetic_file(p, f))) ++counts[w];
  }
  int best = 0;
  std::string top;
  for (const auto& [w, n] : counts) {
    if (n > best) best = n, top = w;
  }
  EXPECT_EQ(top, v[0]);
  TempDir d;
  const auto dir = (d.path() / synthetic_corpus_name(p)).string();
  ensure_synthetic_corpus(dir, p);
  ensure_synthetic_corpus(dir, p);  // reused
  const auto c = Corpus::list(dir);
  ASSERT_EQ(c.files().size(), 3u);
  EXPECT_EQ(c.read_file(2), synthetic_file(p, 2));
  EXPECT_GE(c.total_bytes(), 200000u);
  EXPECT_NE(synthetic_corpus_name(p),
            synthetic_corpus_name({.bytes = 200000, .files = 3, .vocabulary = 2000, .skew = 1.0, .seed = 10}));
  EXPECT_THROW(validate({.bytes = 10, .files = 0}), ConfigError);
  EXPECT_THROW(validate({.bytes = 10, .files = 1, .vocabulary = 5, .skew = -1}), ConfigError);
}

TEST(TextScan, WordCountsAndGrepOfASmallCorpus) {
  TempDir d;
  write(d.path() / "1.txt", "The cat and the hat.\nA cat!\n");
  write(d.path() / "2.txt", "no match here\nthe end");
  const auto c = Corpus::list(d.str());
  const auto wc = scan_word_counts(c, 3);
  EXPECT_EQ(wc.totals.words, 12u);
  EXPECT_EQ(wc.totals.lines, 4u);
  EXPECT_EQ(wc.totals.bytes, 49u);
  EXPECT_EQ(wc.words.at(word_hash("the", 3)).count, 3);
  EXPECT_EQ(wc.words.at(word_hash("cat", 3)).word, "cat");
  EXPECT_EQ(wc.words.at(word_hash("cat", 3)).count, 2);
  EXPECT_EQ(wc.words.size(), 9u);
  const auto g = scan_grep(c, LineMatcher("the", LineMatcher::Kind::Substring));
  ASSERT_EQ(g.matches.size(), 2u);
  EXPECT_EQ(g.matches[0].file, 0u);
  EXPECT_EQ(g.matches[0].line, 1u);
  EXPECT_EQ(g.matches[0].text, "The cat and the hat.");
  EXPECT_EQ(g.matches[1].file, 1u);
  EXPECT_EQ(g.matches[1].line, 2u);
  EXPECT_EQ(g.matches[1].offset, 14u);
  EXPECT_EQ(line_numbers("a\nb\n\nc", {0, 2, 4, 5}), (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace afs::text
