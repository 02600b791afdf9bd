#include "ml/writers.h"

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::ml {

namespace {

// Appends v's shortest exact text (std::to_chars: from_chars, which the readers use, gives back v).
template <typename T>
void put(std::string& line, T v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  line.append(buf, r.ptr);
}

void put_label(std::string& line, double label, LabelKind kind) {
  switch (kind) {
    case LabelKind::kBinary:
      line += label > 0 ? "1" : "-1";
      return;
    case LabelKind::kClass:
      put(line, static_cast<std::int64_t>(label));
      return;
    case LabelKind::kReal:
      put(line, label);
      return;
  }
}

}  // namespace

TextFormat parse_text_format(const std::string& s) {
  if (s == "csv") return TextFormat::kCsv;
  if (s == "libsvm") return TextFormat::kLibsvm;
  throw ConfigError("expected csv or libsvm, got '" + s + "'");
}

const char* format_name(TextFormat f) { return f == TextFormat::kCsv ? "csv" : "libsvm"; }

TextFormat natural_format(const DatasetInfo& info) { return info.sparse ? TextFormat::kLibsvm : TextFormat::kCsv; }

std::uint64_t write_examples(const Dataset& d, std::uint64_t begin, std::uint64_t end, TextFormat format,
                             std::ostream& out, const std::string& name,
                             const std::function<void(std::uint64_t)>& progress) {
  const DatasetInfo info = d.info();
  if (begin > end || end > d.size()) {
    throw ConfigError("examples [" + std::to_string(begin) + ", " + std::to_string(end) + ") are outside the " +
                      std::to_string(d.size()) + " of the dataset");
  }
  if (format == TextFormat::kCsv && info.sparse) {
    throw ConfigError("csv holds every feature of each example, and this dataset's are sparse (" +
                      std::to_string(info.num_features) + " of them): write it as libsvm");
  }
  constexpr std::uint64_t kProgressEvery = 65536;
  Example x;
  std::string line, chunk;
  std::vector<std::pair<std::uint32_t, double>> entries;
  const auto flush = [&] {
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (!out) throw InputError("cannot write '" + name + "'");
    chunk.clear();
  };
  for (std::uint64_t n = begin; n < end; ++n) {
    d.example(n, x);
    line.clear();
    put_label(line, x.label, info.labels);
    if (format == TextFormat::kCsv) {
      for (Eigen::Index j = 0; j < x.dense.size(); ++j) {
        line += ',';
        put(line, x.dense[j]);
      }
    } else {
      entries.clear();
      if (x.is_sparse()) {
        for (std::size_t k = 0; k < x.indices.size(); ++k) entries.emplace_back(x.indices[k], x.values[k]);
        std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        // Entries of one index summed (in index order), zeros left out.
        std::size_t kept = 0;
        for (std::size_t k = 0; k < entries.size();) {
          const std::uint32_t i = entries[k].first;
          double v = 0;
          for (; k < entries.size() && entries[k].first == i; ++k) v += entries[k].second;
          if (v != 0) entries[kept++] = {i, v};
        }
        entries.resize(kept);
      } else {
        for (Eigen::Index j = 0; j < x.dense.size(); ++j) {
          if (x.dense[j] != 0) entries.emplace_back(static_cast<std::uint32_t>(j), x.dense[j]);
        }
      }
      for (const auto& [i, v] : entries) {
        line += ' ';
        put(line, std::uint64_t{i} + 1);
        line += ':';
        put(line, v);
      }
    }
    line += '\n';
    chunk += line;
    if (chunk.size() >= (1 << 20)) flush();
    const std::uint64_t written = n - begin + 1;
    if (progress && written % kProgressEvery == 0) progress(written);
  }
  flush();
  if (progress) progress(end - begin);
  return end - begin;
}

}  // namespace afs::ml
