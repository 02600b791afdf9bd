#include "afstream/store/memory_store.h"

#include <string>

#include "afstream/core/errors.h"
#include "afstream/state/snapshot.h"

namespace afs {

MemoryStore::Sealed MemoryStore::seal(Bytes b) {
  Sealed s;
  s.checksum = checksum(b);
  s.data = std::make_shared<const Bytes>(std::move(b));
  return s;
}

const Bytes& MemoryStore::verified(const Sealed& s, int worker, const char* what) {
  if (checksum(*s.data) != s.checksum) {
    throw FormatError(std::string("backup store: corrupt ") + what + " of worker " + std::to_string(worker) +
                      " (checksum mismatch); it will not be restored");
  }
  return *s.data;
}

ChainInfo MemoryStore::info_of(const WorkerData& w) {
  ChainInfo info;
  info.generation = w.generation;
  info.length = w.chain.size();
  info.full_bytes = w.chain.empty() ? 0 : w.chain.front().data->size();
  info.delta_bytes = w.chain_bytes - info.full_bytes;
  return info;
}

ChainInfo MemoryStore::put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) {
  std::lock_guard lock(mu_);
  auto& w = workers_[worker];
  stats_.state_backups++;
  stats_.bytes_written += record.size();
  if (full || w.generation == 0) {
    for (const auto& s : w.chain) stats_.bytes_stored -= s.data->size();
    w.chain.clear();
    w.chain_bytes = 0;
    w.generation = next_generation_++;
  }
  stats_.bytes_stored += record.size();
  w.chain_bytes += record.size();
  w.chain.push_back(seal(std::move(record)));
  // Drop item records wholly covered by this state.
  for (auto it = w.items.begin(); it != w.items.end();) {
    bool covered_all = true;
    for (const auto& info : it->infos) {
      auto c = covered.find(info.channel);
      if (c == covered.end() || c->second < info.last_seq) {
        covered_all = false;
        break;
      }
    }
    if (covered_all) {
      stats_.bytes_stored -= it->sealed.data->size();
      it = w.items.erase(it);
    } else {
      ++it;
    }
  }
  return info_of(w);
}

ChainInfo MemoryStore::chain_info(int worker) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  return it == workers_.end() ? ChainInfo{} : info_of(it->second);
}

std::vector<Bytes> MemoryStore::state_chain(int worker, ChainInfo* info) const {
  std::vector<Bytes> out;
  for (const auto& p : state_chain_shared(worker, info)) out.push_back(*p);  // copies of the shared records
  return out;
}

std::vector<std::shared_ptr<const Bytes>> MemoryStore::state_chain_shared(int worker, ChainInfo* info) const {
  std::vector<Sealed> chain;
  {
    std::lock_guard lock(mu_);
    if (info) *info = {};
    auto it = workers_.find(worker);
    if (it == workers_.end()) return {};
    chain = it->second.chain;
    if (info) *info = info_of(it->second);
  }
  std::vector<std::shared_ptr<const Bytes>> out;  // verified outside the lock: other workers keep backing up
  for (const auto& s : chain) {
    (void)verified(s, worker, "state backup");
    out.push_back(s.data);
  }
  return out;
}

bool MemoryStore::compact_state(int worker, std::uint64_t generation, std::uint64_t count, Bytes full) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end() || count == 0) return false;
  auto& w = it->second;
  if (w.generation != generation || w.chain.size() < count) return false;
  for (std::uint64_t i = 0; i < count; ++i) {
    stats_.bytes_stored -= w.chain[i].data->size();
    w.chain_bytes -= w.chain[i].data->size();
  }
  stats_.bytes_stored += full.size();
  w.chain_bytes += full.size();
  w.chain.erase(w.chain.begin(), w.chain.begin() + static_cast<std::ptrdiff_t>(count - 1));
  w.chain.front() = seal(std::move(full));
  w.generation = next_generation_++;
  return true;
}

void MemoryStore::put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) {
  std::lock_guard lock(mu_);
  stats_.item_backups++;
  stats_.bytes_written += record.size();
  stats_.bytes_stored += record.size();
  workers_[worker].items.push_back({seal(std::move(record)), std::move(infos)});
}

std::vector<Bytes> MemoryStore::item_records(int worker) const {
  std::lock_guard lock(mu_);
  std::vector<Bytes> out;
  auto it = workers_.find(worker);
  if (it == workers_.end()) return out;
  for (const auto& r : it->second.items) out.push_back(verified(r.sealed, worker, "item backup"));
  return out;
}

void MemoryStore::drop(int worker) {
  std::lock_guard lock(mu_);
  ledger_.clear(worker);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  for (const auto& s : it->second.chain) stats_.bytes_stored -= s.data->size();
  for (const auto& r : it->second.items) stats_.bytes_stored -= r.sealed.data->size();
  workers_.erase(it);
}

void MemoryStore::confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final) {
  std::lock_guard lock(mu_);
  ledger_.confirm(worker, id, workers, final);
}

CheckpointStatus MemoryStore::checkpoint_status() const {
  std::lock_guard lock(mu_);
  return ledger_.status();
}

CheckpointStatus MemoryStore::rejoin_checkpoints(int worker) {
  std::lock_guard lock(mu_);
  return ledger_.rejoin(worker);
}

StoreStats MemoryStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void MemoryStore::corrupt_latest_state(int worker) {
  std::lock_guard lock(mu_);
  auto& chain = workers_[worker].chain;
  if (!chain.empty() && !chain.back().data->empty()) {
    auto copy = std::make_shared<Bytes>(*chain.back().data);  // restores may be reading the shared one
    (*copy)[copy->size() / 2] ^= 0x5a;
    chain.back().data = std::move(copy);
  }
}

}  // namespace afs
