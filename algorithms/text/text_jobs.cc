// `afstream run --job wordcount` and `--job grep`: options, topologies, synthetic corpus, and evaluation.
#include "algorithms/text/text_jobs.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "afstream/core/errors.h"
#include "afstream/core/out_file.h"
#include "afstream/core/temp_root.h"
#include "afstream/core/topology.h"
#include "algorithms/text/corpus.h"
#include "algorithms/text/matcher.h"
#include "algorithms/text/scan.h"
#include "algorithms/text/synthetic.h"
#include "algorithms/text/text_operators.h"

namespace afs::text {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// What both jobs share: the corpus (a directory, or a synthetic one written on first use), its chunking, the
// parallelism, and the clock for throughput.
class TextJob : public Job {
 public:
  void add_options(po::options_description& o) const override {
    o.add_options()("text.dir", path_value("DIR"),
                    "the corpus: every regular file under this directory (empty: a synthetic corpus)")(
        "text.chunk-bytes", po::value<std::uint64_t>()->default_value(16384),
        "chunk size: a chunk ends at the first line end from here on (1 .. 2^30)")(
        "text.max-line", po::value<std::uint64_t>()->default_value(1 << 20),
        "how far, in bytes, the line crossing a chunk's end may run on; one longer (a file without line ends: a "
        "binary one?) is an input error (1 .. 2^30)")("text.parallelism", po::value<int>()->default_value(2),
                                                      "parallel readers (tokenizers / matchers)")(
        "text.synthetic-bytes", po::value<std::uint64_t>()->default_value(8'000'000),
        "size of the synthetic corpus (without text.dir)")("text.synthetic-files",
                                                           po::value<std::uint64_t>()->default_value(8),
                                                           "files of the synthetic corpus (1 .. 100000)")(
        "text.vocabulary", po::value<std::uint64_t>()->default_value(50'000), "distinct words of the synthetic corpus")(
        "text.skew", real_value(1.0), "Zipf skew of the synthetic corpus's words")(
        "text.synthetic-dir", path_value("DIR"),
        "where the synthetic corpus is written (empty: TMPDIR/afstream-text-<hash of its parameters>, reused)");
    add_own_options(o);
  }

  std::uint64_t total_items() const override { return chunks_; }

  // The tokenizers and matchers read straight from the replayable text source and keep no state, so nothing but
  // this bound makes their source commit its position: without it a failure of all workers sent every chunk from
  // the first again (word count, 300 MB corpus, 10 failures: 17.5 s against 5.2 s failure-free; with 1024 chunks
  // 7.6-7.8 s, failure-free within noise, results as exact; algorithms/text/README.md).
  std::vector<std::pair<std::string, std::string>> run_defaults() const override {
    return {{"ft.replay-items-max", "1024"}};
  }

 protected:
  virtual void add_own_options(po::options_description& o) const = 0;

  // Resolves the corpus directory (writing the synthetic corpus if needed), checks it, and counts its chunks.
  // Returns the parameters every text operator takes (dir, chunk-bytes, max-line).
  Params corpus_params(const po::variables_map& vm) {
    parallelism_ = vm["text.parallelism"].as<int>();
    if (parallelism_ < 1 || parallelism_ > 256) {
      throw ConfigError("text.parallelism: expected 1 .. 256, got " + std::to_string(parallelism_));
    }
    dir_ = vm["text.dir"].as<std::string>();
    if (dir_.empty()) {
      SyntheticCorpusParams s;
      s.bytes = vm["text.synthetic-bytes"].as<std::uint64_t>();
      s.files =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(vm["text.synthetic-files"].as<std::uint64_t>(), 1u << 30));
      s.vocabulary = vm["text.vocabulary"].as<std::uint64_t>();
      s.skew = vm["text.skew"].as<double>();
      s.seed = vm["seed"].as<std::uint64_t>();
      validate(s);
      dir_ = vm["text.synthetic-dir"].as<std::string>();
      if (dir_.empty()) {
        std::error_code ec;
        const fs::path base = temp_root().path;
        if (!fs::is_directory(base, ec)) {
          throw InputError("synthetic corpus: TMPDIR '" + base.string() +
                           "' is not a directory (set TMPDIR, or give text.synthetic-dir)");
        }
        dir_ = (base / synthetic_corpus_name(s)).string();
      }
      ensure_synthetic_corpus(dir_, s);
    }
    Params p;
    p.set("dir", dir_)
        .set("chunk-bytes", vm["text.chunk-bytes"].as<std::uint64_t>())
        .set("max-line", vm["text.max-line"].as<std::uint64_t>());
    corpus_ = corpus_of(p);  // InputError naming a missing directory or an unreadable file
    chunks_ = corpus_.chunks(chunking_of(p)).size();
    corpus_bytes_ = corpus_.total_bytes();
    // Every operator that lists the directory again (each worker, and each restarted one) checks it against this.
    p.set("corpus-digest", corpus_.digest());
    return p;
  }

  void start_clock() { started_ = std::chrono::steady_clock::now(); }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(); }

  // Scores every text job reports: the corpus, the run's wall time (from the topology to the results) and the
  // throughput in bytes, lines and words per second.
  static void add_throughput(Scores& s, const TextTotals& t, double seconds) {
    const double secs = std::max(seconds, 1e-9);
    s.push_back({"bytes", static_cast<double>(t.bytes)});
    s.push_back({"lines", static_cast<double>(t.lines)});
    s.push_back({"words", static_cast<double>(t.words)});
    s.push_back({"wall_seconds", seconds});
    s.push_back({"bytes_per_s", static_cast<double>(t.bytes) / secs});
    s.push_back({"lines_per_s", static_cast<double>(t.lines) / secs});
    s.push_back({"words_per_s", static_cast<double>(t.words) / secs});
  }
  static std::vector<std::string> throughput_names() {
    return {"bytes", "lines", "words", "wall_seconds", "bytes_per_s", "lines_per_s", "words_per_s"};
  }

  int parallelism_ = 2;
  std::string dir_;
  std::uint64_t chunks_ = 0;
  std::uint64_t corpus_bytes_ = 0;
  // The corpus as listed when the topology was built: what the stream's chunk descriptors and line ids index, and
  // what the results are scored against and grep.txt is written from (listing the directory again at the end gave
  // every match of a run during which a file was added another file's path and line).
  Corpus corpus_;

 private:
  std::chrono::steady_clock::time_point started_;
};

class WordCountJob final : public TextJob {
 public:
  std::string name() const override { return "wordcount"; }
  std::string description() const override {
    return "word count over a directory of text files (or a synthetic corpus): exact counts checked, bytes/s";
  }

  void add_own_options(po::options_description& o) const override {
    o.add_options()("wordcount.counters", po::value<int>()->default_value(2),
                    "parallel wc-count workers (keyed by word hash)")(
        "wordcount.hash-seed", po::value<std::uint64_t>()->default_value(1), "seed of the 64-bit word hash (XXH3)");
  }

  Topology topology(const po::variables_map& vm, const RunConfig&) override {
    auto text = corpus_params(vm);
    const int counters = vm["wordcount.counters"].as<int>();
    if (counters < 1 || counters > 256) {
      throw ConfigError("wordcount.counters: expected 1 .. 256, got " + std::to_string(counters));
    }
    hash_seed_ = vm["wordcount.hash-seed"].as<std::uint64_t>();
    Params tokenize = text;
    tokenize.set("seed", hash_seed_);
    // A count is at most the number of words, at most (bytes + 1) / 2.
    const auto max_count = corpus_bytes_ / 2 + 1;
    auto t = TopologyBuilder()
                 .source("source", "text-source", text)
                 .stage("tokenize", "text-tokenize", tokenize)
                 .parallelism(parallelism_)
                 .key_by()
                 .from("source")
                 .stage("count", "wc-count", Params().set("max-weight", std::int64_t{1}))
                 .parallelism(counters)
                 .key_by()
                 .from("tokenize")
                 .stage("sink", "wc-merge", Params().set("max-count", max_count))
                 .forward()
                 .from("count")
                 .build();
    start_clock();
    return t;
  }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    const double seconds = elapsed();
    auto* merge = dynamic_cast<WordCountMerge*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!merge) throw RuntimeError("wordcount: the sink did not finish");
    const auto& corpus = corpus_;
    const auto truth = scan_word_counts(corpus, hash_seed_);
    // Per word: the stream's count against the scan's (a word the stream lacks counts 0).
    std::int64_t max_abs = 0, total_abs = 0;
    std::uint64_t wrong = 0, unknown = 0;
    std::vector<std::pair<std::string, std::int64_t>> rows;
    std::unordered_map<std::uint64_t, bool> seen;
    for (const auto& [hash, count] : merge->entries()) {
      const auto it = truth.words.find(hash);
      const std::int64_t exact = it == truth.words.end() ? 0 : it->second.count;
      if (it == truth.words.end()) {
        ++unknown;
        char hex[24];
        std::snprintf(hex, sizeof hex, "#%016llx", static_cast<unsigned long long>(hash));
        rows.emplace_back(hex, count);
      } else {
        rows.emplace_back(it->second.word, count);
        seen[hash] = true;
      }
      const auto d = count > exact ? count - exact : exact - count;
      max_abs = std::max(max_abs, d);
      total_abs += d;
      wrong += d != 0;
    }
    for (const auto& [hash, e] : truth.words) {
      if (!seen.count(hash)) {
        max_abs = std::max(max_abs, e.count);
        total_abs += e.count;
        ++wrong;
      }
    }
    if (!out_dir.empty()) {
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
      });
      std::ofstream f(out_dir + "/wordcount.csv");
      f << "word,count\n";
      for (const auto& [w, c] : rows) f << w << ',' << c << '\n';
      close_checked(f, out_dir + "/wordcount.csv");
    }
    Scores s = {{"distinct_words", static_cast<double>(truth.words.size())},
                {"words_wrong", static_cast<double>(wrong)},
                {"unknown_words", static_cast<double>(unknown)},
                {"max_abs_error", static_cast<double>(max_abs)},
                {"total_abs_error", static_cast<double>(total_abs)}};
    add_throughput(s, truth.totals, seconds);
    return s;
  }

  std::vector<std::string> score_names() const override {
    std::vector<std::string> v = {"distinct_words", "words_wrong", "unknown_words", "max_abs_error", "total_abs_error"};
    for (auto& n : throughput_names()) v.push_back(n);
    return v;
  }

 private:
  std::uint64_t hash_seed_ = 1;
};

class GrepJob final : public TextJob {
 public:
  std::string name() const override { return "grep"; }
  std::string description() const override {
    return "grep over a directory of text files (or a synthetic corpus): matching lines checked, bytes/s";
  }

  // Theta is in matching lines here (grep-collect's divergence: lines found since its last backup), and a failure
  // may take that many from the collected result: the general default, 1e5, would let ten failures take about half
  // of a 100 MB corpus's 2,000 matches (measured; algorithms/text/README.md). 100 lines kept them all.
  std::vector<std::pair<std::string, std::string>> run_defaults() const override {
    auto d = TextJob::run_defaults();
    d.emplace_back("ft.state-divergence-max", "100");
    return d;
  }

  void add_own_options(po::options_description& o) const override {
    o.add_options()(
        "grep.pattern", po::value<std::string>()->default_value("the"),
        "the lines containing this (a plain substring, or with grep.regex a regular expression in RE2's syntax)")(
        "grep.regex", po::bool_switch(),
        "the pattern is a regular expression (RE2: PCRE's syntax less backreferences and lookaround; per line, "
        "byte by byte)");
  }

  Topology topology(const po::variables_map& vm, const RunConfig&) override {
    const auto kind = vm["grep.regex"].as<bool>() ? LineMatcher::Kind::Regex : LineMatcher::Kind::Substring;
    matcher_ = std::make_unique<LineMatcher>(vm["grep.pattern"].as<std::string>(), kind);  // ConfigError first
    auto text = corpus_params(vm);
    Params match = text;
    match.set("pattern", matcher_->pattern()).set("kind", kind == LineMatcher::Kind::Regex ? "regex" : "substring");
    auto t = TopologyBuilder()
                 .source("source", "text-source", text)
                 .stage("match", "grep-match", match)
                 .parallelism(parallelism_)
                 .key_by()
                 .from("source")
                 .stage("sink", "grep-collect")
                 .forward()
                 .from("match")
                 .build();
    start_clock();
    return t;
  }

  Scores evaluate(Cluster& cluster, const Topology& t, const std::string& out_dir) override {
    const double seconds = elapsed();
    auto* collect = dynamic_cast<GrepCollect*>(cluster.final_operator(t.first_worker(t.stage_index("sink"))));
    if (!collect) throw RuntimeError("grep: the sink did not finish");
    const auto& corpus = corpus_;
    const auto truth = scan_grep(corpus, *matcher_);
    std::vector<std::uint64_t> got;
    for (const auto& [id, v] : collect->entries()) got.push_back(id);  // sorted: file, then offset
    std::vector<std::uint64_t> want;
    for (const auto& m : truth.matches) want.push_back(line_id(m.file, m.offset));
    std::vector<std::uint64_t> missing, extra;
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
    std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
    if (!out_dir.empty()) write_matches(corpus, got, out_dir + "/grep.txt");
    Scores s = {{"matches", static_cast<double>(got.size())},
                {"exact_matches", static_cast<double>(want.size())},
                {"missing", static_cast<double>(missing.size())},
                {"extra", static_cast<double>(extra.size())}};
    add_throughput(s, truth.totals, seconds);
    return s;
  }

  std::vector<std::string> score_names() const override {
    std::vector<std::string> v = {"matches", "exact_matches", "missing", "extra"};
    for (auto& n : throughput_names()) v.push_back(n);
    return v;
  }

 private:
  // The stream's matching lines as grep -n prints them over several files: path:line:text, in corpus order.
  static void write_matches(const Corpus& corpus, const std::vector<std::uint64_t>& ids, const std::string& path) {
    std::ofstream f(path, std::ios::binary);
    for (std::size_t i = 0; i < ids.size();) {
      const auto file = file_of_line(ids[i]);
      std::size_t j = i;
      std::vector<std::uint64_t> offsets;
      while (j < ids.size() && file_of_line(ids[j]) == file) offsets.push_back(offset_of_line(ids[j++]));
      if (file >= corpus.files().size())
        throw RuntimeError("grep: a match names file " + std::to_string(file) + " of a corpus of " +
                           std::to_string(corpus.files().size()));
      const auto text = corpus.read_file(file);
      const auto lines = line_numbers(text, offsets);
      for (std::size_t k = 0; k < offsets.size(); ++k) {
        const auto b = static_cast<std::size_t>(std::min<std::uint64_t>(offsets[k], text.size()));
        const auto e = LineMatcher::line_end(text, b);
        f << corpus.files()[file].path << ':' << lines[k] << ':' << std::string_view(text).substr(b, e - b) << '\n';
      }
      i = j;
    }
    close_checked(f, path);
  }

  std::unique_ptr<LineMatcher> matcher_;
};

}  // namespace

std::unique_ptr<Job> make_wordcount_job() { return std::make_unique<WordCountJob>(); }
std::unique_ptr<Job> make_grep_job() { return std::make_unique<GrepJob>(); }

}  // namespace afs::text
