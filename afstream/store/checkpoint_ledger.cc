// The checkpoint ledger (checkpoint_ledger.h): confirmations, completion, rounds, and its encoding for RocksDB.
#include "afstream/store/checkpoint_ledger.h"

#include <algorithm>
#include <string>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

namespace afs {

namespace {
constexpr std::uint32_t kLedgerMagic = 0x4146434b;  // "AFCK"
constexpr std::uint16_t kLedgerVersion = 1;
}  // namespace

bool CheckpointLedger::confirm(int worker, std::uint64_t id, int workers, bool final) {
  if (checkpoint_round(id) != round_) return false;
  auto& mark = marks_[worker];
  if (checkpoint_round(mark) != round_ || id > mark) mark = id;
  if (final) finished_.insert(worker);
  std::uint64_t lowest = ~0ULL;
  for (int w = 0; w < workers; ++w) {
    if (finished_.count(w)) continue;
    const auto it = marks_.find(w);
    if (it == marks_.end() || checkpoint_round(it->second) != round_ || (it->second & 0xffffffffULL) == 0) {
      return true;
    }
    lowest = std::min(lowest, it->second);
  }
  if (lowest == ~0ULL) lowest = id;  // every worker finished: the last one's final checkpoint
  if (workers > 0 && lowest > complete_) complete_ = lowest;
  return true;
}

CheckpointStatus CheckpointLedger::rejoin(int worker) {
  const auto it = marks_.find(worker);
  const std::uint32_t joined = it == marks_.end() ? 0 : checkpoint_round(it->second);
  if (joined == round_) ++round_;  // a new failure: its mark was already in the current round
  finished_.erase(worker);
  marks_[worker] = checkpoint_id(round_, 0);
  return status();
}

Bytes CheckpointLedger::encode() const {
  ByteWriter w;
  w.put(kLedgerMagic);
  w.put(kLedgerVersion);
  w.put(complete_);
  w.put(round_);
  w.put<std::uint64_t>(marks_.size());
  for (const auto& [worker, id] : marks_) {
    w.put<std::int32_t>(worker);
    w.put(id);
  }
  w.put<std::uint64_t>(finished_.size());
  for (int worker : finished_) w.put<std::int32_t>(worker);
  return w.take();
}

CheckpointLedger CheckpointLedger::decode(const Bytes& b) {
  ByteReader r(b);
  if (r.get<std::uint32_t>("magic") != kLedgerMagic) throw FormatError("checkpoint ledger: bad magic");
  const auto v = r.get<std::uint16_t>("version");
  if (v != kLedgerVersion) {
    throw FormatError("checkpoint ledger: unsupported version " + std::to_string(v) + " (expected " +
                      std::to_string(kLedgerVersion) + ")");
  }
  CheckpointLedger l;
  l.complete_ = r.get<std::uint64_t>("complete checkpoint");
  l.round_ = r.get<std::uint32_t>("round");
  const auto n = r.get<std::uint64_t>("worker count");
  if (n > r.rest().size() / 12)
    throw FormatError("checkpoint ledger: worker count " + std::to_string(n) + " exceeds data");
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto worker = r.get<std::int32_t>("worker");
    l.marks_[worker] = r.get<std::uint64_t>("checkpoint");
  }
  const auto f = r.get<std::uint64_t>("finished count");
  if (f > r.rest().size() / 4)
    throw FormatError("checkpoint ledger: finished count " + std::to_string(f) + " exceeds data");
  for (std::uint64_t i = 0; i < f; ++i) l.finished_.insert(r.get<std::int32_t>("finished worker"));
  r.expect_end("checkpoint ledger");
  return l;
}

}  // namespace afs
