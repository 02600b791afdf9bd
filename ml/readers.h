// Readers for the file formats users bring their data in (issue 5): CSV, LIBSVM, Vowpal Wabbit text and
// MNIST-style IDX. Each loads the whole file into a random-access InMemoryDataset. Every malformed line is an
// InputError naming file and line ("data.csv:12: ...") or, with OnError::kSkip, skipped and counted in ReadStats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ml/dataset.h"

namespace afs::ml {

enum class OnError : std::uint8_t { kThrow, kSkip };

// Counts of one read. first_error keeps the message of the first skipped line ("file:line: what").
struct ReadStats {
  std::uint64_t lines = 0;     // lines read, blank and comment lines included
  std::uint64_t examples = 0;  // examples kept
  std::uint64_t skipped = 0;   // malformed lines skipped (OnError::kSkip)
  std::string first_error;
};

struct ReadResult {
  InMemoryDataset data;
  ReadStats stats;
};

// A finite number filling the whole of tok (one sign, '+' taken; a value too small for a double is the nearest one,
// as strtod reads it), or nullopt: how every reader here, and read_model, read a number.
std::optional<double> parse_finite(std::string_view tok);

// CSV: one example per line, numeric fields; the label is column label_column (0-based; -1 = the last column), the
// other columns are the dense features in order. Malformed: a non-numeric or empty field, a column count different
// from the first data line's, a bad label for the kind. Blank lines are ignored.
struct CsvOptions {
  int label_column = 0;
  bool header = false;  // skip the first line
  char delimiter = ',';
  LabelKind labels = LabelKind::kBinary;
  OnError on_error = OnError::kThrow;
};
ReadResult read_csv(const std::filesystem::path& path, const CsvOptions& opts = {});
ReadResult parse_csv(std::istream& in, const std::string& name, const CsvOptions& opts = {});

// LIBSVM: "label index:value index:value ..." with 1-based, strictly increasing indices (feature index i becomes
// sparse index i - 1; num_features is the largest index seen, at most kMaxRawLibsvmIndex, or hash_bits hashing when
// > 0). '#' starts a comment.
// Malformed: a bad label, a token without ':', a bad index (not a positive integer, not increasing), a bad value.
// The largest raw LIBSVM feature index (hash_bits 0): a weight per index up to it. A larger one is a ConfigError that
// asks for hashing (hash_bits).
inline constexpr std::uint64_t kMaxRawLibsvmIndex = std::uint64_t{1} << 24;
struct LibsvmOptions {
  LabelKind labels = LabelKind::kBinary;
  int hash_bits = 0;  // 0 = raw indices; 1..32 = hash index i into 2^hash_bits slots (hash_index, seed 0)
  OnError on_error = OnError::kThrow;
};
ReadResult read_libsvm(const std::filesystem::path& path, const LibsvmOptions& opts = {});
ReadResult parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opts = {});

// Vowpal Wabbit text: "label [importance] ['tag]|ns feature[:value] feature ... |ns2 ...". A namespace is named by
// the token glued to its '|' (none: the default namespace " "); features are hashed with hash_feature into 2^bits
// slots (value 1 when omitted). Labels: binary -1/+1 (0/1 accepted), real, or for kClass VW's 1 .. K, stored 0 .. K-1.
// The importance weight and tag are accepted and ignored. Malformed: no '|', an empty or bad label, a bad
// importance, a bad feature value, an empty feature name.
struct VwOptions {
  int bits = 18;  // in [1, 32]
  LabelKind labels = LabelKind::kBinary;
  OnError on_error = OnError::kThrow;
};
ReadResult read_vw(const std::filesystem::path& path, const VwOptions& opts = {});
ReadResult parse_vw(std::istream& in, const std::string& name, const VwOptions& opts = {});

// MNIST-style IDX: an images file (magic 0x00000803, unsigned bytes, dims n x rows x cols, big-endian) and a labels
// file (magic 0x00000801, n unsigned bytes). Example i has the rows*cols pixels scaled by `scale` as dense features
// and label class id labels[i]. Any problem (missing file, bad magic, a size that does not match the dims,
// differing counts) is an InputError naming the file; IDX has no lines, so there is nothing to skip.
struct IdxOptions {
  double scale = 1.0 / 255.0;
};
ReadResult read_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                    const IdxOptions& opts = {});
// Writers for the two IDX files (tests, small tools): n images of rows x cols bytes, row-major, and n labels.
void write_idx_images(const std::filesystem::path& path, std::uint32_t rows, std::uint32_t cols,
                      const std::vector<std::uint8_t>& pixels);
void write_idx_labels(const std::filesystem::path& path, const std::vector<std::uint8_t>& labels);

}  // namespace afs::ml
