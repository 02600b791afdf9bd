#include "afstream/runtime/file_source.h"

#include <xxhash.h>

#include <charconv>
#include <fstream>

#include "afstream/core/errors.h"

namespace afs {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::vector<Item> FileSource::read_all(const std::string& path, bool skip_bad, std::uint64_t* skipped) {
  std::ifstream f(path);
  if (!f) throw InputError("cannot read input file '" + path + "'");
  std::vector<Item> items;
  std::string line;
  std::uint64_t lineno = 0, bad = 0;
  while (std::getline(f, line)) {
    ++lineno;
    std::string_view s = trim(line);
    if (s.empty() || s.front() == '#') continue;
    std::string_view key = s, value;
    if (auto comma = s.find(','); comma != std::string_view::npos) {
      key = trim(s.substr(0, comma));
      value = trim(s.substr(comma + 1));
    }
    Item it;
    it.time = static_cast<std::int64_t>(items.size());
    it.value = 1;
    bool ok = !key.empty();
    if (ok && !value.empty()) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), it.value);
      ok = ec == std::errc() && p == value.data() + value.size();
    }
    if (!ok) {
      if (!skip_bad) {
        throw InputError(path + ":" + std::to_string(lineno) + ": expected 'key' or 'key,integer value', got '" +
                         std::string(s.substr(0, 80)) + "'");
      }
      ++bad;
      continue;
    }
    auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), it.key);
    if (ec != std::errc() || p != key.data() + key.size()) it.key = XXH3_64bits(key.data(), key.size());
    items.push_back(it);
  }
  if (f.bad()) throw InputError("error while reading input file '" + path + "'");
  if (skipped) *skipped = bad;
  return items;
}

FileSource::FileSource(const Params& p, const InstanceInfo& at) {
  const auto path = p.get_string("path", "");
  if (path.empty()) throw ConfigError("file source: parameter 'path' is required");
  const auto policy = p.get_string("on-error", "fail");
  if (policy != "fail" && policy != "skip") {
    throw ConfigError("file source: on-error must be fail or skip, got '" + policy + "'");
  }
  auto all = read_all(path, policy == "skip", &skipped_);
  const auto n = all.size();
  const auto b = n * static_cast<std::size_t>(at.index) / static_cast<std::size_t>(at.parallelism);
  const auto e = n * static_cast<std::size_t>(at.index + 1) / static_cast<std::size_t>(at.parallelism);
  items_.assign(all.begin() + static_cast<std::ptrdiff_t>(b), all.begin() + static_cast<std::ptrdiff_t>(e));
}

void FileSource::write(std::ostream& out, std::span<const Item> items, const std::string& name) {
  std::string text;
  text.reserve(items.size() * 32);
  char buf[24];  // a 64-bit integer's digits and sign
  for (const Item& it : items) {
    text.append(buf, std::to_chars(buf, buf + sizeof buf, it.key).ptr);
    text += ',';
    text.append(buf, std::to_chars(buf, buf + sizeof buf, it.value).ptr);
    text += '\n';
  }
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw InputError("cannot write '" + name + "'");
}

std::size_t FileSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= items_.size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, items_.size() - offset));
  std::copy_n(items_.begin() + static_cast<std::ptrdiff_t>(offset), n, out);
  return n;
}

void register_builtin_sources(Registry& registry) {
  registry.add_source("file", "lines of 'key' or 'key,value' from a text file (path, on-error=fail|skip)",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<FileSource>(p, at); });
}

}  // namespace afs
