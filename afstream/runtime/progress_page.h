// A worker process's input positions, kept where its next incarnation finds them after a SIGKILL (DESIGN 5): the
// last sequence number it processed on each input channel, in a small file mapped into its memory and written after
// each batch of items. On threads the successor of a crashed worker reads the crashed one's positions from it
// (CrashInfo::processed); a killed process leaves nothing in memory, so it leaves them here, in the worker's local
// directory (`--worker.local-state`, the same as its chain's copy: on /dev/shm, a failure of the process, not of the
// host). With them a recovered worker process knows where the crashed incarnation was: its replay ends there, as on
// threads (an exact-mode word count's tokenizers, whose logs hold their whole backlog, recovered only at the end of
// the stream), and its failure record gets caught_up_ms and repeated_items (FailureRecord).
//
// The positions are those after the last complete batch: up to one batch short of where the process died. A page is
// written only by the newest incarnation: laid out with the crashed one's positions, then its own from its restore
// on (Worker::restore publishes the restored positions), as the successor of a crashed worker on threads reads the
// positions that worker had when it crashed.
// With them, what a failure after that batch loses (FailureRecord::lost_items, lost_outputs: measured at the crash on
// threads, where it is simulated; a SIGKILLed process could not say, and both read 0 on worker processes before).
// File `worker-<id>.progress`: a header [u64 magic "AFSPROG2" | u32 worker | u32 epoch of the writer | u32 channels |
// u32 0 | u64 lost items | u64 lost outputs] and per channel [u32 channel | u32 0 | u64 processed]. The magic is
// written last, so a page whose writer died while laying it out reads as none. Never prints or exits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "afstream/store/backup_store.h"

namespace afs {

class ProgressPage {
 public:
  // What a crashed incarnation's page says.
  struct Seen {
    SeqByChannel processed;                          // per input channel, the last sequence number processed
    std::uint64_t lost_items = 0, lost_outputs = 0;  // what its failure lost (as of its last batch)
  };

  // The page of `worker` in `dir`.
  static std::string path_in(const std::string& dir, int worker);

  // What the crashed incarnation of `worker` published, if its page is there, complete, and was written by
  // incarnation `epoch` - 1, the one this incarnation replaces. A page of another worker, of a later incarnation, or
  // of an older one is not this crash's: an older one's is stale wherever a later incarnation ran elsewhere (a
  // worker started by hand on another host with another --worker.local-state, or in another run), and reading it
  // ended the replay at once with repeated_items 0. nullopt: no such page (the positions are then unknown and the
  // replay is the whole log, as before pages existed; also when the crashed incarnation died before it laid out
  // its page). Throws nothing.
  static std::optional<Seen> read(const std::string& dir, int worker, std::uint32_t epoch);

  // Creates (or takes over) the page of `worker` for incarnation `epoch`, for the input channels `channels` (slot i:
  // channels[i]), starting each at floor's value for it (0 if none). Throws RuntimeError naming the file if it
  // cannot be created, sized or mapped.
  ProgressPage(const std::string& dir, int worker, std::uint32_t epoch, std::span<const std::uint32_t> channels,
               const SeqByChannel& floor);
  ~ProgressPage();
  ProgressPage(const ProgressPage&) = delete;
  ProgressPage& operator=(const ProgressPage&) = delete;

  // Slot i's channel has been processed up to seq (lower than the page holds after a restore from an older backup).
  void publish(std::size_t slot, std::uint64_t seq) {
    std::atomic_ref<std::uint64_t>(cells_[slot].processed).store(seq, std::memory_order_relaxed);
  }
  // What a failure now would lose (Worker::lost_items_now, lost_outputs_now).
  void publish_losses(std::uint64_t items, std::uint64_t outputs) {
    std::atomic_ref<std::uint64_t>(header_->lost_items).store(items, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(header_->lost_outputs).store(outputs, std::memory_order_relaxed);
  }

 private:
  struct Header {
    std::uint64_t magic;
    std::uint32_t worker;
    std::uint32_t epoch;
    std::uint32_t channels;
    std::uint32_t zero;
    std::uint64_t lost_items;
    std::uint64_t lost_outputs;
  };
  struct Cell {
    std::uint32_t channel;
    std::uint32_t zero;
    std::uint64_t processed;
  };
  void* map_ = nullptr;
  std::size_t bytes_ = 0;
  Header* header_ = nullptr;
  Cell* cells_ = nullptr;
};

}  // namespace afs
