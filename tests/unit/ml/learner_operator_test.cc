// Tests of the online-learning operators (ml/learner_operator.h): the sgd-learner gives the core learner's weights
// bit for bit on the same example sequence, clips every step to alpha, passes the operator conformance kit
// (snapshot / restore / continue equals an uninterrupted run), and the model-merge sink averages the copies.
#include "ml/learner_operator.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/testing/conformance.h"
#include "ml/metrics.h"
#include "tests/temp_dir.h"

namespace afs::ml {
namespace {

using afs::testing::RecordingEmitter;

Params params(const std::string& data, const std::string& task, const std::string& optimizer, double clip = 1e9) {
  Params p;
  p.set("data", data).set("examples", std::uint64_t{6000}).set("seed", std::uint64_t{7});
  p.set("task", task).set("optimizer", optimizer).set("eta0", 0.5).set("l2", 1e-4).set("clip", clip);
  if (data == "kdd") p.set("hash-bits", std::int64_t{10});  // small: many hash collisions (repeated indices)
  if (data == "multiclass") p.set("features", std::int64_t{8}).set("classes", std::int64_t{4});
  if (data == "linear") p.set("features", std::int64_t{10});
  return p;
}

// A learner on a CSV file written at `path` with `lines`: SGD at eta0 0.5, no L2.
Params csv_file_params(const std::string& path, const std::string& lines, const std::string& task, double clip) {
  std::ofstream(path) << lines;
  Params p;
  p.set("data", "file").set("file", path).set("format", "csv").set("task", task).set("optimizer", "sgd");
  p.set("eta0", 0.5).set("l2", 0.0).set("clip", clip);
  return p;
}

std::vector<Item> indices(std::uint64_t begin, std::uint64_t end) {
  std::vector<Item> v;
  for (std::uint64_t n = begin; n < end; ++n) v.push_back({n, static_cast<std::int64_t>(n), 0, 0});
  return v;
}

struct Case {
  std::string data, task, optimizer;
};
const Case kCases[] = {
    {"higgs", "logistic", "sgd"},         {"higgs", "logistic", "adagrad"}, {"higgs", "hinge", "sgd"},
    {"linear", "linear", "sgd"},          {"linear", "linear", "adagrad"},  {"multiclass", "softmax", "sgd"},
    {"multiclass", "softmax", "adagrad"}, {"kdd", "logistic", "sgd"},       {"kdd", "logistic", "adagrad"}};

// Without clipping (a huge clip), the operator's weights, step counter and progressive counters equal learn()'s on
// the same sequence, bit for bit, for every task and optimizer, dense and sparse (hash collisions included).
TEST(SgdLearnerOperator, SameWeightsAsCoreLearn) {
  for (const auto& c : kCases) {
    const Params p = params(c.data, c.task, c.optimizer);
    SgdLearnerOperator op(p, {});
    const auto data = dataset_from(p);
    Learner l = make_learner(learner_config_from(p, data->info()));
    RecordingEmitter out;
    std::uint64_t correct = 0;
    double loss_sum = 0;
    Example x;
    for (const auto& item : indices(0, 3000)) {
      op.process(item, out);
      data->example(item.key, x);
      const Outcome o = learn(l, x);
      correct += o.correct ? 1 : 0;
      loss_sum += o.loss;
    }
    const std::string what = c.data + "/" + c.task + "/" + c.optimizer;
    EXPECT_EQ(op.clipped(), 0u) << what;
    ASSERT_EQ(op.weights().size(), l.weights.size()) << what;
    for (Eigen::Index i = 0; i < l.weights.size(); ++i) ASSERT_EQ(op.weights()[i], l.weights[i]) << what << " " << i;
    EXPECT_EQ(op.steps(), l.optimizer.t) << what;
    EXPECT_EQ(op.count(), 3000u) << what;
    EXPECT_EQ(op.correct_count(), correct) << what;
    EXPECT_EQ(op.loss_sum(), loss_sum) << what;
    EXPECT_TRUE(out.items.empty()) << what;  // beta = 0: nothing before finish
    // Records at the powers of two: 1, 2, ..., 2048.
    ASSERT_EQ(op.records().size(), 12u) << what;
    EXPECT_EQ(op.records().back().count, 2048) << what;
  }
}

// Mode none tells the operator to stop tracking (Operator::stop_tracking): it then learns exactly what a tracked copy
// learns (weights, steps, trace), and what it would write if asked is still a valid chain: a full snapshot and then
// a delta (its weights a full copy, its trace values all explicit) restore a fresh copy to its state.
TEST(SgdLearnerOperator, StoppedTrackingLearnsTheSameAndItsSnapshotsStillRestore) {
  for (const auto& c : kCases) {
    Params p = params(c.data, c.task, c.optimizer, 10);
    p.set("trace-every", std::int64_t{500}).set("trace-clock", "off");
    SgdLearnerOperator tracked(p, {}), untracked(p, {}), restored(p, {});
    untracked.stop_tracking();
    RecordingEmitter out;
    ByteWriter full;
    for (const auto& item : indices(0, 1700)) {
      tracked.process(item, out);
      untracked.process(item, out);
    }
    untracked.snapshot_full(full);
    untracked.mark_backed_up();
    for (const auto& item : indices(1700, 3000)) {
      tracked.process(item, out);
      untracked.process(item, out);
    }
    ByteWriter delta;
    untracked.snapshot_delta(delta);
    const std::string what = c.data + "/" + c.task + "/" + c.optimizer;
    ASSERT_TRUE(tracked.weights() == untracked.weights()) << what;
    EXPECT_EQ(tracked.steps(), untracked.steps()) << what;
    EXPECT_EQ(tracked.loss_sum(), untracked.loss_sum()) << what;
    EXPECT_EQ(untracked.trace().size(), 6u) << what;
    EXPECT_TRUE(tracked.trace() == untracked.trace()) << what;
    EXPECT_EQ(untracked.divergence(), std::numeric_limits<double>::infinity()) << what;
    ByteReader rf(full.buffer());
    restored.restore_full(rf);
    ByteReader rd(delta.buffer());
    restored.apply_delta(rd);
    EXPECT_TRUE(restored.weights() == untracked.weights()) << what;
    EXPECT_EQ(restored.steps(), untracked.steps()) << what;
    // And the restored copy continues as the uninterrupted one (its trace bases came through the delta).
    for (const auto& item : indices(3000, 3600)) {
      restored.process(item, out);
      tracked.process(item, out);
    }
    EXPECT_TRUE(restored.weights() == tracked.weights()) << what;
    EXPECT_TRUE(restored.trace() == tracked.trace()) << what;
  }
}

// A learner on the HIGGS-like data learns: its held-out prediction rate is well above chance (the data caps a
// linear model near two thirds).
TEST(SgdLearnerOperator, LearnsTheHiggsLikeData) {
  const Params p = params("higgs", "logistic", "sgd", 10);
  SgdLearnerOperator op(p, {});
  RecordingEmitter out;
  for (const auto& item : indices(0, 5000)) op.process(item, out);
  const auto h = evaluate(op.config(), op.weights(), *dataset_from(p), 5000, 6000);
  EXPECT_GT(h.accuracy, 0.6);
}

// Every step is clipped to alpha as read before it (eta_t * clip for SGD, shrinking; eta0 * clip for AdaGrad): no
// example moves the weights further (L2), and small clips do clip.
TEST(SgdLearnerOperator, EveryStepIsWithinAlpha) {
  for (const auto& c : kCases) {
    const Params p = params(c.data, c.task, c.optimizer, 0.2);
    SgdLearnerOperator op(p, {});
    EXPECT_DOUBLE_EQ(op.alpha(), 0.5 * 0.2);
    const bool sgd = std::string(c.optimizer) == "sgd";
    EXPECT_EQ(op.alpha_may_shrink(), sgd);
    RecordingEmitter out;
    Eigen::VectorXd before = op.weights();
    std::uint64_t t = 0;
    for (const auto& item : indices(0, 1000)) {
      const double alpha = op.alpha();  // the bound for the next step: eta_{t+1} * clip (SGD), eta0 * clip (AdaGrad)
      EXPECT_DOUBLE_EQ(alpha, sgd ? 0.5 / std::sqrt(static_cast<double>(t + 1)) * 0.2 : 0.5 * 0.2);
      op.process(item, out);
      ++t;
      ASSERT_LE((op.weights() - before).norm(), alpha * (1 + 1e-9)) << c.data << "/" << c.task;
      before = op.weights();
    }
    EXPECT_GT(op.clipped(), 0u) << c.data << "/" << c.task << "/" << c.optimizer;
  }
}

// The conformance kit: divergence equals the brute-force L2 distance of the weights, delta chains, snapshot /
// restore / continue equals an uninterrupted run (bytes and emitted items, finish included), truncations rejected,
// alpha and beta hold.
TEST(SgdLearnerOperator, Conforms) {
  const Case cases[] = {{"higgs", "logistic", "sgd"},
                        {"kdd", "logistic", "adagrad"},
                        {"multiclass", "softmax", "sgd"},
                        {"linear", "linear", "adagrad"}};
  for (const auto& c : cases) {
    const Params p = params(c.data, c.task, c.optimizer, 2);
    const auto items = indices(100, 1600);
    afs::testing::ConformanceOptions o;
    o.max_truncations = 64;
    EXPECT_TRUE(afs::testing::OperatorConforms([&] { return std::make_unique<SgdLearnerOperator>(p, InstanceInfo{}); },
                                               items, o))
        << c.data << "/" << c.task << "/" << c.optimizer;
  }
}

TEST(SgdLearnerOperator, RejectsBadOptionsAndIndices) {
  const auto message = [](const Params& p) {
    try {
      SgdLearnerOperator op(p, {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(params("higgs", "logistic", "sgd", 0)).find("clip"), std::string::npos);
  EXPECT_NE(message(params("higgs", "softmax", "sgd")).find("task"), std::string::npos);
  EXPECT_NE(message(params("nope", "logistic", "sgd")).find("data"), std::string::npos);
  EXPECT_NE(message(params("higgs", "logistic", "momentum")).find("momentum"), std::string::npos);
  Params bad = params("higgs", "logistic", "sgd");
  bad.set("eta0", -1.0);
  EXPECT_NE(message(bad).find("eta0"), std::string::npos);
  SgdLearnerOperator op(params("higgs", "logistic", "sgd"), {});
  RecordingEmitter out;
  EXPECT_THROW(op.process({6000, 0, 0, 0}, out), InputError);
}

// A score that overflows (values the reader accepts, 1e308, times weights of 0.25) names the example and the file;
// it was "example gives a non-finite score (a non-finite feature value?)" with neither.
TEST(SgdLearnerOperator, AnExampleItCannotLearnFromIsNamed) {
  afs::testing::TempDir dir("afs-ml-overflow");
  const auto path = (dir.path() / "ovf.csv").string();
  SgdLearnerOperator op(
      csv_file_params(path, "1,1,1,1,1,1,1,1,1\n1,1e308,1e308,1e308,1e308,1e308,1e308,1e308,1e308\n", "logistic", 1e9),
      {});
  RecordingEmitter out;
  op.process({0, 0, 0, 0}, out);
  try {
    op.process({1, 1, 1, 0}, out);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sgd-learner: example 1 (counted from 0) of " + path + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find("non-finite score"), std::string::npos) << msg;
  }
}

// A step whose squares pass the double range is clipped to the cap like any long step (its sum of squares was
// infinite, the scale cap / sqrt(inf) 0, and the example was not learned from at all).
TEST(SgdLearnerOperator, AStepOfHugeValuesIsClippedNotDropped) {
  afs::testing::TempDir dir("afs-ml-huge");
  const auto path = (dir.path() / "huge.csv").string();
  SgdLearnerOperator op(csv_file_params(path, "1,1e200,1e200\n1,1,1\n", "logistic", 10), {});
  RecordingEmitter out;
  op.process({0, 0, 0, 0}, out);
  const Eigen::VectorXd w = op.weights();
  ASSERT_TRUE(w.allFinite());
  // The two features' weights moved by the same amount, the step's length the cap (eta0 * clip = 5 at the first
  // step, a little below), the bias's share of it nothing next to theirs.
  EXPECT_GT(w.norm(), 4.99);
  EXPECT_LE(w.norm(), 5);
  EXPECT_NEAR(w[0], 5 / std::sqrt(2.0), 1e-6);
  EXPECT_DOUBLE_EQ(w[0], w[1]);
}

// A gradient past the double range with finite scores (linear: residual 1e200 times feature 1e200) is refused at
// the example that gives it; it used to become an infinite step, NaN weights after the clip (0 * inf), and an error
// naming the next, ordinary example.
TEST(SgdLearnerOperator, AnInfiniteGradientIsRefusedAtItsOwnExample) {
  afs::testing::TempDir dir("afs-ml-infgrad");
  const auto path = (dir.path() / "inf.csv").string();
  SgdLearnerOperator op(csv_file_params(path, "1e200,1e200\n1,1\n", "linear", 10), {});
  RecordingEmitter out;
  try {
    op.process({0, 0, 0, 0}, out);
    ADD_FAILURE() << "no InputError at example 0";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("example 0 (counted from 0) of " + path + ": "), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(op.weights().allFinite());
}

// A file whose every line was skipped as malformed says so: "no examples" alone left the user guessing.
TEST(SgdLearnerOperator, AFileWithNothingLeftSaysWhatWasSkipped) {
  afs::testing::TempDir dir("afs-ml-skipped");
  const auto path = (dir.path() / "all-bad.csv").string();
  std::ofstream(path) << "1,x\n0,y\n";
  Params p;
  p.set("data", "file").set("file", path).set("format", "csv").set("on-error", "skip");
  try {
    (void)load_dataset(p);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path + ": no examples (2 malformed lines skipped of 2; the first: " + path + ":1: "),
              std::string::npos)
        << msg;
  }
}

// The multiclass truth is the centred one (each feature's weights and the biases sum to 0 over the classes), the
// member of softmax's family of equal models that SGD from zero approaches: the L1 distance to the uncentred draw
// never fell below the draw's distance from that subspace.
TEST(TrueModel, MulticlassIsCentredOverTheClasses) {
  Params p = params("multiclass", "softmax", "sgd");
  p.set("examples", std::uint64_t{60000}).set("noise", 0.5);
  const auto truth = true_model(p);
  ASSERT_TRUE(truth.has_value());
  const Eigen::Index K = 4, d1 = 9;
  ASSERT_EQ(truth->size(), K * d1);
  for (Eigen::Index j = 0; j < d1; ++j) {
    double sum = 0;
    for (Eigen::Index k = 0; k < K; ++k) sum += (*truth)[k * d1 + j];
    EXPECT_NEAR(sum, 0, 1e-12) << "feature " << j;
  }
  // SGD's iterates stay in that subspace, and approach the centred truth.
  const auto data = dataset_from(p);
  Params q = p;
  q.set("l2", 0.0);
  Learner l = make_learner(learner_config_from(q, data->info()));
  Example x;
  double first = 0;
  for (std::uint64_t n = 0; n < data->size(); ++n) {
    data->example(n, x);
    learn(l, x);
    if (n + 1 == 2000) first = l1_change(l.weights, *truth);
  }
  for (Eigen::Index j = 0; j < d1; ++j) {
    double sum = 0;
    for (Eigen::Index k = 0; k < K; ++k) sum += l.weights[k * d1 + j];
    EXPECT_NEAR(sum, 0, 1e-9) << "feature " << j;
  }
  EXPECT_LT(l1_change(l.weights, *truth), 0.6 * first);
}

TEST(ExampleSource, InstancesReadDisjointRangesCoveringAll) {
  const Params p = Params().set("items", std::uint64_t{1001}).set("begin", std::uint64_t{5});
  std::vector<int> seen(1006, 0);
  for (int i = 0; i < 3; ++i) {
    ExampleSource s(p, {i, 3});
    std::vector<Item> buf(2000);
    const auto n = s.read(0, buf.data(), buf.size());
    EXPECT_EQ(n, s.size());
    for (std::size_t k = 0; k < n; ++k) {
      ++seen[buf[k].key];
      EXPECT_EQ(buf[k].value, static_cast<std::int64_t>(buf[k].key));
    }
    std::vector<Item> again(3);
    ASSERT_EQ(s.read(7, again.data(), 3), 3u);  // replayable: same items at the same offset
    EXPECT_EQ(again[0].key, buf[7].key);
  }
  for (std::size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], k < 5 ? 0 : 1) << k;
}

// Two copies on disjoint ranges: the sink averages their weights, sums their counters and combines their progress
// records; it conforms (every change backed up at once) and rejects an item that is not a weight or counter.
TEST(ModelMerge, AveragesTheCopies) {
  Params p = params("higgs", "logistic", "adagrad", 10);
  p.set("parallelism", std::int64_t{2});
  RecordingEmitter out;
  SgdLearnerOperator a(p, {0, 2}), b(p, {1, 2});
  for (const auto& item : indices(0, 1000)) a.process(item, out);
  for (const auto& item : indices(1000, 2000)) b.process(item, out);
  a.finish(out);
  b.finish(out);
  ModelMerge m(p);
  std::vector<Item> items;
  for (const auto& e : out.items) items.push_back({e.key, e.value, e.time, 0});
  RecordingEmitter none;
  for (const auto& item : items) m.process(item, none);
  EXPECT_TRUE(none.items.empty());
  EXPECT_EQ(m.copies_reported(), 2);
  const Eigen::VectorXd avg = (a.weights() + b.weights()) / 2;
  EXPECT_LT((m.averaged_model() - avg).norm(), 1e-15);
  // A third copy that saw no example (more copies than examples) reports its zero model: it is not averaged in.
  {
    Params p3 = p;
    p3.set("parallelism", std::int64_t{3});
    SgdLearnerOperator c(p3, {2, 3});
    RecordingEmitter three;
    a.finish(three);
    b.finish(three);
    c.finish(three);
    ModelMerge m3(p3);
    for (const auto& e : three.items) m3.process({e.key, e.value, e.time, 0}, none);
    EXPECT_EQ(m3.copies_reported(), 3);
    EXPECT_LT((m3.averaged_model() - avg).norm(), 1e-15);
    // Nor does it cut the combined progress records down to the last row (it has none of its own).
    EXPECT_EQ(m3.progress().size(), 11u);
  }
  EXPECT_EQ(m.total(kCount), 2000);
  EXPECT_EQ(m.total(kCorrect), static_cast<double>(a.correct_count() + b.correct_count()));
  EXPECT_DOUBLE_EQ(m.total(kLossSum), a.loss_sum() + b.loss_sum());
  const auto rows = m.progress();
  ASSERT_EQ(rows.size(), 11u);  // 2 x (1, 2, ..., 512), then 2000
  EXPECT_EQ(rows[0].items, 2);
  EXPECT_EQ(rows[9].items, 1024);
  EXPECT_EQ(rows.back().items, 2000);
  EXPECT_DOUBLE_EQ(rows.back().average_loss, (a.loss_sum() + b.loss_sum()) / 2000);
  EXPECT_DOUBLE_EQ(rows.back().since_last_loss,
                   (a.loss_sum() + b.loss_sum() - a.records().back().loss_sum - b.records().back().loss_sum) / 976);
  // Resent duplicates change nothing.
  for (const auto& item : items) m.process(item, none);
  EXPECT_EQ(m.total(kCount), 2000);
  afs::testing::ConformanceOptions o;
  o.max_truncations = 64;
  EXPECT_TRUE(afs::testing::OperatorConforms([&] { return std::make_unique<ModelMerge>(p); }, items, o));
  EXPECT_THROW(m.process({std::uint64_t{2} << 32, 0, 0, 0}, none), FormatError);  // copy 2 of 2
  EXPECT_THROW(m.process({29, 0, 0, 0}, none), FormatError);                      // weight 29 of 29
}

}  // namespace
}  // namespace afs::ml
