// The learn.* options that `afstream run --job learn` and `--job ps` share (one source of truth): the learner's
// (task, optimizer, eta0, l2) and the data's (generated, or a user's CSV / LIBSVM / VW / IDX file with its
// on-error policy, and the held-out split), and the training data they name. ml/README.md, "The data options".
#pragma once

#include <Eigen/Core>
#include <boost/program_options.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/params.h"
#include "afstream/runtime/job.h"
#include "ml/dataset.h"
#include "ml/learner.h"
#include "ml/readers.h"
#include "ml/writers.h"

namespace afs::ml {

// Declares learn.task, learn.optimizer, learn.eta0 and learn.l2.
void add_learner_options(boost::program_options::options_description& o);
// Declares learn.data, learn.file, learn.format, learn.labels-file, learn.csv-header, learn.label-column,
// learn.on-error, learn.features, learn.classes, learn.noise, learn.hash-bits and learn.holdout.
void add_data_options(boost::program_options::options_description& o);

// The training data and held-out split the options name, and the learner configured for it.
struct TrainingData {
  // What dataset_from() and learner_config_from() read (data, seed, task, optimizer, eta0, l2 and the data's own
  // parameters); a job adds its operators' parameters to it.
  Params params;
  std::shared_ptr<const Dataset> data;
  LearnerConfig learner;
  // Examples [0, items) are for training, [items, holdout_end) held out. Generated data: `--items` training
  // examples, then learn.holdout more; a file: its last learn.holdout examples are held out (`--items` is unused).
  std::uint64_t items = 0;
  std::uint64_t holdout_end = 0;
  // A file's reading counts: lines skipped as malformed under learn.on-error skip, and the first one's message
  // ("file:line: what"). Zero for generated data.
  ReadStats read;
  bool from_file() const { return params.get_string("data", "") == "file"; }
};

// Validates the options of add_learner_options and add_data_options (ConfigError naming the option), loads or
// generates the data (a file once per process, dataset_from's cache; InputError naming file and line for a malformed
// line under learn.on-error fail) and configures the learner for its shape (features and classes from the file).
// For every_example (afstream eval --eval.split all) a file may be all held-out examples: items is then 0.
TrainingData training_data_from(const boost::program_options::variables_map& vm, bool every_example = false);
// The data options these options leave without effect, with why (Job::unused_options of the learn and ps jobs):
// learn.hash-bits but for kdd, vw and libsvm data; learn.features and learn.noise but for the logistic, linear and
// multiclass generators; learn.format and learn.on-error but for a file; learn.csv-header and learn.label-column but
// for a CSV file.
std::vector<std::pair<std::string, std::string>> unused_data_options(const boost::program_options::variables_map& vm);

// `afstream gen` for the learn and ps jobs: writes the generated dataset the options name, training examples then the
// held-out ones, to out in `format` (csv | libsvm; "": libsvm for sparse data, csv for dense), and returns the
// options that train on the file with the same split and shape (learn.data file, learn.file path, learn.format,
// learn.holdout, learn.hash-bits 0 for libsvm: its indices are the dataset's, learn.classes for class labels: a
// file's classes are otherwise its largest class id + 1, learn.task and seed). The examples read back from it are the
// generated ones (dense bit for bit; sparse with hashed features that collided summed into one entry, which SGD sees
// alike, to rounding, and AdaGrad not quite: its sums of squared gradients see one entry of 2 where there were two
// of 1). ConfigError naming the option for data that is a file already, or a format that cannot hold the data.
// The format write_training_data writes in for these options and `format`, checked: ConfigError naming the option
// for data that is a file already, or a format that cannot hold the data (gen's check before it opens its file).
TextFormat training_data_format(const boost::program_options::variables_map& vm, const std::string& format);
WrittenInput write_training_data(const boost::program_options::variables_map& vm, const std::string& format,
                                 std::ostream& out, const std::string& path, const GenProgress& progress);

// The learn and ps jobs' part of `afstream gen` (Job::check_input, Job::write_input): their generated dataset, through
// training_data_format and write_training_data; and the data options that the others leave without effect.
class TrainingDataJob : public Job {
 public:
  bool writes_input() const override { return true; }
  void check_input(const boost::program_options::variables_map& vm, const std::string& format) override {
    (void)training_data_format(vm, format);  // (first: data in a file is refused before the job reads it)
    check_options(vm);
  }
  WrittenInput write_input(const boost::program_options::variables_map& vm, const std::string& format,
                           std::ostream& out, const std::string& path, const GenProgress& progress) override {
    return write_training_data(vm, format, out, path, progress);
  }
  std::vector<std::pair<std::string, std::string>> unused_options(
      const boost::program_options::variables_map& vm) const override {
    return unused_data_options(vm);
  }
  bool evaluates_models() const override { return true; }
  ModelEvaluation evaluate_model(const boost::program_options::variables_map& vm, const std::string& model_path,
                                 bool all_examples) override;  // ml::evaluate_model
};

// When lines were skipped (learn.on-error skip): writes how many and the first one's message ("file:line: what")
// to path (skipped.txt in a run directory), so that nothing is dropped without a trace. Nothing otherwise.
void write_skipped(const std::string& path, const ReadStats& read);
// Writes `index,weight` for the nonzero weights, full precision, and always the last weight (the last output's bias),
// so that the last row's index + 1 is the model's size (model.csv in a run directory; read_model reads it).
void write_model(const std::string& path, const Eigen::VectorXd& w);

// A model file as write_model writes it: its rows, and its size (the last row's index + 1, or 0 for no rows).
struct ModelFile {
  std::vector<std::pair<std::uint64_t, double>> weights;  // index, weight, in file order
  std::uint64_t size = 0;
};
// Reads an `index,weight` file: the header, then one row per weight with indices increasing and finite weights.
// InputError naming the file and line of a malformed row (or "cannot read" the file).
ModelFile read_model(const std::string& path);

// `afstream eval` for the learn and ps jobs: the model in model_path (a run's model.csv) scored on the data these
// options name, as the run scores its held-out examples (metrics.h evaluate): on those held-out examples, or on every
// example of the data with all_examples. The model's size must be the data's weight count (weight_count of the
// learner they configure), except that sparse data whose indices are taken as they are (libsvm, learn.hash-bits 0)
// may have fewer features than the model (a test file in which the last features do not occur): ConfigError naming
// eval.model and both shapes otherwise.
ModelEvaluation evaluate_model(const boost::program_options::variables_map& vm, const std::string& model_path,
                               bool all_examples);

}  // namespace afs::ml
