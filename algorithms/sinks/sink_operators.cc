// The exactly-once sink (buffered effects written per state backup), the counting sink and the pass-through relay.
#include "algorithms/sinks/sink_operators.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "afstream/core/errors.h"

namespace afs::sinks {
namespace {

constexpr std::uint64_t kMaxFlushEvery = std::uint64_t{1} << 24;

bool parse_bool(const Params& p, const std::string& name, const char* op) {
  const auto v = p.get_string(name, "false");
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw ConfigError(std::string(op) + ": parameter '" + name + "': expected true or false, got '" + v + "'");
}

// The directory an instance writes must be creatable, and if it holds anything, a RocksDB database, perhaps one a
// killed incarnation was creating: RocksDB opens its info log (LOG) even before it takes its LOCK file, and a kill
// between the two left only LOG (seen in CI: SinkCli.ProcessesExactModeRepeatedKillsOfTheSink...). The effects marker
// itself is checked when the database is opened, at the first write.
void check_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw ConfigError("exactly-once-sink: parameter 'path': cannot create the directory '" + dir + "'" +
                      (ec ? ": " + ec.message() : ": something else is in the way"));
  }
  const auto has = [&](const char* name) { return fs::exists(fs::path(dir) / name); };
  if (!fs::is_empty(dir, ec) && !has("CURRENT") && !has("LOCK") && !has("LOG")) {
    throw ConfigError("exactly-once-sink: parameter 'path': '" + dir +
                      "' is neither empty nor a RocksDB database (give a new directory)");
  }
}

}  // namespace

EffectSink::EffectSink(const Params& p, const InstanceInfo& at, bool with_database) {
  if (with_database) {
    const auto dir = p.get_string("path", "");
    if (dir.empty()) {
      throw ConfigError("exactly-once-sink: parameter 'path' is missing: the directory of the effects database");
    }
    path_ = part_path(dir, at.index);
    check_directory(path_);
    db_options_.sync = parse_bool(p, "sync", "exactly-once-sink");
  }
  const auto every = p.get_uint("flush-every", 4096);
  if (every < 1 || every > kMaxFlushEvery) {
    throw ConfigError("exactly-once-sink: parameter 'flush-every': expected 1.." + std::to_string(kMaxFlushEvery) +
                      " items, got " + std::to_string(every));
  }
  flush_every_ = static_cast<std::size_t>(every);
  if (!path_.empty()) buffered_.reserve(flush_every_);
}

// A crash drops the buffer, as a SIGKILL would: only what was written is in the database.
EffectSink::~EffectSink() = default;

void EffectSink::process(const Item& item, Emitter& out) {
  const Effect e{out.input_channel(), item};
  ++items_;
  value_sum_ += item.value;
  digest_ += effect_digest(e);
  if (path_.empty()) return;
  buffered_.push_back(e);
  if (buffered_.size() >= flush_every_) write_buffered();
}

void EffectSink::finish(Emitter&) {
  write_buffered();
  db_.reset();  // closed: the run's evaluator (or anyone) may open it now
}

void EffectSink::write_buffered() const {
  if (buffered_.empty()) return;
  if (!db_) db_ = std::make_unique<EffectDb>(path_, db_options_);
  db_->write(buffered_);
  ++batches_;
  effects_written_ += buffered_.size();
  buffered_.clear();
}

void EffectSink::write_state(ByteWriter& out) const {
  write_buffered();
  out.put<std::uint64_t>(items_);
  out.put<std::int64_t>(value_sum_);
  out.put<std::uint64_t>(digest_);
}

void EffectSink::read_state(ByteReader& in, const char* what) {
  const auto items = in.get<std::uint64_t>("sink items");
  const auto sum = in.get<std::int64_t>("sink value sum");
  const auto digest = in.get<std::uint64_t>("sink digest");
  in.expect_end(what);
  items_ = items;
  value_sum_ = sum;
  digest_ = digest;
  items_at_backup_ = items_;
}

void EffectSink::snapshot_full(ByteWriter& out) const { write_state(out); }
// The whole state is three numbers: a delta sets them all (applying it twice equals applying it once).
void EffectSink::snapshot_delta(ByteWriter& out) const { write_state(out); }

void EffectSink::mark_backed_up() {
  write_buffered();
  items_at_backup_ = items_;
}

void EffectSink::restore_full(ByteReader& in) { read_state(in, "exactly-once-sink snapshot"); }
void EffectSink::apply_delta(ByteReader& in) { read_state(in, "exactly-once-sink delta"); }

double EffectSink::distance(const Operator& other) const {
  const auto& o = dynamic_cast<const EffectSink&>(other);
  return std::fabs(static_cast<double>(items_) - static_cast<double>(o.items_));
}

void register_sinks(Registry& registry) {
  registry.add_operator(
      "exactly-once-sink",
      "writes each item to a RocksDB effects table keyed by (channel, seq), exactly once in exact mode (sink; "
      "path, flush-every, sync)",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<EffectSink>(p, at, true); });
  registry.add_operator(
      "count-sink", "counts items, their value sum and effect digest, writes nothing (sink; flush-every)",
      [](const Params& p, const InstanceInfo& at) { return std::make_unique<EffectSink>(p, at, false); });
  registry.add_operator("pass-through", "emits every item unchanged (stateless relay)",
                        [](const Params&, const InstanceInfo&) { return std::make_unique<PassThrough>(); });
}

}  // namespace afs::sinks
