// The records a worker writes to the backup store (DESIGN 5): a state record (the operator's sealed snapshot or
// delta, the input sequence numbers it reflects, the output sequence numbers reached, the source offset, and,
// when gamma is 0, the unacknowledged outputs) and an item record (received items not yet processed).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "afstream/core/item.h"
#include "afstream/core/params.h"
#include "afstream/store/backup_store.h"

namespace afs {

struct ChannelItem {
  std::uint32_t channel = 0;
  bool end_of_stream = false;  // punctuation: the channel ends after this sequence number
  Item item;
};

// Which operator wrote a state: its registry name, parameters and place in its stage. Full records carry it, so
// that a store can rebuild the operator and compact the chain into one full snapshot (ft/compactor.h).
struct OperatorSpec {
  std::string kind;  // the operator's name in the Registry
  Params params;
  int index = 0;
  int parallelism = 1;

  friend bool operator==(const OperatorSpec& a, const OperatorSpec& b) {
    return a.kind == b.kind && a.params.values() == b.params.values() && a.index == b.index &&
           a.parallelism == b.parallelism;
  }
};

struct StateRecord {
  bool full = false;
  Bytes snapshot;                           // sealed operator snapshot (afs::seal_snapshot), Full or Delta
  SeqByChannel inputs;                      // input channel -> last processed sequence number
  SeqByChannel outputs;                     // output channel -> last emitted sequence number
  std::vector<std::uint32_t> ended_inputs;  // input channels whose end-of-stream was processed
  std::uint64_t source_offset = 0;
  std::vector<ChannelItem> unacked_outputs;  // only when the runtime gamma is 0
  // Per failure j = 1..k of this worker known when the record was written: input items missing for good because of
  // it (measured at its recovery; -1 if not measured). See Worker::restore().
  std::vector<std::int64_t> missing_by_failure;
  // What a partial backup left unwritten (Operator::backup_partial_delta's return value; 0 for a whole backup): the
  // state this chain restores is within it of the state that reflected `inputs`.
  double residual = 0;
  // Per failure j = 1..k known when the record was written: the residual of the backup restored at it.
  std::vector<double> residual_by_failure;
  // Written with full snapshots (absent in deltas and in records of sources, which have no operator state).
  std::optional<OperatorSpec> op_spec;
  // Checkpoint mode (record version 5; 0 in older records and in other modes): the barrier checkpoint this record
  // belongs to, and whether the worker had finished its stream in it (ended every input, ran Operator::finish and
  // emitted its end of stream), so that a restore from it does not run finish() again.
  std::uint64_t checkpoint = 0;
  bool finished = false;
  // Sources, approximate mode (record version 6; empty in older records and other workers): per output channel, the
  // receiver's covered number when the record was written. Every later incarnation of that receiver restores at
  // least that far, so a restarted source does not send those items to it again (Worker::OutChannel::receiver_holds).
  SeqByChannel covered_outputs;

  Bytes encode() const;
  static StateRecord decode(const Bytes& b);  // throws FormatError; reads versions 4 to 6
  // The same without copying the snapshot: `snapshot` is left empty and *snapshot_in_b points at it inside b (a
  // restore reads a chain of up to five times the state; the copies were an eighth of a KDD-like learner's restore).
  static StateRecord decode(const Bytes& b, std::span<const std::uint8_t>* snapshot_in_b);
};

Bytes encode_items(const std::vector<ChannelItem>& items);
std::vector<ChannelItem> decode_items(const Bytes& b);  // throws FormatError

}  // namespace afs
