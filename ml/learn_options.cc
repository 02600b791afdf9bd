// The learn.* options shared by the learn and ps jobs (ml/learn_options.h): their declarations, their checks, and
// the dataset, held-out split and learner configuration they name.
#include "ml/learn_options.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>

#include "afstream/core/errors.h"
#include "afstream/core/number_text.h"
#include "afstream/core/out_file.h"
#include "afstream/runtime/job.h"
#include "ml/learner_operator.h"
#include "ml/metrics.h"
#include "ml/writers.h"

namespace afs::ml {

namespace po = boost::program_options;

namespace {
constexpr int kDefaultClasses = 4;  // the multiclass generator's K when learn.classes is 0
}  // namespace

void add_learner_options(po::options_description& o) {
  o.add_options()("learn.task", po::value<std::string>()->default_value("logistic"),
                  "logistic | linear | hinge | softmax")(
      "learn.optimizer", po::value<std::string>()->default_value("sgd"), "sgd (eta0 / sqrt(t)) | adagrad")(
      "learn.eta0", real_value(0.5), "initial step size (> 0)")("learn.l2", real_value(1e-6),
                                                                "L2 regularisation lambda (>= 0)");
}

void add_data_options(po::options_description& o) {
  o.add_options()("learn.data", po::value<std::string>()->default_value("higgs"),
                  "higgs | kdd | logistic | linear | multiclass | file")("learn.file", path_value("FILE"),
                                                                         "data file (learn.data file)")(
      "learn.format", po::value<std::string>()->default_value("csv"),
      "csv (label first) | libsvm | vw | idx (learn.file the images, learn.labels-file the labels)")(
      "learn.labels-file", path_value("FILE"), "idx: the labels file")(
      "learn.csv-header", po::value<bool>()->default_value(false), "csv: the first line is a header (skipped)")(
      "learn.label-column", po::value<int>()->default_value(0),
      "csv: the label's column, 0-based (-1: the last); the others are the features in order")(
      "learn.on-error", po::value<std::string>()->default_value("fail"),
      "malformed file lines: fail (the error names file and line) | skip (and count them: skipped_lines)")(
      "learn.features", po::value<int>()->default_value(28), "features of the logistic/linear/multiclass data")(
      "learn.classes", po::value<int>()->default_value(0),
      "classes K of softmax: of the multiclass data (0: 4), or of a file's (0: its largest class id + 1; more may "
      "be given)")("learn.noise", real_value(0.5), "label noise of the logistic/linear/multiclass data")(
      "learn.hash-bits", po::value<int>()->default_value(18),
      "hashed features 2^bits (kdd, vw, libsvm; libsvm 0 = its own indices)")(
      "learn.holdout", po::value<std::uint64_t>()->default_value(10000),
      "held-out examples: generators, after the --items training ones; files, the last ones");
}

std::vector<std::pair<std::string, std::string>> unused_data_options(const po::variables_map& vm) {
  std::vector<std::pair<std::string, std::string>> unused;
  const auto data = vm["learn.data"].as<std::string>();
  const auto format = vm["learn.format"].as<std::string>();
  const bool file = data == "file";
  if (!(data == "kdd" || (file && (format == "vw" || format == "libsvm")))) {
    unused.emplace_back("learn.hash-bits", "kdd, vw and libsvm data only");
  }
  if (!(data == "logistic" || data == "linear" || data == "multiclass")) {
    for (const char* key : {"learn.features", "learn.noise"}) {
      unused.emplace_back(key, "logistic, linear and multiclass data only");
    }
  }
  if (!file) {
    for (const char* key : {"learn.format", "learn.on-error"}) unused.emplace_back(key, "learn.data file only");
  }
  if (!file || format != "csv") {
    for (const char* key : {"learn.csv-header", "learn.label-column"}) unused.emplace_back(key, "csv files only");
  }
  // learn.classes sizes the multiclass generator's and a file's classes (a file with another task refuses it); the
  // binary and real-valued generators have none.
  if (!(file || data == "multiclass")) unused.emplace_back("learn.classes", "multiclass data and files only");
  // A file's examples are its lines (less the held-out ones), whatever --items says.
  if (file) unused.emplace_back("items", "a file's examples are all trained on, less learn.holdout");
  return unused;
}

TrainingData training_data_from(const po::variables_map& vm, bool every_example) {
  const auto holdout = vm["learn.holdout"].as<std::uint64_t>();
  if (holdout < 1) throw ConfigError("learn.holdout: expected >= 1 held-out examples");
  const auto data = vm["learn.data"].as<std::string>();
  // The learner's own options, named as the user wrote them (the core's messages name its fields).
  const auto named = [](const char* option, const auto& check) {
    try {
      check();
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(option) + ": " + e.what());
    }
  };
  named("learn.task", [&] { (void)parse_task(vm["learn.task"].as<std::string>()); });
  named("learn.optimizer", [&] { (void)parse_optimizer(vm["learn.optimizer"].as<std::string>()); });
  const double eta0 = vm["learn.eta0"].as<double>(), l2 = vm["learn.l2"].as<double>();
  // The generators' noise, named here: the generator's own check said "learn.synthetic data: noise ..." and a nan
  // "learn.parameter 'noise': expected a number".
  if (data == "logistic" || data == "linear" || data == "multiclass") {
    const double noise = vm["learn.noise"].as<double>();
    if (!(noise >= 0) || !std::isfinite(noise)) {
      throw ConfigError("learn.noise: expected a finite number >= 0, got " + readable_text(noise));
    }
  }
  if (!(eta0 > 0) || !std::isfinite(eta0)) throw ConfigError("learn.eta0: expected a finite number > 0");
  if (!(l2 >= 0) || !std::isfinite(l2)) throw ConfigError("learn.l2: expected a finite number >= 0");
  // 0: the multiclass generator's kDefaultClasses, or a file's own (its largest class id + 1).
  const int classes = vm["learn.classes"].as<int>();
  if (classes != 0 && (classes < 2 || classes > 65536)) {
    throw ConfigError("learn.classes: expected 2 to 65536 classes (or 0: from the data), got " +
                      std::to_string(classes));
  }
  TrainingData t;
  t.params = Params()
                 .set("data", data)
                 .set("seed", vm["seed"].as<std::uint64_t>())
                 .set("task", vm["learn.task"].as<std::string>())
                 .set("optimizer", vm["learn.optimizer"].as<std::string>())
                 .set("eta0", eta0)
                 .set("l2", l2);
  // A file named for data that is generated: the user meant to train on the file (it was silently ignored). By
  // value, not by whether the option was given: a run's config.ini gives every option, defaults included.
  if (data != "file") {
    for (const char* option : {"learn.file", "learn.labels-file"}) {
      if (!vm[option].as<std::string>().empty()) {
        throw ConfigError(std::string(option) + ": names a data file, but learn.data is '" + data +
                          "' (generated data): give --learn.data file to train on the file");
      }
    }
  }
  if (data == "file") {
    // Options a file's run would ignore, refused by value as above (they were accepted and changed nothing).
    const std::string format = vm["learn.format"].as<std::string>();
    if (format != "idx" && !vm["learn.labels-file"].as<std::string>().empty()) {
      throw ConfigError("learn.labels-file: only idx data keeps its labels in a file of their own; learn.format is '" +
                        format + "', whose lines carry their labels");
    }
    if (classes != 0 && vm["learn.task"].as<std::string>() != "softmax") {
      throw ConfigError("learn.classes: only the softmax task has classes; learn.task is '" +
                        vm["learn.task"].as<std::string>() + "'");
    }
    t.params.set("file", vm["learn.file"].as<std::string>())
        .set("format", vm["learn.format"].as<std::string>())
        .set("labels-file", vm["learn.labels-file"].as<std::string>())
        .set("on-error", vm["learn.on-error"].as<std::string>())
        .set("hash-bits", static_cast<std::int64_t>(vm["learn.hash-bits"].as<int>()))
        .set("header", vm["learn.csv-header"].as<bool>() ? "true" : "false")
        .set("label-column", static_cast<std::int64_t>(vm["learn.label-column"].as<int>()));
    if (classes != 0) t.params.set("classes", static_cast<std::int64_t>(classes));
  } else {
    t.items = vm["items"].as<std::uint64_t>();
    if (t.items < 1) throw ConfigError("items: expected >= 1 training examples");
    t.params.set("examples", t.items + holdout);
    if (data == "kdd") t.params.set("hash-bits", static_cast<std::int64_t>(vm["learn.hash-bits"].as<int>()));
    if (data == "logistic" || data == "linear" || data == "multiclass") {
      t.params.set("features", static_cast<std::int64_t>(vm["learn.features"].as<int>()))
          .set("noise", vm["learn.noise"].as<double>())
          .set("classes", static_cast<std::int64_t>(classes == 0 ? kDefaultClasses : classes));
    }
  }
  // Load (or generate) the data and check the learner's options now, with the option names.
  try {
    auto loaded = load_dataset(t.params);
    t.data = std::move(loaded.data);
    t.read = std::move(loaded.stats);
    t.learner = learner_config_from(t.params, t.data->info());
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("learn.") + e.what());
  }
  if (data == "file") {
    if (every_example && t.data->size() <= holdout) {
      t.holdout_end = t.data->size();
      return t;
    }
    if (t.data->size() <= holdout) {
      // Skipped lines said, with the first: a wide first line fixes a CSV's column count, and every right line after
      // it was skipped (the error spoke of the one example left).
      const std::string skipped =
          t.read.skipped == 0
              ? std::string()
              : "; " + std::to_string(t.read.skipped) + " of its " + std::to_string(t.read.lines) +
                    " lines were skipped as malformed (learn.on-error skip), the first: " + t.read.first_error;
      throw ConfigError("learn.holdout: " + std::to_string(holdout) + " held-out examples leave none of the " +
                        std::to_string(t.data->size()) + " in the file for training" + skipped);
    }
    t.items = t.data->size() - holdout;
  }
  t.holdout_end = t.items + holdout;
  return t;
}

TextFormat training_data_format(const po::variables_map& vm, const std::string& format) {
  if (vm["learn.data"].as<std::string>() == "file") {
    throw ConfigError("learn.data: file names data in a file (learn.file '" + vm["learn.file"].as<std::string>() +
                      "'), there is nothing to generate: gen writes generated data (higgs, kdd, logistic, linear, "
                      "multiclass)");
  }
  const DatasetInfo info = training_data_from(vm).data->info();
  TextFormat f = natural_format(info);
  if (!format.empty()) {
    try {
      f = parse_text_format(format);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("gen.format: ") + e.what());
    }
  }
  // Read back, a LIBSVM file's indices are taken as they are (learn.hash-bits 0), at most kMaxRawLibsvmIndex of them.
  if (f == TextFormat::kLibsvm && info.num_features > kMaxRawLibsvmIndex) {
    throw ConfigError("learn.hash-bits: the " + vm["learn.data"].as<std::string>() + " data has " +
                      std::to_string(info.num_features) +
                      " weights, and a libsvm file read back takes its indices "
                      "as they are, at most 2^24 of them: generate it with --learn.hash-bits 24 or less");
  }
  if (f == TextFormat::kCsv && info.sparse) {
    throw ConfigError("gen.format: csv holds every feature of each example, and the " +
                      vm["learn.data"].as<std::string>() + " data's are sparse (" + std::to_string(info.num_features) +
                      " of them): write it as libsvm");
  }
  return f;
}

WrittenInput write_training_data(const po::variables_map& vm, const std::string& format, std::ostream& out,
                                 const std::string& path, const GenProgress& progress) {
  const TextFormat f = training_data_format(vm, format);
  const TrainingData t = training_data_from(vm);
  const std::uint64_t total = t.holdout_end;
  const auto written = write_examples(*t.data, 0, total, f, out, path, [&](std::uint64_t n) {
    if (progress) progress(n, total);
  });
  WrittenInput w{written,
                 format_name(f),
                 {"--learn.data", "file", "--learn.file", path, "--learn.format", format_name(f), "--learn.holdout",
                  exact_text(total - t.items)}};
  if (f == TextFormat::kLibsvm) w.read_back.insert(w.read_back.end(), {"--learn.hash-bits", "0"});
  // The classes the data has, which a file read back takes from its largest class id (its last class may not occur).
  if (t.data->info().labels == LabelKind::kClass) {
    w.read_back.insert(w.read_back.end(), {"--learn.classes", std::to_string(t.data->info().num_classes)});
  }
  w.read_back.insert(w.read_back.end(), {"--learn.task", vm["learn.task"].as<std::string>(), "--seed",
                                         exact_text(vm["seed"].as<std::uint64_t>())});
  return w;
}

void write_skipped(const std::string& path, const ReadStats& read) {
  if (read.skipped == 0) return;
  std::ofstream f(path);
  f << read.skipped << " malformed lines skipped of " << read.lines << " (" << read.examples
    << " examples kept); the first: " << read.first_error << '\n';
  close_checked(f, path);
}

void write_model(const std::string& path, const Eigen::VectorXd& w) {
  std::ofstream f(path);
  f.precision(std::numeric_limits<double>::max_digits10);
  f << "index,weight\n";
  for (Eigen::Index i = 0; i < w.size(); ++i) {
    if (w[i] != 0 || i + 1 == w.size()) f << i << ',' << w[i] << '\n';
  }
  close_checked(f, path);
}

ModelFile read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("eval.model: cannot read the model file '" + path + "'");
  ModelFile m;
  std::string line;
  std::uint64_t n = 0;
  const auto bad = [&](const std::string& what) {
    return InputError(path + ":" + std::to_string(n) + ": " + what + " (a model file is the line index,weight, then " +
                      "one line index,weight per weight, indices increasing: a run's model.csv)");
  };
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n == 1) {
      if (line != "index,weight") throw bad("expected the header 'index,weight', got '" + line.substr(0, 80) + "'");
      continue;
    }
    const auto comma = line.find(',');
    if (comma == std::string::npos || line.find(',', comma + 1) != std::string::npos) {
      throw bad("expected 'index,weight', got '" + line.substr(0, 80) + "'");
    }
    const std::string_view is(line.data(), comma);
    std::uint64_t index = 0;
    const auto [p, ec] = std::from_chars(is.data(), is.data() + is.size(), index);
    if (is.empty() || ec != std::errc() || p != is.data() + is.size()) {
      throw bad("index '" + std::string(is.substr(0, 40)) + "' is not a whole number >= 0");
    }
    if (!m.weights.empty() && index <= m.weights.back().first) {
      throw bad("index " + std::to_string(index) + " after " + std::to_string(m.weights.back().first) +
                ": expected indices increasing");
    }
    const std::string ws = line.substr(comma + 1);
    const auto weight = parse_finite(ws);
    if (!weight) throw bad("weight '" + ws.substr(0, 40) + "' is not a finite number");
    m.weights.emplace_back(index, *weight);
  }
  if (f.bad()) throw InputError("eval.model: cannot read the model file '" + path + "'");
  if (n == 0) throw InputError(path + ": empty (a model file starts with the line index,weight)");
  m.size = m.weights.empty() ? 0 : m.weights.back().first + 1;
  return m;
}

namespace {

// "K x (d + 1) = N weights" / "d + 1 = N weights": a learner's shape, for messages.
std::string shape_text(int outputs, std::uint64_t features) {
  const std::string per = "(" + std::to_string(features) + " features + a bias)";
  const std::uint64_t n = static_cast<std::uint64_t>(outputs) * (features + 1);
  return (outputs > 1 ? std::to_string(outputs) + " outputs x " + per : per) + " = " + std::to_string(n) + " weights";
}

}  // namespace

ModelEvaluation evaluate_model(const po::variables_map& vm, const std::string& model_path, bool all_examples) {
  // The model first: reading it costs little, loading the data may take long.
  const ModelFile model = read_model(model_path);
  TrainingData t;
  try {
    t = training_data_from(vm, all_examples);
  } catch (const ConfigError& e) {
    // A test file no longer than learn.holdout: it is all held out, which eval.split all scores.
    if (!all_examples && std::string_view(e.what()).find("leave none of the") != std::string_view::npos) {
      throw ConfigError(std::string(e.what()) + " (afstream eval --eval.split all scores every example of a file)");
    }
    throw;
  }
  LearnerConfig c = t.learner;
  const std::uint64_t k = static_cast<std::uint64_t>(outputs(c));
  const std::uint64_t expected = weight_count(c);
  // A test file read with its own indices (libsvm, learn.hash-bits 0) may not reach the model's last features.
  const bool own_indices =
      t.from_file() && vm["learn.format"].as<std::string>() == "libsvm" && vm["learn.hash-bits"].as<int>() == 0;
  if (model.size != expected) {
    const bool wider = own_indices && model.size > expected && model.size % k == 0 &&
                       model.size / k - 1 <= kMaxRawLibsvmIndex;  // the most features such data has
    // The data's classes (learn.classes 0: the test file's largest class id + 1) may be fewer than the model's, and a
    // size alone then cannot tell classes from features: 3 x (9 + 1) weights read as 2 x (14 + 1). Given, they can.
    if (wider && k > 1 && vm["learn.classes"].as<int>() == 0) {
      throw ConfigError("learn.classes: " + model_path + " holds " + std::to_string(model.size) +
                        " weights, more than the data's " + shape_text(static_cast<int>(k), c.num_features) +
                        ", and its classes cannot be told from its features: give --learn.classes, the classes it "
                        "was trained with (LIBSVM data read with its own indices may lack the model's last "
                        "features, and its last classes)");
    }
    if (!wider) {
      const std::string model_shape = model.size % k == 0 && model.size > 0
                                          ? shape_text(static_cast<int>(k), model.size / k - 1)
                                          : std::to_string(model.size) + " weights";
      throw ConfigError("eval.model: " + model_path + " holds a model of " + model_shape + ", the data give " +
                        shape_text(static_cast<int>(k), c.num_features) +
                        ": evaluate with the options it was trained with (learn.task, learn.data or the file's "
                        "columns, learn.features, learn.hash-bits, learn.classes)");
    }
    c.num_features = model.size / k - 1;
  }
  Eigen::VectorXd w = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(model.size));
  for (const auto& [i, v] : model.weights) w[static_cast<Eigen::Index>(i)] = v;
  const std::uint64_t begin = all_examples ? 0 : t.items;
  const HoldoutResult h = evaluate(c, w, *t.data, begin, t.holdout_end);
  double l1 = std::numeric_limits<double>::quiet_NaN();
  if (const auto truth = true_model(t.params); truth && truth->size() == w.size()) l1 = l1_change(w, *truth);
  const std::string data = t.from_file() ? vm["learn.file"].as<std::string>()
                                         : "the generated " + vm["learn.data"].as<std::string>() + " data (seed " +
                                               std::to_string(vm["seed"].as<std::uint64_t>()) + ")";
  ModelEvaluation e;
  e.examples = (all_examples ? "all " + std::to_string(h.examples) + " examples of "
                             : "the " + std::to_string(h.examples) + " held-out examples of ") +
               data;
  e.scores = {{"examples", static_cast<double>(h.examples)},
              {"loss", h.average_loss},
              {"accuracy", h.accuracy},
              {"l1_to_true", l1}};
  return e;
}

ModelEvaluation TrainingDataJob::evaluate_model(const po::variables_map& vm, const std::string& model_path,
                                                bool all_examples) {
  return ml::evaluate_model(vm, model_path, all_examples);
}

}  // namespace afs::ml
