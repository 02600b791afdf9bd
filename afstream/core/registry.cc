#include "afstream/core/registry.h"

#include "afstream/core/errors.h"

namespace afs {

namespace {
template <typename Map>
std::string known(const Map& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "(none)" : s;
}
}  // namespace

void Registry::add_operator(const std::string& name, const std::string& description, OperatorFactory factory) {
  if (!operators_.emplace(name, OpEntry{description, std::move(factory)}).second) {
    throw ConfigError("operator '" + name + "' registered twice");
  }
}

void Registry::add_source(const std::string& name, const std::string& description, SourceFactory factory) {
  if (!sources_.emplace(name, SrcEntry{description, std::move(factory)}).second) {
    throw ConfigError("source '" + name + "' registered twice");
  }
}

std::unique_ptr<Operator> Registry::make_operator(const std::string& name, const Params& p,
                                                  const InstanceInfo& at) const {
  auto it = operators_.find(name);
  if (it == operators_.end()) {
    throw ConfigError("unknown operator '" + name + "' (known: " + known(operators_) + ")");
  }
  return it->second.factory(p, at);
}

std::unique_ptr<Source> Registry::make_source(const std::string& name, const Params& p, const InstanceInfo& at) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) {
    throw ConfigError("unknown source '" + name + "' (known: " + known(sources_) + ")");
  }
  return it->second.factory(p, at);
}

std::vector<std::pair<std::string, std::string>> Registry::operator_names() const {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& [k, e] : operators_) v.emplace_back(k, e.description);
  return v;
}

std::vector<std::pair<std::string, std::string>> Registry::source_names() const {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& [k, e] : sources_) v.emplace_back(k, e.description);
  return v;
}

}  // namespace afs
