// Sinks with external effects, written against the operator API as a user would (issue 6, item 6):
//
//   exactly-once-sink  writes every item's effect to a RocksDB effects table (effect_db.h), keyed by the item's
//                      identity (input channel, sequence number) with the item as value, so that retries, replays
//                      and restarts never duplicate an effect and, in exact mode, never lose one.
//   count-sink         the same state (items, value sum, digest) without the database: the reference for what the
//                      database costs.
//   pass-through       a stateless relay (beta 1): puts workers that replay and renumber between source and sink.
//
// Exactly-once, per state backup (README.md in this folder has the argument in full). Effects are buffered in one
// rocksdb::WriteBatch and written (a) before any snapshot of the sink's state is taken (snapshot_full and
// snapshot_delta flush first, as does mark_backed_up), (b) every flush-every items, (c) at finish. So every effect
// of an item that a stored state backup reflects is in the database before that backup exists. After a failure the
// runtime restores that backup and delivers again every item after it (exact mode logs every item before it is
// acknowledged, and senders resend what is not acknowledged); their effects are written again under the same
// identity, with the same item (upstream replay regenerates outputs with the same sequence numbers), a no-op.
// Effects written early, by (b), of items the restored state does not reflect are rewritten the same way.
//
// State (backed up like any operator's, for the evaluator): items processed, the sum of their values, and the
// digest of their effects (effect_digest): with exactly-once state and effects, the digest of the database equals
// the state's. Divergence: items since the last backup (alpha 1, beta 0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "algorithms/sinks/effect_db.h"

namespace afs::sinks {

// Parameters: path (a directory: instance i of the stage writes the database path/part-i; required when
// with_database), flush-every (items buffered at most before a write, 1 .. 2^24, default 4096), sync (true|false:
// fsync every write, default false; without it a write survives a SIGKILL but not a machine crash).
// Throws ConfigError naming the parameter. The database is opened at the first write (a restarted worker's
// predecessor may still hold it) and closed at finish().
class EffectSink final : public Operator {
 public:
  EffectSink(const Params& p, const InstanceInfo& at, bool with_database);
  ~EffectSink() override;

  // Keyed by the runtime's identity of the item: (out.input_channel(), item.seq) (afstream/core/operator.h).
  void process(const Item& item, Emitter& out) override;
  void finish(Emitter& out) override;

  double alpha() const override { return 1; }
  double beta() const override { return 0; }
  double divergence() const override { return static_cast<double>(items_ - items_at_backup_); }
  bool divergence_bounded_by_alpha() const override { return true; }
  // Both write the buffered effects to the database first (the backup then never reflects an unwritten effect).
  void snapshot_full(ByteWriter& out) const override;
  void snapshot_delta(ByteWriter& out) const override;
  void mark_backed_up() override;
  void restore_full(ByteReader& in) override;
  void apply_delta(ByteReader& in) override;
  double distance(const Operator& other) const override;  // |items - other's items|

  std::uint64_t items() const { return items_; }
  std::int64_t value_sum() const { return value_sum_; }
  std::uint64_t digest() const { return digest_; }
  // Not state: writes (batches) and effects written by this instance (rewrites included), and its database path.
  std::uint64_t batches_written() const { return batches_; }
  std::uint64_t effects_written() const { return effects_written_; }
  const std::string& database_path() const { return path_; }

 private:
  void write_buffered() const;
  void write_state(ByteWriter& out) const;
  void read_state(ByteReader& in, const char* what);

  std::string path_;  // empty: no database
  EffectDbOptions db_options_;
  std::size_t flush_every_ = 4096;
  std::uint64_t items_ = 0;
  std::int64_t value_sum_ = 0;
  std::uint64_t digest_ = 0;
  std::uint64_t items_at_backup_ = 0;
  // The write buffer and the database handle change when a snapshot is taken (const: it is taken from a const
  // operator), which writes the buffer first.
  mutable std::vector<Effect> buffered_;
  mutable std::unique_ptr<EffectDb> db_;
  mutable std::uint64_t batches_ = 0;
  mutable std::uint64_t effects_written_ = 0;
};

// A stateless relay: emits every item unchanged.
class PassThrough final : public StatelessOperator {
 public:
  void process(const Item& item, Emitter& out) override { out.emit(item.key, item.value, item.time); }
};

void register_sinks(Registry& registry);

}  // namespace afs::sinks
