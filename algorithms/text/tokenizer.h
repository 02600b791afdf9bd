// The word tokenizer of the word-count job (issue 4): what a word is, and the 64-bit hash that stands for it on the
// stream (an afstream Item carries no text, DESIGN 2). Engine-free.
//
// A word is a maximal run of word bytes: ASCII letters and digits, and every byte >= 0x80 (so UTF-8 letters stay
// inside words; the tokenizer never decodes UTF-8). Every other byte separates words. ASCII letters are folded to
// lower case; other bytes are kept as they are. Bytes are bytes: a binary file tokenizes like any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace afs::text {

// True for the bytes words are made of (see above).
inline bool is_word_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80;
}

inline unsigned char fold_case(unsigned char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c | 0x20) : c;
}

// The hash of a (case-folded) word: XXH3-64 with a seed. The word-count stream carries (word_hash, 1) items.
std::uint64_t word_hash(std::string_view word, std::uint64_t seed);

// Calls f(word) for every word of text, in order, with the case-folded word in a buffer that is valid only during
// the call. Words never span two calls: a caller that splits text must split it at non-word bytes (the corpus
// chunker splits at '\n').
template <typename F>
void for_each_word(std::string_view text, std::string& buffer, F&& f) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const end = p + text.size();
  while (p != end) {
    while (p != end && !is_word_byte(*p)) ++p;
    if (p == end) break;
    const auto* w = p;
    while (p != end && is_word_byte(*p)) ++p;
    buffer.resize(static_cast<std::size_t>(p - w));
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>(fold_case(w[i]));
    f(std::string_view(buffer));
  }
}

// Calls f(hash) for every word of text, in order: word_hash of each word for_each_word finds.
template <typename F>
void for_each_word_hash(std::string_view text, std::uint64_t seed, std::string& buffer, F&& f) {
  for_each_word(text, buffer, [&](std::string_view w) { f(word_hash(w, seed)); });
}

// The number of words in text.
std::size_t count_words(std::string_view text);

}  // namespace afs::text
