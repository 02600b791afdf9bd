#include "afstream/runtime/file_source.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <utility>

#include "afstream/core/errors.h"

namespace afs {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
}  // namespace

namespace {

// Calls f(item, line number, line) for every item of text (a whole file), in order; `path` names it in errors.
template <typename F>
std::uint64_t for_each_item(std::string_view text, const std::string& path, bool skip_bad, F&& f) {
  std::uint64_t lineno = 0, skipped = 0, index = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lineno;
    const std::string_view s = trim(line);
    if (s.empty() || s.front() == '#') continue;
    std::string_view key = s, value;
    const auto comma = s.find(',');
    if (comma != std::string_view::npos) {
      key = trim(s.substr(0, comma));
      value = trim(s.substr(comma + 1));
    }
    Item it;
    it.time = static_cast<std::int64_t>(index);
    it.value = 1;
    // A comma with no value after it ("k,") is malformed, not a weight of 1.
    bool ok = !key.empty() && (comma == std::string_view::npos || !value.empty());
    if (ok && !value.empty()) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), it.value);
      ok = ec == std::errc() && p == value.data() + value.size();
    }
    if (!ok) {
      if (!skip_bad) {
        throw InputError(path + ":" + std::to_string(lineno) + ": expected 'key' or 'key,integer value', got '" +
                         std::string(s.substr(0, 80)) + "'");
      }
      ++skipped;
      continue;
    }
    auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), it.key);
    if (ec != std::errc() || p != key.data() + key.size()) it.key = XXH3_64bits(key.data(), key.size());
    ++index;
    if (!f(it, lineno, s)) break;
  }
  return skipped;
}

FileItems parse(std::string_view text, const std::string& path, bool skip_bad) {
  FileItems r;
  r.items.reserve(text.size() / 16);
  r.skipped = for_each_item(text, path, skip_bad, [&](const Item& it, std::uint64_t, std::string_view) {
    r.items.push_back(it);
    return true;
  });
  return r;
}

std::string slurp_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("cannot read input file '" + path + "'");
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) throw InputError("error while reading input file '" + path + "'");
  return std::move(text).str();
}

}  // namespace

std::vector<Item> FileSource::read_all(const std::string& path, bool skip_bad, std::uint64_t* skipped) {
  const auto loaded = load(path, skip_bad);
  if (skipped) *skipped = loaded->skipped;
  return loaded->items;
}

std::shared_ptr<const FileItems> FileSource::load(const std::string& path, bool skip_bad) {
  // Every source instance, every worker process and every recovery reads the file again: a pipe (a FIFO, a process
  // substitution like <(zcat items.gz), /dev/stdin) gives its lines once, and the others read nothing, or wait
  // forever for a writer; a directory reads as no lines.
  std::error_code type_error;
  const auto type = std::filesystem::status(path, type_error).type();
  if (!type_error && type != std::filesystem::file_type::regular) {
    const char* what = type == std::filesystem::file_type::directory ? "a directory"
                       : type == std::filesystem::file_type::fifo    ? "a pipe"
                                                                     : "a special file";
    throw InputError("input file '" + path + "' is " + what +
                     ", not a regular file: every worker and every recovery reads it again; write it to a file first");
  }
  // What identifies a parse: the path, the policy, and the file as it is now (size and modification time).
  std::error_code size_error, time_error;
  const auto size = std::filesystem::file_size(path, size_error);
  const auto mtime = std::filesystem::last_write_time(path, time_error);
  const bool keyed = !size_error && !time_error;
  const std::string key = std::string(skip_bad ? "skip:" : "fail:") + std::to_string(size) + ":" +
                          std::to_string(mtime.time_since_epoch().count()) + ":" + path;
  static std::mutex mu;
  static std::deque<std::pair<std::string, std::shared_ptr<const FileItems>>> cache;  // newest last
  constexpr std::size_t kKept = 4;
  std::lock_guard lock(mu);  // held while parsing: the instances of one process wait for the one parse
  if (keyed) {
    for (const auto& [k, items] : cache) {
      if (k == key) return items;
    }
  }
  auto parsed = std::make_shared<const FileItems>(parse(slurp_file(path), path, skip_bad));
  if (keyed) {
    cache.emplace_back(key, parsed);
    if (cache.size() > kKept) cache.pop_front();
  }
  return parsed;
}

FileSource::FileSource(const Params& p, const InstanceInfo& at) {
  const auto path = p.get_string("path", "");
  if (path.empty()) throw ConfigError("file source: parameter 'path' is required");
  const auto policy = p.get_string("on-error", "fail");
  if (policy != "fail" && policy != "skip") {
    throw ConfigError("file source: on-error must be fail or skip, got '" + policy + "'");
  }
  all_ = load(path, policy == "skip");
  const auto n = all_->items.size();
  begin_ = n * static_cast<std::size_t>(at.index) / static_cast<std::size_t>(at.parallelism);
  end_ = n * static_cast<std::size_t>(at.index + 1) / static_cast<std::size_t>(at.parallelism);
}

std::pair<std::uint64_t, std::string> FileSource::line_of(const std::string& path, bool skip_bad, std::uint64_t index) {
  const auto text = slurp_file(path);
  std::uint64_t n = 0;
  std::pair<std::uint64_t, std::string> found{0, ""};
  for_each_item(text, path, skip_bad, [&](const Item&, std::uint64_t lineno, std::string_view line) {
    if (n++ != index) return true;
    found = {lineno, std::string(line.substr(0, 80))};
    return false;
  });
  return found;
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
  if (offset >= size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  std::copy_n(all_->items.begin() + static_cast<std::ptrdiff_t>(begin_ + offset), n, out);
  return n;
}

void register_builtin_sources(Registry& registry) {
  registry.add_source("file", "lines of 'key' or 'key,value' from a text file (path, on-error=fail|skip)",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<FileSource>(p, at); });
}

}  // namespace afs
