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
// A parameter set that the factory never asked for is a misspelling or one the kind does not have: name it and the
// ones it asked for.
void check_all_read(const char* what, const std::string& kind, const Params& tracked) {
  auto unread = tracked.unread();
  if (unread.empty()) return;
  std::string names;
  for (const auto& n : unread) names += (names.empty() ? "'" : ", '") + n + "'";
  std::string asked;
  for (const auto& n : tracked.asked()) asked += (asked.empty() ? "" : ", ") + n;
  throw ConfigError(std::string(what) + " '" + kind + "': unknown parameter" + (unread.size() > 1 ? "s " : " ") +
                    names + " (it reads: " + (asked.empty() ? "none" : asked) + ")");
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
  auto tracked = p.tracking_reads();
  auto op = it->second.factory(tracked, at);
  check_all_read("operator", name, tracked);
  return op;
}

std::unique_ptr<Source> Registry::make_source(const std::string& name, const Params& p, const InstanceInfo& at) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) {
    throw ConfigError("unknown source '" + name + "' (known: " + known(sources_) + ")");
  }
  auto tracked = p.tracking_reads();
  auto src = it->second.factory(tracked, at);
  check_all_read("source", name, tracked);
  return src;
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
