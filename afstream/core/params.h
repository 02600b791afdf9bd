// Named parameters of an operator or source (name -> text, "width" -> "8000"), set by the job that builds the
// topology (TopologyBuilder::source and stage) and passed to the registered factory. Typed getters throw ConfigError
// naming the parameter and what was expected; every getter returns its fallback for an absent name. A name set that
// the factory never asks for (a misspelling) is caught by Registry, which builds through a read-tracking copy.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "afstream/core/number_text.h"

namespace afs {

class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, std::string>> init) : values_(init) {}

  Params& set(const std::string& name, const std::string& value) {
    values_[name] = value;
    return *this;
  }
  Params& set(const std::string& name, const char* value) { return set(name, std::string(value)); }
  // Numbers are stored in their shortest exact form, so they read back exactly.
  template <typename T>
  requires std::is_arithmetic_v<T> Params& set(const std::string& name, T value) {
    values_[name] = exact_text(value);
    return *this;
  }
  bool has(const std::string& name) const {
    note_read(name);
    return values_.count(name) != 0;
  }
  std::string get_string(const std::string& name, const std::string& fallback) const;
  double get_double(const std::string& name, double fallback) const;
  std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
  std::uint64_t get_uint(const std::string& name, std::uint64_t fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

  // Read tracking, for Registry: a copy with tracking on records every name its getters and has() are asked for, so
  // that a name set but never asked for (a misspelling, or a parameter the operator does not have) can be named.
  Params tracking_reads() const {
    Params copy = *this;
    copy.tracking_ = true;
    copy.read_.clear();
    return copy;
  }
  // The names set that no getter was asked for since tracking_reads() (all of them without tracking).
  std::vector<std::string> unread() const;
  // The names asked for, set or not.
  const std::set<std::string>& asked() const { return read_; }

 private:
  void note_read(const std::string& name) const {
    if (tracking_) read_.insert(name);
  }
  std::map<std::string, std::string> values_;
  bool tracking_ = false;
  mutable std::set<std::string> read_;
};

}  // namespace afs
