// Background compaction of state chains: rebuild, restore, write one full snapshot, swap it in (compactor.h).
#include "afstream/ft/compactor.h"

#include <algorithm>
#include <span>
#include <utility>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"
#include "afstream/state/snapshot.h"

namespace afs {

bool needs_compaction(const ChainInfo& info, const CompactionPolicy& policy) {
  if (info.length < 2) return false;
  return info.length - 1 >= policy.max_deltas ||
         static_cast<double>(info.delta_bytes) >= policy.delta_ratio * static_cast<double>(info.full_bytes);
}

Bytes compact_chain(const std::vector<Bytes>& chain, const OperatorMaker& make) {
  if (chain.empty()) throw FormatError("compaction: the chain is empty");
  // The snapshots are read in place (decode's copies were about a tenth of the compactor thread's time for a KDD-like
  // learner's chains in a perf record of a run on processes).
  std::span<const std::uint8_t> first_snapshot;
  StateRecord first = StateRecord::decode(chain[0], &first_snapshot);
  if (!first.full) throw FormatError("compaction: the chain starts with a delta");
  if (!first.op_spec) {
    throw FormatError("compaction: the chain's full record names no operator (a source's, or an older worker's)");
  }
  const OperatorSpec spec = *first.op_spec;
  const std::uint32_t type = type_id_of(spec.kind);
  std::unique_ptr<Operator> op = make(spec);
  if (!op) throw ConfigError("compaction: no operator '" + spec.kind + "' to rebuild the chain with");
  {
    const auto opened = open_snapshot(first_snapshot, type);
    if (opened.kind != SnapshotKind::Full) throw FormatError("compaction: the full record holds a delta snapshot");
    ByteReader r(opened.payload);
    op->restore_full(r);
  }
  StateRecord last = std::move(first);
  for (std::size_t i = 1; i < chain.size(); ++i) {
    std::span<const std::uint8_t> snapshot;
    StateRecord rec = StateRecord::decode(chain[i], &snapshot);
    if (rec.full) throw FormatError("compaction: record " + std::to_string(i) + " of the chain is a full record");
    const auto opened = open_snapshot(snapshot, type);
    if (opened.kind != SnapshotKind::Delta) {
      throw FormatError("compaction: record " + std::to_string(i) + " holds a full snapshot in a delta record");
    }
    ByteReader r(opened.payload);
    op->apply_delta(r);
    last = std::move(rec);
  }
  ByteWriter w;
  w.buffer().resize(kSnapshotHeaderSize);
  op->snapshot_full(w);
  last.snapshot = w.take();
  seal_snapshot_in_place(last.snapshot, type, SnapshotKind::Full);
  last.full = true;
  last.op_spec = spec;
  return last.encode();
}

ChainCompactor::ChainCompactor(BackupStore& store, OperatorMaker make, CompactionPolicy policy,
                               std::function<void(int, const std::string&)> on_error,
                               std::function<void(int, std::uint64_t, std::uint64_t)> on_compacted)
    : store_(store),
      make_(std::move(make)),
      policy_(policy),
      on_error_(std::move(on_error)),
      on_compacted_(std::move(on_compacted)) {
  thread_ = std::thread([this] { loop(); });
}

ChainCompactor::~ChainCompactor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ChainCompactor::notify(int worker, const ChainInfo& info) {
  if (!needs_compaction(info, policy_)) return;
  {
    std::lock_guard lock(mu_);
    if (stop_ || queued_.count(worker) != 0) return;
    if (auto g = given_up_.find(worker); g != given_up_.end() && g->second == info.generation) return;
    queued_[worker] = info.generation;
    queue_.push_back(worker);
  }
  cv_.notify_all();
}

void ChainCompactor::wait_idle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_ || (queue_.empty() && !busy_); });
}

CompactorCounters ChainCompactor::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void ChainCompactor::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int worker = queue_.front();
    queue_.pop_front();
    queued_.erase(worker);
    busy_ = true;
    lock.unlock();
    compact_one(worker);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void ChainCompactor::compact_one(int worker) {
  ChainInfo info;
  std::string problem;
  bool unknown = false;
  try {
    const std::vector<Bytes> chain = store_.state_chain(worker, &info);
    if (!needs_compaction(info, policy_) || chain.size() != info.length) return;
    // Checkpoint mode keeps the records of every checkpoint that may still be the latest complete one; merging
    // them would lose that. Its worker restarts its own chain at each recovery (worker_checkpoint.cc).
    if (std::any_of(chain.begin(), chain.end(),
                    [](const Bytes& r) { return StateRecord::decode(r).checkpoint != 0; })) {
      std::lock_guard lock(mu_);
      ++counters_.checkpoint_chains;
      given_up_[worker] = info.generation;
      return;
    }
    {
      std::span<const std::uint8_t> snapshot;  // not copied: only the operator spec is needed
      const StateRecord head = StateRecord::decode(chain[0], &snapshot);
      if (head.op_spec) {
        const auto op = make_(*head.op_spec);
        if (op && !op->store_compacts_deltas()) {
          std::lock_guard lock(mu_);
          ++counters_.left_to_worker;
          given_up_[worker] = info.generation;
          return;
        }
      }
    }
    std::uint64_t read = 0;
    for (const auto& r : chain) read += r.size();
    Bytes full = compact_chain(chain, make_);
    const std::uint64_t written = full.size();
    const bool applied = store_.compact_state(worker, info.generation, chain.size(), std::move(full));
    if (applied && on_compacted_) on_compacted_(worker, info.generation, chain.size());
    std::lock_guard lock(mu_);
    if (applied) {
      ++counters_.compactions;
      counters_.records_merged += chain.size();
      counters_.bytes_read += read;
      counters_.bytes_written += written;
    } else {
      ++counters_.superseded;
    }
    return;
  } catch (const ConfigError& e) {
    unknown = true;
    problem = e.what();
  } catch (const std::exception& e) {
    problem = e.what();
  }
  {
    std::lock_guard lock(mu_);
    ++(unknown ? counters_.unknown : counters_.failures);
    given_up_[worker] = info.generation;
  }
  if (on_error_) on_error_(worker, problem);
}

}  // namespace afs
