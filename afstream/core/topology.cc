#include "afstream/core/topology.h"

#include <algorithm>
#include <set>

#include "afstream/core/errors.h"

namespace afs {

Topology::Topology(std::vector<StageSpec> stages) : stages_(std::move(stages)) {
  if (stages_.empty()) throw ConfigError("topology has no stages");
  std::set<std::string> names;
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    const auto& st = stages_[s];
    if (!names.insert(st.name).second) throw ConfigError("topology: stage name '" + st.name + "' used twice");
    if (st.parallelism < 1) {
      throw ConfigError("topology: stage '" + st.name + "' has parallelism " + std::to_string(st.parallelism) +
                        " (expected >= 1)");
    }
    if (st.is_source && !st.inputs.empty()) throw ConfigError("topology: source '" + st.name + "' has inputs");
    if (!st.is_source && st.inputs.empty()) throw ConfigError("topology: stage '" + st.name + "' has no inputs");
    for (const auto& e : st.inputs) {
      if (e.from_stage < 0 || static_cast<std::size_t>(e.from_stage) >= s) {
        throw ConfigError("topology: stage '" + st.name + "' reads from a stage that is not before it");
      }
    }
  }
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    first_worker_.push_back(static_cast<int>(workers_.size()));
    for (int i = 0; i < stages_[s].parallelism; ++i) {
      workers_.push_back({static_cast<int>(workers_.size()), static_cast<int>(s), i});
    }
  }
  // Channels, ordered by upstream worker, then downstream stage, then downstream instance.
  for (const auto& w : workers_) {
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      for (const auto& e : stages_[s].inputs) {
        if (e.from_stage != w.stage) continue;
        const int down_n = stages_[s].parallelism;
        for (int j = 0; j < down_n; ++j) {
          if (e.partition == Partition::Forward && j != w.index % down_n) continue;
          channels_.push_back({static_cast<int>(channels_.size()), w.id, first_worker_[s] + j, e.partition});
        }
      }
    }
  }
}

int Topology::stage_index(const std::string& name) const {
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    if (stages_[s].name == name) return static_cast<int>(s);
  }
  return -1;
}

std::vector<int> Topology::inputs_of(int worker) const {
  std::vector<int> v;
  for (const auto& c : channels_) {
    if (c.to_worker == worker) v.push_back(c.id);
  }
  return v;
}

std::vector<int> Topology::outputs_of(int worker) const {
  std::vector<int> v;
  for (const auto& c : channels_) {
    if (c.from_worker == worker) v.push_back(c.id);
  }
  return v;
}

int Topology::stages_to_end(int stage) const {
  int best = 1;
  for (std::size_t s = stage + 1; s < stages_.size(); ++s) {
    for (const auto& e : stages_[s].inputs) {
      if (e.from_stage == stage) best = std::max(best, 1 + stages_to_end(static_cast<int>(s)));
    }
  }
  return best;
}

TopologyBuilder& TopologyBuilder::source(const std::string& name, const std::string& kind, Params params) {
  stages_.push_back({name, kind, std::move(params), 1, true, {}});
  return *this;
}

TopologyBuilder& TopologyBuilder::stage(const std::string& name, const std::string& kind, Params params) {
  stages_.push_back({name, kind, std::move(params), 1, false, {}});
  next_partition_ = Partition::Key;
  return *this;
}

StageSpec& TopologyBuilder::current() {
  if (stages_.empty()) throw ConfigError("topology builder: declare a source or stage first");
  return stages_.back();
}

TopologyBuilder& TopologyBuilder::parallelism(int n) {
  current().parallelism = n;
  return *this;
}
TopologyBuilder& TopologyBuilder::key_by() {
  next_partition_ = Partition::Key;
  return *this;
}
TopologyBuilder& TopologyBuilder::forward() {
  next_partition_ = Partition::Forward;
  return *this;
}
TopologyBuilder& TopologyBuilder::broadcast() {
  next_partition_ = Partition::Broadcast;
  return *this;
}

TopologyBuilder& TopologyBuilder::from(const std::string& upstream) {
  auto& st = current();
  for (std::size_t s = 0; s + 1 < stages_.size(); ++s) {
    if (stages_[s].name == upstream) {
      st.inputs.push_back({static_cast<int>(s), next_partition_});
      return *this;
    }
  }
  throw ConfigError("topology builder: stage '" + st.name + "' reads from unknown stage '" + upstream + "'");
}

Topology TopologyBuilder::build() const { return Topology(stages_); }

}  // namespace afs
