// The failure plan (failure_plan.h).
#include "afstream/runtime/failure_plan.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "afstream/core/errors.h"

namespace afs {

FailurePlan::FailurePlan(std::vector<FailureEvent> events) : events_(std::move(events)), fired_(events_.size()) {}

InputProgress::InputProgress(const Topology& topology) {
  const auto& stages = topology.stages();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& st = stages[s];
    if (st.is_source || st.inputs.empty()) continue;
    const bool counts = std::all_of(st.inputs.begin(), st.inputs.end(), [&](const EdgeSpec& e) {
      return stages[static_cast<std::size_t>(e.from_stage)].is_source && e.partition != Partition::Broadcast;
    });
    if (!counts) continue;
    std::vector<int> workers;
    for (int i = 0; i < st.parallelism; ++i) workers.push_back(topology.first_worker(static_cast<int>(s)) + i);
    fed_stages_.push_back(std::move(workers));
  }
}

std::vector<FailureEvent> FailurePlan::due(std::uint64_t input_items, std::uint64_t source_items,
                                           std::chrono::milliseconds elapsed, const std::function<bool(int)>& ready) {
  std::vector<FailureEvent> out;
  std::vector<int> held;  // workers of the events fired or waiting in this call: a later event on them waits
  for (std::size_t i = 0; i < events_.size(); ++i) {
    if (fired_[i]) continue;
    const auto& e = events_[i];
    const bool now = e.at_time ? elapsed >= *e.at_time : (e.produced ? source_items : input_items) >= e.at_items;
    if (!now) continue;
    const bool waits = std::any_of(e.workers.begin(), e.workers.end(), [&](int w) {
      return std::find(held.begin(), held.end(), w) != held.end() || (ready && !ready(w));
    });
    held.insert(held.end(), e.workers.begin(), e.workers.end());
    if (waits) continue;
    fired_[i] = true;
    out.push_back(e);
  }
  return out;
}

bool FailurePlan::pending() const { return std::find(fired_.begin(), fired_.end(), false) != fired_.end(); }

std::vector<int> parse_worker_list(const std::string& spec, int worker_count,
                                   const std::vector<std::pair<std::string, std::string>>& domains) {
  std::vector<int> out;
  if (spec == "all") {
    for (int i = 0; i < worker_count; ++i) out.push_back(i);
    return out;
  }
  for (const auto& [name, ids] : domains) {
    if (name != spec) continue;
    try {
      return parse_worker_list(ids, worker_count);
    } catch (const ConfigError& e) {  // the domain's list is what is wrong, not fail.target
      const std::string what = e.what();
      const std::string prefix = "fail.target: ";
      throw ConfigError("fail.domain " + name + "=" + ids + ": " +
                        (what.starts_with(prefix) ? what.substr(prefix.size()) : what));
    }
  }
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      std::size_t used = 0;
      int v = std::stoi(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
      if (v < 0 || v >= worker_count) {
        throw ConfigError("fail.target: no worker " + part + " (workers are 0.." + std::to_string(worker_count - 1) +
                          ")");
      }
      out.push_back(v);
    } catch (const ConfigError&) {
      throw;
    } catch (const std::exception&) {
      throw ConfigError("fail.target: expected all, worker ids separated by commas, or a failure domain, got '" + spec +
                        "'");
    }
  }
  if (out.empty()) throw ConfigError("fail.target: no workers in '" + spec + "'");
  return out;
}

std::vector<FailureEvent> spread_failures(int count, std::uint64_t total_items, const std::vector<int>& workers,
                                          double from, double to) {
  std::vector<FailureEvent> v;
  for (int i = 0; i < count; ++i) {
    const double f = count == 1 ? (from + to) / 2 : from + (to - from) * i / (count - 1);
    v.push_back({static_cast<std::uint64_t>(f * static_cast<double>(total_items)), workers, std::nullopt});
  }
  return v;
}

std::vector<FailureEvent> random_failures(int count, std::uint64_t total_items, const std::vector<int>& workers,
                                          std::uint64_t seed, double from, double to) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 17);
  std::uniform_real_distribution<double> at(from, to);
  std::vector<FailureEvent> v;
  for (int i = 0; i < count; ++i) {
    v.push_back({static_cast<std::uint64_t>(at(rng) * static_cast<double>(total_items)), workers, std::nullopt});
  }
  return v;
}

std::vector<FailureEvent> parse_failure_points(const std::string& spec, std::uint64_t total_items,
                                               const std::vector<int>& workers) {
  std::vector<FailureEvent> v;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto bad = [&] {
      return ConfigError(
          "fail.at: expected item counts, fractions (0.25) or times (500ms, 2s) separated by commas (counts and "
          "fractions may be prefixed by produced:), got '" +
          part + "'");
    };
    constexpr std::string_view kProduced = "produced:";
    const bool produced = part.starts_with(kProduced);
    const std::string number = produced ? part.substr(kProduced.size()) : part;
    double d = 0;
    std::size_t used = 0;
    try {
      d = std::stod(number, &used);
    } catch (const std::exception&) {
      throw bad();
    }
    if (!std::isfinite(d)) throw bad();
    if (d < 0) throw ConfigError("fail.at: negative point '" + part + "'");
    const std::string unit = number.substr(used);
    FailureEvent e;
    e.workers = workers;
    e.produced = produced;
    if (produced && !unit.empty()) throw bad();
    if (unit == "ms" || unit == "s" || unit == "m") {  // the units of every duration option (core/duration.h)
      const double ms = unit == "m" ? d * 60000 : unit == "s" ? d * 1000 : d;
      if (ms >= 0x1p62) throw bad();
      e.at_time = std::chrono::milliseconds(static_cast<std::int64_t>(ms));
    } else if (unit.empty()) {
      // Below 1 a fraction of the input, from 1 on an item count: 1.5 is neither, and 1.0, which read as the first
      // item where a fraction (the end) was meant, is refused.
      if (d == 1 && number.find_first_of(".eE") != std::string::npos) {
        throw ConfigError("fail.at: '" + part +
                          "' is ambiguous: a fraction of the input is below 1 (0.99: near the end), and 1 is the first "
                          "item");
      }
      if (d >= 0x1p63) throw ConfigError("fail.at: '" + part + "' is more items than a count holds (2^63 - 1)");
      if (d >= 1 && d != std::floor(d)) {
        throw ConfigError("fail.at: '" + part +
                          "' is neither a fraction of the input (below 1) nor a whole item count");
      }
      e.at_items =
          d < 1 ? static_cast<std::uint64_t>(d * static_cast<double>(total_items)) : static_cast<std::uint64_t>(d);
      // A point past the input never comes: the run would be written down as one with failures that had none.
      if (total_items > 0 && e.at_items > total_items) {
        throw ConfigError("fail.at: '" + part + "' is past the input, which has " + std::to_string(total_items) +
                          " items (a fraction below 1 names a point within it)");
      }
    } else {
      throw bad();
    }
    v.push_back(e);
  }
  return v;
}

}  // namespace afs
