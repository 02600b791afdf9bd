// Writers for the text formats the readers take (ml/readers.h): a dataset's examples as CSV or LIBSVM lines, so that
// a generated dataset can be written once and trained on again from the file (`afstream gen --job learn`), here or
// by another system. Numbers are written in their shortest exact form: the readers give back the same doubles.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "ml/dataset.h"

namespace afs::ml {

enum class TextFormat : std::uint8_t {
  kCsv = 1,     // label first, then every dense feature (read_csv with its defaults)
  kLibsvm = 2,  // label, then index:value for the nonzero features, 1-based, increasing (read_libsvm, hash_bits 0)
};

// "csv" or "libsvm"; ConfigError naming the text otherwise.
TextFormat parse_text_format(const std::string& s);
const char* format_name(TextFormat f);
// The format a dataset is best written in: LIBSVM for sparse examples, CSV for dense ones.
TextFormat natural_format(const DatasetInfo& info);

// Writes examples [begin, end) of d to out, one line each, in order; `name` names the destination in errors.
// Labels: binary as 1 / -1, class ids as integers, real targets exactly. LIBSVM: a sparse example's entries with the
// same index (hashed features that collided) are summed, and entries of value 0 left out, as a LIBSVM line must
// list each index once; a dense example lists its nonzero features. Calls progress(examples written) every 65,536
// examples and at the end, when given.
// Throws ConfigError for CSV of a sparse dataset (a CSV line holds every feature: 2^18 columns for the KDD-like set)
// or a range outside d, InputError naming `name` if the stream fails.
std::uint64_t write_examples(const Dataset& d, std::uint64_t begin, std::uint64_t end, TextFormat format,
                             std::ostream& out, const std::string& name,
                             const std::function<void(std::uint64_t)>& progress = {});

}  // namespace afs::ml
