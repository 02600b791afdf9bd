// A job's topology, built in code with a fluent builder (WindFlow style):
//
//   Topology t = TopologyBuilder()
//       .source("gen", "zipf", params).parallelism(1)
//       .stage("hh", "count-min-hh", params).parallelism(2).key_by().from("gen")
//       .stage("merge", "hh-merge", {}).from("hh")
//       .build();
//
// Each stage instance is one worker; workers are numbered in stage order (stage 0's instances first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "afstream/core/params.h"

namespace afs {

// The instance (0..n-1) a key goes to under Partition::Key.
inline std::size_t key_partition(std::uint64_t key, std::size_t n) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ULL;
  key ^= key >> 33;
  return static_cast<std::size_t>(key % n);
}

enum class Partition {
  Key,        // hash(key) % downstream parallelism
  Forward,    // instance i sends to instance i % downstream parallelism
  Broadcast,  // every downstream instance gets every item
};

struct EdgeSpec {
  int from_stage = 0;
  Partition partition = Partition::Key;
};

struct StageSpec {
  std::string name;
  std::string kind;  // operator or source name in the Registry
  Params params;
  int parallelism = 1;
  bool is_source = false;
  std::vector<EdgeSpec> inputs;
};

struct WorkerRef {
  int id = 0;     // global worker id
  int stage = 0;  // index into Topology::stages
  int index = 0;  // instance index within the stage
};

// A channel is one directed connection from a worker's output to a downstream worker's input (DESIGN 2).
struct ChannelSpec {
  int id = 0;
  int from_worker = 0;
  int to_worker = 0;
  Partition partition = Partition::Key;
};

class Topology {
 public:
  Topology() = default;
  explicit Topology(std::vector<StageSpec> stages);  // validates; throws ConfigError

  const std::vector<StageSpec>& stages() const { return stages_; }
  const std::vector<WorkerRef>& workers() const { return workers_; }
  const std::vector<ChannelSpec>& channels() const { return channels_; }
  int worker_count() const { return static_cast<int>(workers_.size()); }
  int first_worker(int stage) const { return first_worker_[stage]; }
  int stage_index(const std::string& name) const;  // -1 if none
  // Channels into / out of a worker, in a fixed order (out: grouped by downstream stage then instance).
  std::vector<int> inputs_of(int worker) const;
  std::vector<int> outputs_of(int worker) const;
  // Number of stages on the longest path from a source to this stage's end (m - i in DESIGN 3), >= 1.
  int stages_to_end(int stage) const;

 private:
  std::vector<StageSpec> stages_;
  std::vector<WorkerRef> workers_;
  std::vector<ChannelSpec> channels_;
  std::vector<int> first_worker_;
};

class TopologyBuilder {
 public:
  TopologyBuilder& source(const std::string& name, const std::string& kind, Params params = {});
  TopologyBuilder& stage(const std::string& name, const std::string& kind, Params params = {});
  TopologyBuilder& parallelism(int n);
  // Inputs of the current stage. key_by() / forward() / broadcast() set the partitioning of the next from().
  TopologyBuilder& key_by();
  TopologyBuilder& forward();
  TopologyBuilder& broadcast();
  TopologyBuilder& from(const std::string& upstream);
  Topology build() const;

 private:
  StageSpec& current();
  std::vector<StageSpec> stages_;
  Partition next_partition_ = Partition::Key;
};

}  // namespace afs
