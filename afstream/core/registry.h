// Operators and sources registered by name. Topologies are built in code, by a job (afstream/runtime/job.h, with
// TopologyBuilder), and name the kind of each stage; every worker builds its operator or source from that name here,
// as do the process runtime's controller (the final operators a job evaluates) and a backup server's compaction. A
// job file (--config) or the command line sets option values only: it cannot name operators or define a topology.
// `afstream list` prints what is registered.
// A registry is an ordinary object (no global): afstream/cli/main.cc's registry() builds one and each algorithm
// library adds its operators and sources to it (e.g. afs::distinct::register_distinct(registry)).
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
