// The synthetic corpus: a generated vocabulary, Zipf word ranks, lines of words, written atomically to a directory.
#include "algorithms/text/synthetic.h"

#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unordered_set>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "algorithms/heavy_hitters/zipf.h"

namespace afs::text {

namespace fs = std::filesystem;

void validate(const SyntheticCorpusParams& p) {
  if (p.bytes < 1 || p.bytes > (std::uint64_t{1} << 40)) {
    throw ConfigError("text.synthetic-bytes: expected 1 .. 2^40, got " + std::to_string(p.bytes));
  }
  if (p.files < 1 || p.files > 100000) {
    throw ConfigError("text.synthetic-files: expected 1 .. 100000, got " + std::to_string(p.files));
  }
  if (p.vocabulary < 1 || p.vocabulary > 10'000'000) {
    throw ConfigError("text.vocabulary: expected 1 .. 1e7, got " + std::to_string(p.vocabulary));
  }
  if (!(p.skew >= 0) || !std::isfinite(p.skew)) {
    throw ConfigError("text.skew: expected a finite number >= 0, got " + std::to_string(p.skew));
  }
}

std::vector<std::string> synthetic_vocabulary(const SyntheticCorpusParams& p) {
  validate(p);
  std::mt19937_64 rng(p.seed * 0x9E3779B97F4A7C15ULL + 17);
  std::vector<std::string> words;
  words.reserve(p.vocabulary);
  std::unordered_set<std::string> seen;
  seen.reserve(p.vocabulary * 2);
  // Short words first in expectation (frequent words are short in natural text), but lengths grow when the short
  // ones run out: up to 12 letters, 26^12 words, far more than the 1e7 allowed.
  std::size_t attempts = 0;
  while (words.size() < p.vocabulary) {
    const std::size_t max_len = std::min<std::size_t>(12, 3 + attempts / (words.size() + 64));
    const std::size_t len = 1 + rng() % max_len;
    std::string w(len, 'a');
    for (auto& c : w) c = static_cast<char>('a' + rng() % 26);
    ++attempts;
    if (seen.insert(w).second) words.push_back(std::move(w));
  }
  return words;
}

std::string synthetic_file(const SyntheticCorpusParams& p, std::uint32_t file) {
  validate(p);
  const auto vocab = synthetic_vocabulary(p);
  const std::uint64_t share = p.bytes / p.files + (file < p.bytes % p.files ? 1 : 0);
  // Word positions of file f start at f * 2^40: disjoint streams of one Zipf generator.
  const hh::ZipfGenerator zipf(
      {.num_keys = p.vocabulary, .skew = p.skew, .total_items = std::uint64_t{1} << 62, .seed = p.seed});
  std::mt19937_64 rng(p.seed ^ (0xD1B54A32D192ED03ULL * (file + 1)));
  std::uint64_t position = static_cast<std::uint64_t>(file) << 40;
  std::string out;
  out.reserve(static_cast<std::size_t>(share + 256));
  while (out.size() < share) {
    const int n = 4 + static_cast<int>(rng() % 13);
    for (int i = 0; i < n; ++i) {
      const auto& w = vocab[zipf.rank_at(position++)];
      const std::size_t at = out.size();
      out += w;
      if (i == 0) out[at] = static_cast<char>(out[at] - 'a' + 'A');
      if (i + 1 < n) out += (rng() % 8 == 0) ? ", " : " ";
    }
    out += ".\n";
  }
  return out;
}

std::string synthetic_corpus_name(const SyntheticCorpusParams& p) {
  char key[160];
  std::snprintf(key, sizeof key, "v1 %llu %u %llu %.17g %llu", static_cast<unsigned long long>(p.bytes), p.files,
                static_cast<unsigned long long>(p.vocabulary), p.skew, static_cast<unsigned long long>(p.seed));
  char name[64];
  std::snprintf(name, sizeof name, "afstream-text-%016llx",
                static_cast<unsigned long long>(XXH3_64bits(key, std::strlen(key))));
  return name;
}

void ensure_synthetic_corpus(const std::string& dir, const SyntheticCorpusParams& p) {
  validate(p);
  std::error_code ec;
  if (fs::exists(dir, ec)) return;
  const fs::path target(dir);
  const fs::path tmp = target.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw InputError("text.synthetic-dir: cannot create '" + tmp.string() + "': " + ec.message());
  for (std::uint32_t f = 0; f < p.files; ++f) {
    char name[32];
    std::snprintf(name, sizeof name, "part-%05u.txt", f);
    const auto path = tmp / name;
    std::ofstream out(path, std::ios::binary);
    const auto text = synthetic_file(p, f);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    try {
      close_checked(out, path.string());
    } catch (const InputError& e) {
      fs::remove_all(tmp, ec);
      throw InputError(std::string("synthetic corpus (text.synthetic-dir, or TMPDIR when it is not given): ") +
                       e.what());
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    if (!fs::exists(target, ignored)) {
      throw InputError("text.synthetic-dir: cannot create '" + dir + "': " + ec.message());
    }
    // Another process renamed its copy first: the same parameters, the same bytes.
  }
}

}  // namespace afs::text
