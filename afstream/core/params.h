// Named parameters of an operator or source (name -> text, "width" -> "8000"), set by the job that builds the
// topology (TopologyBuilder::source and stage) and passed to the registered factory. Typed getters throw ConfigError
// naming the parameter and what was expected; every getter returns its fallback for an absent name, so a misspelled
// name is silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>

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
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get_string(const std::string& name, const std::string& fallback) const;
  double get_double(const std::string& name, double fallback) const;
  std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
  std::uint64_t get_uint(const std::string& name, std::uint64_t fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace afs
