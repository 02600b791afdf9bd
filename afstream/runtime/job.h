// A job the command line can run by name (`afstream run --job NAME`): it declares its own options next to its
// code, builds its topology from them, and evaluates the results against its ground truth.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/core/registry.h"
#include "afstream/core/topology.h"
#include "afstream/runtime/cluster.h"
#include "afstream/runtime/config.h"

namespace afs {

// What `afstream gen` wrote (Job::write_input): how many records (items, examples), in which format, and the options
// that run the job on the file instead of generating its input again.
struct WrittenInput {
  std::uint64_t records = 0;
  std::string format;
  std::vector<std::string> read_back;  // e.g. {"--hh.input", path}
};
// Called now and then while an input is written, with the records written so far and their total.
using GenProgress = std::function<void(std::uint64_t written, std::uint64_t total)>;

// Named metric values (precision, recall, are, ...) for the summary row.
using Scores = std::vector<std::pair<std::string, double>>;

// What `afstream eval` measured (Job::evaluate_model): the examples it scored, in words ("the 10000 held-out examples
// of the generated higgs data"), and the scores (examples, loss, accuracy, ...).
struct ModelEvaluation {
  std::string examples;
  Scores scores;
};

class Job {
 public:
  virtual ~Job() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // The job's own parameters (e.g. --hh.phi), with defaults.
  virtual void add_options(boost::program_options::options_description& options) const = 0;
  // Validates the options (ConfigError naming the bad one) and builds the topology; run is the fault-tolerance
  // configuration the job will run under (an operator may size itself from the bounds).
  virtual Topology topology(const boost::program_options::variables_map& vm, const RunConfig& run) = 0;
  virtual std::uint64_t total_items() const = 0;
  // Score of the finished run against exact ground truth; writes the job's results (a file sink) into out_dir
  // when it is not empty.
  virtual Scores evaluate(Cluster& cluster, const Topology& topology, const std::string& out_dir) = 0;
  // The names of the scores evaluate() returns, in order (summary.csv columns).
  virtual std::vector<std::string> score_names() const = 0;
  // Values this job gives run options (ft.*, net.*: dotted keys, values as on the command line) that the user leaves
  // unset, in place of their general defaults; a value given on the command line or in a job file wins. The
  // effective configuration printed at start, and passed to worker processes, shows the values in force.
  virtual std::vector<std::pair<std::string, std::string>> run_defaults() const { return {}; }
  // The job's options (dotted keys) that these options leave without effect, each with why ("count-min only",
  // "hh.epsilon > 0 sizes the width"): the command-line layer notes those given on the command line (not those of a
  // job file, which may be a run's config.ini holding every option).
  virtual std::vector<std::pair<std::string, std::string>> unused_options(
      const boost::program_options::variables_map& vm) const {
    (void)vm;
    return {};
  }
  // After topology(): cautions about the options it was built from that are valid but weaken what the job promises
  // (a Space-Saving capacity too small for its guarantee at this phi), one sentence each naming the option; the
  // command-line layer prints them as notes before the run.
  virtual std::vector<std::string> cautions() const { return {}; }
  // Whether write_input writes this job's input (`afstream gen`).
  virtual bool writes_input() const { return false; }
  // `afstream gen`, before it opens anything: throws what write_input would refuse these options and this format
  // ("" for the job's own choice) for, so that a refused gen touches no file: ConfigError naming the option when there
  // is nothing to write (the options name a file already) or the format is not one the job reads, and the job's
  // options checked as a run checks them (check_options). Only when writes_input(); this default throws ConfigError.
  virtual void check_input(const boost::program_options::variables_map& vm, const std::string& format) {
    (void)vm, (void)format;
    throw ConfigError("job: " + name() + " reads no input file to write");
  }
  // Whether evaluate_model scores a model this job writes (`afstream eval`: the learners' model.csv).
  virtual bool evaluates_models() const { return false; }
  // `afstream eval`: the model in model_path scored on the data these options name (their held-out examples, or
  // every example with all_examples). ConfigError naming the option for options or a model that do not fit, InputError
  // naming file and line for a malformed model or data file. Only when evaluates_models(); this default throws
  // ConfigError.
  virtual ModelEvaluation evaluate_model(const boost::program_options::variables_map& vm, const std::string& model_path,
                                         bool all_examples) {
    (void)vm, (void)model_path, (void)all_examples;
    throw ConfigError("job: " + name() + " writes no model to evaluate");
  }
  // `afstream gen`, after check_input: writes the input these options name, what the job would generate for a run
  // with them, to out (`path` names it, in errors and in the returned options), in a format the job reads back.
  // InputError when out fails. Only when writes_input(); this default throws ConfigError.
  virtual WrittenInput write_input(const boost::program_options::variables_map& vm, const std::string& format,
                                   std::ostream& out, const std::string& path, const GenProgress& progress) {
    (void)out, (void)path, (void)progress;
    check_input(vm, format);
    return {};
  }

 protected:
  // The job's options, checked as topology() checks them for a run without fault tolerance (ConfigError naming the
  // option); for check_input, which has no run.
  void check_options(const boost::program_options::variables_map& vm) {
    RunConfig run;
    run.mode = FtMode::None;
    (void)topology(vm, run);
  }
};

// A real-valued option defaulting to d, its default shown in --help as people write it (readable_text): Boost's own
// text of a double has 17 significant digits (--hh.skew's 0.9 read 0.90000000000000002).
inline boost::program_options::typed_value<double>* real_value(double d) {
  return boost::program_options::value<double>()->default_value(d, readable_text(d));
}

// An option naming a file or directory (kind "FILE" or "DIR", shown in --help), empty by default. A run's config.ini
// records where the run was started, and a relative path read back from it is taken from there (names_a_path):
// `afstream eval --eval.run DIR` from another directory could not open the run's relative learn.file.
inline boost::program_options::typed_value<std::string>* path_value(const char* kind) {
  return boost::program_options::value<std::string>()->default_value("")->value_name(kind);
}
inline bool names_a_path(const boost::program_options::option_description& o) {
  const std::string name = o.semantic()->name();
  return name == "FILE" || name == "DIR";
}

using JobFactory = std::unique_ptr<Job> (*)();

}  // namespace afs
