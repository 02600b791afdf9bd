// Operators and sources registered by name, so a job file or the command line can name them.
// A registry is an ordinary object (no global): the program builds one and each algorithm library adds its
// operators to it (e.g. afs::algorithms::register_all(registry)).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"

namespace afs {

// Where an operator or source instance sits in its stage.
struct InstanceInfo {
  int index = 0;  // 0 .. parallelism-1
  int parallelism = 1;
};

using OperatorFactory = std::function<std::unique_ptr<Operator>(const Params&, const InstanceInfo&)>;
using SourceFactory = std::function<std::unique_ptr<Source>(const Params&, const InstanceInfo&)>;

class Registry {
 public:
  void add_operator(const std::string& name, const std::string& description, OperatorFactory factory);
  void add_source(const std::string& name, const std::string& description, SourceFactory factory);

  // Throw ConfigError naming the unknown name and listing the known ones.
  std::unique_ptr<Operator> make_operator(const std::string& name, const Params& p, const InstanceInfo& at) const;
  std::unique_ptr<Source> make_source(const std::string& name, const Params& p, const InstanceInfo& at) const;

  bool has_operator(const std::string& name) const { return operators_.count(name) != 0; }
  bool has_source(const std::string& name) const { return sources_.count(name) != 0; }
  // name -> description, for --help.
  std::vector<std::pair<std::string, std::string>> operator_names() const;
  std::vector<std::pair<std::string, std::string>> source_names() const;

 private:
  struct OpEntry {
    std::string description;
    OperatorFactory factory;
  };
  struct SrcEntry {
    std::string description;
    SourceFactory factory;
  };
  std::map<std::string, OpEntry> operators_;
  std::map<std::string, SrcEntry> sources_;
};

}  // namespace afs
