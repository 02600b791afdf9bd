// Feature hashing for sparse examples (Vowpal Wabbit style, with XXH3).
#include "ml/example.h"

#include <xxhash.h>

#include <stdexcept>

namespace afs::ml {

namespace {
std::uint32_t mask_bits(std::uint64_t h, int bits) {
  if (bits < 1 || bits > 32) throw std::invalid_argument("feature hashing: bits must be in [1, 32]");
  return static_cast<std::uint32_t>(bits == 32 ? h & 0xFFFFFFFFULL : h & ((std::uint64_t{1} << bits) - 1));
}
}  // namespace

std::uint64_t hash_namespace(std::string_view ns) { return XXH3_64bits_withSeed(ns.data(), ns.size(), 0); }

std::uint32_t hash_feature(std::uint64_t namespace_hash, std::string_view name, int bits) {
  return mask_bits(XXH3_64bits_withSeed(name.data(), name.size(), namespace_hash), bits);
}

std::uint32_t hash_index(std::uint64_t raw, std::uint64_t seed, int bits) {
  return mask_bits(XXH3_64bits_withSeed(&raw, sizeof raw, seed), bits);
}

}  // namespace afs::ml
