// File readers: CSV, LIBSVM, Vowpal Wabbit text and MNIST-style IDX into InMemoryDataset, with file:line errors
// or a skip-and-count policy.
#include "ml/readers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"

namespace afs::ml {

void InMemoryDataset::example(std::uint64_t n, Example& out) const {
  if (n >= examples_.size()) {
    throw std::out_of_range("dataset: example " + std::to_string(n) + " of " + std::to_string(examples_.size()));
  }
  out = examples_[n];
}

std::optional<double> parse_finite(std::string_view tok) {
  // One sign: from_chars takes a '-' but not a '+', and "+-1" is no number.
  if (tok.size() > 1 && tok.front() == '+' && tok[1] != '-') tok.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec == std::errc::result_out_of_range && p == tok.data() + tok.size()) {
    // Out of range either way: too large is refused below, too small (1e-400) is the nearest double, as strtod
    // reads it (from_chars leaves v alone).
    v = std::strtod(std::string(tok).c_str(), nullptr);
    if (std::isfinite(v)) ec = std::errc();
  }
  if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

// A problem with one line; turned into "name:line: message" by LineLoop.
struct LineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    const std::size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

// A field as written, in quotes, with control bytes as \xNN: a NUL byte of a binary file ended the message there. At
// most kQuotedMax bytes of it, then how long it was: a UTF-16 file read as LIBSVM quoted a whole line, 1,019 characters
// of error.
constexpr std::size_t kQuotedMax = 64;
std::string quoted(std::string_view s) {
  std::string q = "'";
  const std::size_t whole = s.size();
  if (whole > kQuotedMax) s = s.substr(0, kQuotedMax);
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      q += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
    } else {
      q += c;
    }
  }
  if (whole > kQuotedMax) return q + "...' (" + std::to_string(whole) + " bytes)";
  return q + "'";
}

// A finite number filling the whole token, or a LineError naming `what`.
double number(std::string_view tok, const char* what) {
  const auto v = parse_finite(tok);
  if (!v) throw LineError(std::string(what) + " " + quoted(tok) + " is not a finite number");
  return *v;
}

double parse_label(std::string_view tok, LabelKind kind, bool one_based_classes) {
  const double v = number(tok, "label");
  switch (kind) {
    case LabelKind::kBinary:
      if (v == 1) return 1;
      if (v == 0 || v == -1) return -1;
      throw LineError("binary label " + quoted(tok) + " is not 0, 1, -1 or +1");
    case LabelKind::kReal:
      return v;
    case LabelKind::kClass: {
      const double lo = one_based_classes ? 1 : 0;
      if (v != std::floor(v) || v < lo || v > 65535 + lo) {
        throw LineError("class label " + quoted(tok) + " is not an integer in [" + std::to_string(int(lo)) + ", " +
                        std::to_string(65535 + int(lo)) + "]");
      }
      return v - lo;
    }
  }
  return v;
}

// Runs parse(line, example) over the lines of `in`, applying the error policy.
template <typename Parse>
ReadStats for_each_line(std::istream& in, const std::string& name, OnError policy, std::vector<Example>& out,
                        Parse parse) {
  ReadStats st;
  std::string line;
  Example ex;
  while (std::getline(in, line)) {
    ++st.lines;
    // A UTF-8 byte order mark (spreadsheets write one) belongs to the file, not to its first line's label.
    if (st.lines == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    ex.clear();
    try {
      if (!parse(std::string_view(line), ex)) continue;  // blank or comment
    } catch (const LineError& e) {
      std::string msg = name + ":" + std::to_string(st.lines) + ": " + e.what();
      if (policy == OnError::kThrow) throw InputError(msg);
      if (st.skipped++ == 0) st.first_error = std::move(msg);
      continue;
    }
    out.push_back(ex);
    ++st.examples;
  }
  if (in.bad()) throw InputError(name + ": read error after line " + std::to_string(st.lines));
  return st;
}

std::ifstream open(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path.string() + ": is a directory, not a data file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path.string() + ": cannot open for reading");
  return f;
}

int classes_of(const std::vector<Example>& ex, LabelKind kind) {
  if (kind == LabelKind::kReal) return 0;
  if (kind == LabelKind::kBinary) return 2;
  double mx = 0;
  for (const Example& e : ex) mx = std::max(mx, e.label);
  return std::max(2, static_cast<int>(mx) + 1);
}

}  // namespace

ReadResult parse_csv(std::istream& in, const std::string& name, const CsvOptions& opts) {
  std::vector<Example> examples;
  std::size_t columns = 0;  // fixed by the first data line
  bool header_pending = opts.header;
  std::vector<std::string_view> fields;
  ReadStats st = for_each_line(in, name, opts.on_error, examples, [&](std::string_view line, Example& ex) {
    if (header_pending) {
      header_pending = false;
      return false;
    }
    if (trim(line).empty()) return false;
    fields.clear();
    std::size_t b = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      if (i == line.size() || line[i] == opts.delimiter) {
        fields.push_back(trim(line.substr(b, i - b)));
        b = i + 1;
      }
    }
    // The first well-formed line fixes the column count (columns stays 0 until one is kept: a malformed first line
    // skipped under OnError::kSkip would otherwise make every line after it malformed).
    const std::size_t width = columns == 0 ? fields.size() : columns;
    if (columns == 0) {
      if (fields.size() < 2) throw LineError("a CSV line needs a label and at least one feature column");
      const long lc = opts.label_column < 0 ? static_cast<long>(fields.size()) + opts.label_column : opts.label_column;
      if (lc < 0 || lc >= static_cast<long>(fields.size())) {
        throw ConfigError("label-column: " + std::to_string(opts.label_column) + " is outside the " +
                          std::to_string(fields.size()) + " columns of " + name + " (0 the first, -1 the last)");
      }
    }
    if (fields.size() != width) {
      throw LineError("expected " + std::to_string(width) + " columns, found " + std::to_string(fields.size()));
    }
    const std::size_t lc = opts.label_column < 0 ? width + static_cast<std::size_t>(opts.label_column)
                                                 : static_cast<std::size_t>(opts.label_column);
    ex.dense.resize(static_cast<Eigen::Index>(width - 1));
    Eigen::Index j = 0;
    for (std::size_t c = 0; c < width; ++c) {
      if (c == lc) {
        if (fields[c].empty()) throw LineError("empty label in column " + std::to_string(c + 1));
        ex.label = parse_label(fields[c], opts.labels, false);
      } else {
        if (fields[c].empty()) throw LineError("empty field in column " + std::to_string(c + 1));
        ex.dense[j++] = number(fields[c], ("column " + std::to_string(c + 1)).c_str());
      }
    }
    columns = width;
    return true;
  });
  DatasetInfo info{columns == 0 ? 0 : columns - 1, false, opts.labels, classes_of(examples, opts.labels)};
  return {InMemoryDataset(info, std::move(examples)), st};
}

ReadResult read_csv(const std::filesystem::path& path, const CsvOptions& opts) {
  auto f = open(path);
  return parse_csv(f, path.string(), opts);
}

ReadResult parse_libsvm(std::istream& in, const std::string& name, const LibsvmOptions& opts) {
  if (opts.hash_bits < 0 || opts.hash_bits > 31) {
    throw ConfigError("libsvm hash_bits " + std::to_string(opts.hash_bits) + " is outside [0, 31]");
  }
  std::vector<Example> examples;
  std::uint64_t max_index = 0;
  ReadStats st = for_each_line(in, name, opts.on_error, examples, [&](std::string_view line, Example& ex) {
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const auto toks = split_ws(line);
    if (toks.empty()) return false;
    ex.label = parse_label(toks[0], opts.labels, false);
    std::uint64_t prev = 0;
    std::uint64_t line_max = 0;
    for (std::size_t t = 1; t < toks.size(); ++t) {
      const auto colon = toks[t].find(':');
      if (colon == std::string_view::npos) throw LineError("feature " + quoted(toks[t]) + " has no ':'");
      const std::string_view is = toks[t].substr(0, colon);
      std::uint64_t idx = 0;
      const auto [p, ec] = std::from_chars(is.data(), is.data() + is.size(), idx);
      if (is.empty() || ec != std::errc() || p != is.data() + is.size() || idx == 0 || idx > (std::uint64_t{1} << 31)) {
        throw LineError("feature index " + quoted(is) + " is not an integer in [1, 2^31]");
      }
      if (idx <= prev) {
        throw LineError("feature index " + std::to_string(idx) + " does not increase (after " + std::to_string(prev) +
                        ")");
      }
      prev = idx;
      line_max = idx;
      const double v = number(toks[t].substr(colon + 1), "feature value");
      ex.add_feature(opts.hash_bits > 0 ? hash_index(idx, 0, opts.hash_bits) : static_cast<std::uint32_t>(idx - 1), v);
    }
    max_index = std::max(max_index, line_max);
    return true;
  });
  // Raw indices make a weight per index up to the largest: one index of 1e8 asked for about 9 GB of weights.
  if (opts.hash_bits == 0 && max_index > kMaxRawLibsvmIndex) {
    throw ConfigError("hash-bits: " + name + " has feature index " + std::to_string(max_index) +
                      ", and its indices taken as they are would make as many weights (at most 2^24 = " +
                      std::to_string(kMaxRawLibsvmIndex) +
                      " are); hash them into 2^b weights with hash bits b, e.g. 24");
  }
  // Raw indices and not one feature in the file: no weight but the bias (it reached the learner as "num_features 0").
  if (opts.hash_bits == 0 && max_index == 0 && !examples.empty()) {
    throw InputError(name + ": no line has a feature (index:value), only labels: there is nothing to learn from");
  }
  const std::size_t nf = opts.hash_bits > 0 ? (std::size_t{1} << opts.hash_bits) : max_index;
  DatasetInfo info{nf, true, opts.labels, classes_of(examples, opts.labels)};
  return {InMemoryDataset(info, std::move(examples)), st};
}

ReadResult read_libsvm(const std::filesystem::path& path, const LibsvmOptions& opts) {
  auto f = open(path);
  return parse_libsvm(f, path.string(), opts);
}

ReadResult parse_vw(std::istream& in, const std::string& name, const VwOptions& opts) {
  if (opts.bits < 1 || opts.bits > 31)
    throw ConfigError("vw bits " + std::to_string(opts.bits) + " is outside [1, 31]");
  std::vector<Example> examples;
  const std::uint64_t default_ns = hash_namespace(" ");
  ReadStats st = for_each_line(in, name, opts.on_error, examples, [&](std::string_view line, Example& ex) {
    if (trim(line).empty()) return false;
    const auto bar = line.find('|');
    if (bar == std::string_view::npos) throw LineError("no '|' (a VW line is 'label |namespace features')");
    const auto head = split_ws(line.substr(0, bar));
    if (head.empty() || head[0].front() == '\'') throw LineError("missing label before the first '|'");
    ex.label = parse_label(head[0], opts.labels, opts.labels == LabelKind::kClass);
    std::size_t numbers = 0;
    for (std::size_t t = 1; t < head.size(); ++t) {
      if (head[t].front() == '\'') continue;  // tag
      if (++numbers > 2) throw LineError("unexpected token " + quoted(head[t]) + " before the first '|'");
      const double w = number(head[t], numbers == 1 ? "importance" : "base");
      if (numbers == 1 && w < 0) throw LineError("importance " + quoted(head[t]) + " is negative");
    }
    std::size_t pos = bar;
    while (pos != std::string_view::npos && pos < line.size()) {
      const auto next = line.find('|', pos + 1);
      const std::string_view seg =
          line.substr(pos + 1, next == std::string_view::npos ? std::string_view::npos : next - pos - 1);
      pos = next;
      auto toks = split_ws(seg);
      std::uint64_t ns = default_ns;
      double ns_scale = 1;
      std::size_t first = 0;
      if (!seg.empty() && seg.front() != ' ' && seg.front() != '\t' && !toks.empty()) {
        std::string_view nsname = toks[0];
        if (const auto c = nsname.find(':'); c != std::string_view::npos) {
          ns_scale = number(nsname.substr(c + 1), "namespace scale");
          nsname = nsname.substr(0, c);
        }
        if (nsname.empty()) throw LineError("empty namespace name");
        ns = hash_namespace(nsname);
        first = 1;
      }
      for (std::size_t t = first; t < toks.size(); ++t) {
        std::string_view fname = toks[t];
        double v = 1;
        if (const auto c = fname.find(':'); c != std::string_view::npos) {
          v = number(fname.substr(c + 1), "feature value");
          fname = fname.substr(0, c);
        }
        if (fname.empty()) throw LineError("feature " + quoted(toks[t]) + " has an empty name");
        ex.add_feature(hash_feature(ns, fname, opts.bits), v * ns_scale);
      }
    }
    return true;
  });
  DatasetInfo info{std::size_t{1} << opts.bits, true, opts.labels, classes_of(examples, opts.labels)};
  return {InMemoryDataset(info, std::move(examples)), st};
}

ReadResult read_vw(const std::filesystem::path& path, const VwOptions& opts) {
  auto f = open(path);
  return parse_vw(f, path.string(), opts);
}

namespace {

std::vector<std::uint8_t> slurp(const std::filesystem::path& path) {
  auto f = open(path);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw InputError(path.string() + ": read error");
  return bytes;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) |
         std::uint32_t{b[at + 3]};
}

void put_be32(std::ofstream& f, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  f.write(b, 4);
}

constexpr std::uint32_t kIdxImages = 0x00000803;
constexpr std::uint32_t kIdxLabels = 0x00000801;

}  // namespace

ReadResult read_idx(const std::filesystem::path& images, const std::filesystem::path& labels, const IdxOptions& opts) {
  if (!std::isfinite(opts.scale)) throw ConfigError("idx scale must be finite");
  const auto img = slurp(images);
  const auto lab = slurp(labels);
  const std::string in = images.string(), ln = labels.string();
  if (img.size() < 16) throw InputError(in + ": too short for an IDX images header (16 bytes)");
  if (be32(img, 0) != kIdxImages) {
    throw InputError(in + ": magic " + std::to_string(be32(img, 0)) + " is not 2051 (IDX unsigned-byte 3-d images)");
  }
  const std::uint64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  if (rows == 0 || cols == 0) throw InputError(in + ": image dimensions must be positive");
  // rows * cols < 2^64 (two 32-bit factors); n * rows * cols may not be: compared by division, so that a header
  // promising more than 2^64 bytes is not taken for one promising their remainder.
  const std::uint64_t pixels = img.size() - 16, per_image = rows * cols;
  if (pixels % per_image != 0 || pixels / per_image != n) {
    throw InputError(in + ": holds " + std::to_string(img.size() - 16) + " pixel bytes, the header promises " +
                     std::to_string(n) + " x " + std::to_string(rows) + " x " + std::to_string(cols));
  }
  if (lab.size() < 8) throw InputError(ln + ": too short for an IDX labels header (8 bytes)");
  if (be32(lab, 0) != kIdxLabels) {
    throw InputError(ln + ": magic " + std::to_string(be32(lab, 0)) + " is not 2049 (IDX unsigned-byte labels)");
  }
  if (be32(lab, 4) != n || lab.size() != 8 + n) {
    throw InputError(ln + ": holds " + std::to_string(lab.size() - 8) + " labels (header " +
                     std::to_string(be32(lab, 4)) + "), " + in + " has " + std::to_string(n) + " images");
  }
  const std::size_t d = rows * cols;
  std::vector<Example> ex(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    ex[i].dense.resize(static_cast<Eigen::Index>(d));
    for (std::size_t j = 0; j < d; ++j) ex[i].dense[static_cast<Eigen::Index>(j)] = img[16 + i * d + j] * opts.scale;
    ex[i].label = lab[8 + i];
  }
  ReadStats st;
  st.examples = n;
  DatasetInfo info{d, false, LabelKind::kClass, classes_of(ex, LabelKind::kClass)};
  return {InMemoryDataset(info, std::move(ex)), st};
}

void write_idx_images(const std::filesystem::path& path, std::uint32_t rows, std::uint32_t cols,
                      const std::vector<std::uint8_t>& pixels) {
  const std::size_t per = std::size_t{rows} * cols;
  if (per == 0 || pixels.size() % per != 0) {
    throw std::invalid_argument("write_idx_images: pixel count is not a multiple of rows * cols");
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path.string() + ": cannot open for writing");
  put_be32(f, kIdxImages);
  put_be32(f, static_cast<std::uint32_t>(pixels.size() / per));
  put_be32(f, rows);
  put_be32(f, cols);
  f.write(reinterpret_cast<const char*>(pixels.data()), static_cast<std::streamsize>(pixels.size()));
  close_checked(f, path.string());
}

void write_idx_labels(const std::filesystem::path& path, const std::vector<std::uint8_t>& labels) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path.string() + ": cannot open for writing");
  put_be32(f, kIdxLabels);
  put_be32(f, static_cast<std::uint32_t>(labels.size()));
  f.write(reinterpret_cast<const char*>(labels.data()), static_cast<std::streamsize>(labels.size()));
  close_checked(f, path.string());
}

}  // namespace afs::ml
