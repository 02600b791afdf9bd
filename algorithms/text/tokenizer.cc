// The word tokenizer: the word hash and the word count of a text.
#include "algorithms/text/tokenizer.h"

#include <xxhash.h>

namespace afs::text {

std::uint64_t word_hash(std::string_view word, std::uint64_t seed) {
  return XXH3_64bits_withSeed(word.data(), word.size(), seed);
}

std::size_t count_words(std::string_view text) {
  std::size_t n = 0;
  bool in_word = false;
  for (const char ch : text) {
    const bool w = is_word_byte(static_cast<unsigned char>(ch));
    n += w && !in_word;
    in_word = w;
  }
  return n;
}

}  // namespace afs::text
