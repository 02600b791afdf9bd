// Test helper for the integration tests that run the program: running it (bounded in time, output captured) and
// reading what `afstream run --out DIR` wrote (whole files, summary.csv as column -> value, CSV rows and columns
// found by their header name, the backup server's compaction count from its stop line).
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace afs::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cols;
  std::stringstream ls(line);
  for (std::string c; std::getline(ls, c, ',');) cols.push_back(c);
  if (!line.empty() && line.back() == ',') cols.emplace_back();  // a last cell left empty
  return cols;
}

// A header line and one row (learn.csv, summary.csv, what afstream eval prints) as column -> value, the numeric
// columns only.
inline std::map<std::string, double> csv_numbers(const std::string& text) {
  std::istringstream in(text);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const auto h = split_csv(header), v = split_csv(row);
  std::map<std::string, double> m;
  for (std::size_t i = 0; i < h.size() && i < v.size(); ++i) {
    char* end = nullptr;
    const double x = std::strtod(v[i].c_str(), &end);
    if (!v[i].empty() && *end == '\0') m[h[i]] = x;
  }
  return m;
}

// The index of column `name` in a CSV header row; header.size() if it is not there.
inline std::size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
}

// Time limits in the tests are multiplied by AFS_TEST_TIME_SCALE, a whole number >= 1 (default 1) that slow builds
// set: the tsan test preset sets 10, since ThreadSanitizer runs the jobs 5-20 times slower.
inline int time_scale() {
  const char* text = std::getenv("AFS_TEST_TIME_SCALE");
  return std::max(text != nullptr ? std::atoi(text) : 1, 1);
}
inline int scaled_seconds(int seconds) { return seconds * time_scale(); }

struct ProgramResult {
  int status = -1;  // the exit status; -1 if it did not exit normally; 124 if `timeout` stopped it
  std::string out, err;
};

// Runs `program args` (args: a shell word list) through `timeout`, with stdout and stderr captured in files under
// `scratch` (which must exist).
inline ProgramResult run_program(const std::string& program, const std::string& args,
                                 const std::filesystem::path& scratch, int timeout_seconds = 120) {
  const auto out = scratch / "stdout.txt", err = scratch / "stderr.txt";
  const std::string cmd = "timeout " + std::to_string(scaled_seconds(timeout_seconds)) + " " + program + " " + args +
                          " >" + out.string() + " 2>" + err.string();
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), slurp(err)};
}

// summary.csv (header + one row) as column -> value.
inline std::map<std::string, std::string> summary(const std::filesystem::path& dir) {
  std::ifstream f(dir / "summary.csv");
  std::string header, row;
  std::getline(f, header);
  std::getline(f, row);
  const auto h = split_csv(header), v = split_csv(row);
  std::map<std::string, std::string> m;
  for (std::size_t i = 0; i < h.size() && i < v.size(); ++i) m[h[i]] = v[i];
  return m;
}

// The chain compactions a process runtime's backup server counted, from its stop line on stderr ("afstream
// backup-server: N chain compactions ..."); -1 if the line is missing.
inline long server_compactions(const std::string& err) {
  static const std::regex line("afstream backup-server: ([0-9]+) chain compactions");
  std::smatch m;
  return std::regex_search(err, m, line) ? std::stol(m[1]) : -1L;
}

}  // namespace afs::testing
