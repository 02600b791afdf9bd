// A synthetic text corpus, so that `afstream run --job wordcount` works without one (the repository ships no large
// corpora): Zipf-distributed words from a generated vocabulary, seeded and deterministic. Engine-free.
//
// The vocabulary is `vocabulary` distinct lower-case ASCII words of 1..12 letters drawn from the seed; word i of the
// text is vocabulary[R_i] where R_i is rank i of a Zipf(vocabulary, skew) stream (hh::ZipfGenerator). Lines hold
// 4..16 words separated by spaces (a comma after some), start with a capital letter and end with ".\n", so the
// tokenizer's case folding and separators are exercised. The text is split over `files` files part-NNNNN.txt of
// about bytes / files bytes each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace afs::text {

struct SyntheticCorpusParams {
  std::uint64_t bytes = 8'000'000;  // total size (each file ends at the first line end past its share)
  std::uint32_t files = 8;
  std::uint64_t vocabulary = 50'000;
  double skew = 1.0;
  std::uint64_t seed = 1;
};

// Throws ConfigError naming the option (text.synthetic-bytes, text.synthetic-files, text.vocabulary, text.skew)
// when out of range.
void validate(const SyntheticCorpusParams& p);

// The vocabulary: p.vocabulary distinct words, in rank order.
std::vector<std::string> synthetic_vocabulary(const SyntheticCorpusParams& p);

// The text of file `file` (0-based) of the corpus.
std::string synthetic_file(const SyntheticCorpusParams& p, std::uint32_t file);

// Writes the corpus into dir unless dir already exists (then it is taken as written by an earlier call with the
// same parameters: the default directory name encodes them). Safe when several processes call it at once: each
// writes a private sibling directory and renames it into place; the first rename wins. Throws InputError naming
// the path if it cannot be written.
void ensure_synthetic_corpus(const std::string& dir, const SyntheticCorpusParams& p);

// A directory name that identifies p: "afstream-text-<16 hex digits>" (a hash of every parameter).
std::string synthetic_corpus_name(const SyntheticCorpusParams& p);

}  // namespace afs::text
