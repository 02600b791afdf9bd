// afstream/cli/options.cc: a job whose add_options declares a run option's name (or one of its own twice) is refused,
// whether or not the command line gives it (before: refused only when given, as "ambiguous", or a bad_any_cast); an
// option of other fault-tolerance modes than the run's is noted.
#include "afstream/cli/options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/runtime/job.h"

namespace afs {
namespace {

namespace po = boost::program_options;

class ClashJob final : public Job {
 public:
  explicit ClashJob(std::string option) : option_(std::move(option)) {}
  std::string name() const override { return "clash"; }
  std::string description() const override { return "declares one option"; }
  void add_options(po::options_description& o) const override {
    o.add_options()("clash.k", po::value<int>()->default_value(1), "k");
    o.add_options()(option_.c_str(), po::value<std::string>()->default_value("x"), "the clashing one");
  }
  Topology topology(const po::variables_map&, const RunConfig&) override { return {}; }
  std::uint64_t total_items() const override { return 0; }
  Scores evaluate(Cluster&, const Topology&, const std::string&) override { return {}; }
  std::vector<std::string> score_names() const override { return {}; }

 private:
  std::string option_;
};

std::string parse_error(const std::string& option) {
  ClashJob job(option);
  const char* argv[] = {"run", "--job", "clash"};
  po::variables_map vm;
  try {
    (void)cli::parse_run(3, argv, &job, vm);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(JobOptions, ARunOptionsNameIsRefusedWithoutBeingGiven) {
  for (const std::string option : {"seed", "items", "ft.theta", "ft.state-divergence-max", "out"}) {
    const auto e = parse_error(option);
    EXPECT_NE(e.find("declares option '" + option + "', which is a run option"), std::string::npos)
        << option << ": " << e;
  }
}

TEST(JobOptions, AnOptionDeclaredTwiceIsRefused) {
  EXPECT_NE(parse_error("clash.k").find("'clash.k', which it declares twice"), std::string::npos);
}

TEST(JobOptions, DistinctNamesParse) { EXPECT_EQ(parse_error("clash.other"), ""); }

// ft.exact-state-every is read in exact and approx modes only: given with ask, checkpoint, microbatch, ack or none it
// did nothing without the note every other mode's option gets (README: "accepted with a note that it has no effect").
TEST(RunOptions, ExactStateEveryIsNotedOutsideExactAndApprox) {
  const auto unused = [](const char* mode) {
    ClashJob job("clash.other");
    const char* argv[] = {"run", "--job", "clash", "--ft.mode", mode, "--ft.exact-state-every", "5"};
    po::variables_map vm;
    return cli::parse_run(7, argv, &job, vm).unused_by_mode;
  };
  for (const char* mode : {"none", "microbatch", "checkpoint", "ack", "ask"}) {
    EXPECT_EQ(unused(mode), std::vector<std::string>{"--ft.exact-state-every (exact and approx only)"}) << mode;
  }
  for (const char* mode : {"exact", "approx"}) EXPECT_TRUE(unused(mode).empty()) << mode;
}

// ft.checkpoint-items paces the checkpoints instead of the interval: both given, the interval is noted as unused
// (both were accepted without a word on which one wins).
TEST(RunOptions, ACheckpointCountNotesTheIntervalGivenWithIt) {
  const auto notes = [](std::vector<const char*> argv) {
    ClashJob job("clash.other");
    argv.insert(argv.begin(), {"run", "--job", "clash", "--ft.mode", "checkpoint"});
    po::variables_map vm;
    return cli::parse_run(static_cast<int>(argv.size()), argv.data(), &job, vm).unused_by_job;
  };
  EXPECT_EQ(
      notes({"--ft.checkpoint-interval", "2s", "--ft.checkpoint-items", "1000"}),
      std::vector<std::string>{"--ft.checkpoint-interval has no effect (ft.checkpoint-items paces the checkpoints)"});
  EXPECT_TRUE(notes({"--ft.checkpoint-interval", "2s"}).empty());
  EXPECT_TRUE(notes({"--ft.checkpoint-items", "1000"}).empty());
}

}  // namespace
}  // namespace afs
