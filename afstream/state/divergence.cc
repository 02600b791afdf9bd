// Names of the divergence metrics (DESIGN.md section 3) for options, logs and metrics files.
#include "afstream/state/divergence.h"

#include <cctype>
#include <string>

#include "afstream/core/errors.h"

namespace afs {

const char* to_string(Metric m) {
  switch (m) {
    case Metric::MaxAbs:
      return "max-abs";
    case Metric::L1:
      return "l1";
    case Metric::L2:
      return "l2";
    case Metric::NewKeys:
      return "new-keys";
  }
  return "unknown";
}

Metric parse_metric(std::string_view name) {
  std::string norm;
  for (char c : name) {
    if (c == '-' || c == '_') continue;
    norm.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (norm == "maxabs") return Metric::MaxAbs;
  if (norm == "l1") return Metric::L1;
  if (norm == "l2") return Metric::L2;
  if (norm == "newkeys") return Metric::NewKeys;
  throw ConfigError("unknown divergence metric '" + std::string(name) +
                    "' (expected one of: max-abs, l1, l2, new-keys)");
}

}  // namespace afs
