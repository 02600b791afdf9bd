#include "afstream/net/codec.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "afstream/core/errors.h"
#include "afstream/net/wire.capnp.h"

namespace afs::net {

static_assert(kWireVersion == wire::WIRE_VERSION, "kWireVersion in codec.h must match wireVersion in wire.capnp");
static_assert(static_cast<std::uint16_t>(ControlKind::kPeerRestarted) ==
              static_cast<std::uint16_t>(wire::Control::Kind::PEER_RESTARTED));
static_assert(static_cast<std::uint16_t>(ControlKind::kResendFrom) ==
              static_cast<std::uint16_t>(wire::Control::Kind::RESEND_FROM));
static_assert(static_cast<std::uint16_t>(ControlKind::kStop) == static_cast<std::uint16_t>(wire::Control::Kind::STOP));
static_assert(static_cast<std::uint16_t>(ControlKind::kHeartbeat) ==
              static_cast<std::uint16_t>(wire::Control::Kind::HEARTBEAT));
static_assert(static_cast<std::uint16_t>(ControlKind::kAsk) == static_cast<std::uint16_t>(wire::Control::Kind::ASK));
static_assert(static_cast<std::uint16_t>(ControlKind::kBarrier) ==
              static_cast<std::uint16_t>(wire::Control::Kind::BARRIER));
static_assert(static_cast<std::uint16_t>(StoreErrorKind::kCorruptRecord) ==
              static_cast<std::uint16_t>(wire::StoreError::Kind::CORRUPT_RECORD));
static_assert(static_cast<std::uint16_t>(StoreErrorKind::kStoreFailure) ==
              static_cast<std::uint16_t>(wire::StoreError::Kind::STORE_FAILURE));
static_assert(static_cast<std::uint16_t>(StoreErrorKind::kBadRequest) ==
              static_cast<std::uint16_t>(wire::StoreError::Kind::BAD_REQUEST));
static_assert(static_cast<std::uint16_t>(StoreErrorKind::kStaleIncarnation) ==
              static_cast<std::uint16_t>(wire::StoreError::Kind::STALE_INCARNATION));
static_assert(static_cast<std::uint16_t>(StoreErrorKind::kNoLocalCopy) ==
              static_cast<std::uint16_t>(wire::StoreError::Kind::NO_LOCAL_COPY));
static_assert(static_cast<std::uint16_t>(ReportKind::kRegister) ==
              static_cast<std::uint16_t>(wire::WorkerReport::Kind::REGISTER));
static_assert(static_cast<std::uint16_t>(ReportKind::kStandby) ==
              static_cast<std::uint16_t>(wire::WorkerReport::Kind::STANDBY));
static_assert(static_cast<std::uint16_t>(ReportKind::kFailed) ==
              static_cast<std::uint16_t>(wire::WorkerReport::Kind::FAILED));
static_assert(sizeof(capnp::word) == 8 && alignof(capnp::word) <= 8);

namespace {

constexpr std::uint16_t kMaxControlKind = static_cast<std::uint16_t>(ControlKind::kBarrier);

// Words of a single-segment frame beyond the 3 list bodies of a batch: segment table (1), root pointer (1),
// Envelope (2 data + 1 pointer), Batch (3 data + 4 pointers). Used to size the encoder's buffer; if it were
// ever too small the encoder falls back to a (correct, slower) multi-segment copy.
constexpr std::size_t kBatchOverheadWords = 12;

// A Cap'n Proto segment holds at most 2^29 words; keep a batch within one.
constexpr std::size_t kMaxBatchItems = ((std::size_t{1} << 29) - kBatchOverheadWords) / 3;
constexpr std::size_t kSmallMessageWords = 16;

// Raw element access to the columnar lists is valid only where the host byte order is the wire's (little).
constexpr bool kRawLists = std::endian::native == std::endian::little;

constexpr std::uint16_t kMaxStoreErrorKind = static_cast<std::uint16_t>(StoreErrorKind::kNoLocalCopy);

// Cap'n Proto's limit on the elements of one list (so on the bytes of one Data blob).
constexpr std::size_t kMaxListElements = (std::size_t{1} << 29) - 1;

// Words of a store message beyond its records, lists and text: segment table, root pointer, Envelope, the request
// or reply struct and their pointers, with room to spare (a short estimate only costs a multi-segment copy).
constexpr std::size_t kStoreOverheadWords = 32;

// Words a Data blob or Text of n bytes takes (its pointer and its body, rounded up to whole words).
constexpr std::size_t blob_words(std::size_t n) { return 1 + (n + 7) / 8; }

// what: e.g. "a put_state record of"; unit: "bytes" or "entries".
void check_list_size(std::size_t n, const char* what, const char* unit) {
  if (n > kMaxListElements) {
    throw FormatError(std::string("cannot encode ") + what + " " + std::to_string(n) + " " + unit +
                      ": the wire limit is " + std::to_string(kMaxListElements) + " " + unit);
  }
}

inline capnp::Text::Reader as_text(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
inline std::string from_text(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

inline capnp::Data::Reader as_data(const std::vector<std::uint8_t>& bytes) {
  return capnp::Data::Reader(bytes.data(), bytes.size());
}

inline std::uint64_t load_u64(const capnp::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_u64(capnp::byte* p, std::uint64_t v) { std::memcpy(p, &v, sizeof v); }

// Bytes of a list of 8-byte elements written by this process. The list lives in the builder's (mutable)
// segment; capnp only exposes it read-only through its reader, hence the const_cast.
template <typename T>
capnp::byte* raw_list_bytes(typename capnp::List<T>::Builder list) {
  auto bytes = capnp::AnyList::Reader(list.asReader()).getRawBytes();
  return const_cast<capnp::byte*>(bytes.begin());
}

}  // namespace

std::string_view to_string(ControlKind kind) {
  switch (kind) {
    case ControlKind::kPeerRestarted:
      return "peer-restarted";
    case ControlKind::kResendFrom:
      return "resend-from";
    case ControlKind::kStop:
      return "stop";
    case ControlKind::kHeartbeat:
      return "heartbeat";
    case ControlKind::kAsk:
      return "ask";
    case ControlKind::kBarrier:
      return "barrier";
  }
  return "unknown";
}

std::string_view to_string(StoreErrorKind kind) {
  switch (kind) {
    case StoreErrorKind::kCorruptRecord:
      return "corrupt record";
    case StoreErrorKind::kStoreFailure:
      return "store failure";
    case StoreErrorKind::kBadRequest:
      return "bad request";
    case StoreErrorKind::kStaleIncarnation:
      return "stale incarnation";
    case StoreErrorKind::kNoLocalCopy:
      return "no local copy";
  }
  return "unknown";
}

std::string_view op_name(const StoreOp& op) {
  static constexpr std::string_view kNames[] = {
      "put_state", "put_items",          "state_chain",       "item_records",      "drop",
      "stats",     "confirm_checkpoint", "checkpoint_status", "rejoin_checkpoints"};
  static_assert(std::size(kNames) == std::variant_size_v<StoreOp>);
  return kNames[op.index()];
}

std::optional<std::int32_t> op_worker(const StoreOp& op) {
  return std::visit(
      [](const auto& o) -> std::optional<std::int32_t> {
        using Op = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<Op, StatsReq> || std::is_same_v<Op, CheckpointStatusReq>) {
          return std::nullopt;
        } else {
          return o.worker;
        }
      },
      op);
}

bool op_mutates(const StoreOp& op) {
  return std::holds_alternative<PutStateReq>(op) || std::holds_alternative<PutItemsReq>(op) ||
         std::holds_alternative<DropReq>(op) || std::holds_alternative<ConfirmCheckpointReq>(op) ||
         std::holds_alternative<RejoinCheckpointsReq>(op);
}

// ---------------------------------------------------------------------------------------------------------------
// Encoder

// buf[0] is reserved for the segment table; buf[1..] is handed to MallocMessageBuilder as its first segment.
// MallocMessageBuilder requires that segment zeroed and re-zeroes what it used when destroyed, so the builder of
// the last message is kept alive (its bytes are the caller's output) until the next call or release_memory().
struct Encoder::State {
  std::vector<capnp::word> buf;
  std::optional<capnp::MallocMessageBuilder> builder;
  kj::Array<capnp::word> fallback;  // only for a message that did not fit in one segment

  capnp::MallocMessageBuilder& start(std::size_t frame_words) {
    builder.reset();
    fallback = nullptr;
    if (buf.size() < frame_words) {
      std::vector<capnp::word> bigger(frame_words + frame_words / 4);  // value-initialized: zeroed
      buf.swap(bigger);
    }
    builder.emplace(kj::arrayPtr(buf.data() + 1, buf.size() - 1));
    return *builder;
  }

  std::span<const std::uint8_t> finish() {
    auto segments = builder->getSegmentsForOutput();
    if (segments.size() == 1 && segments[0].begin() == buf.data() + 1) {
      const std::uint32_t table[2] = {0, static_cast<std::uint32_t>(segments[0].size())};  // count - 1, size
      std::memcpy(buf.data(), table, sizeof table);
      return {reinterpret_cast<const std::uint8_t*>(buf.data()), (1 + segments[0].size()) * sizeof(capnp::word)};
    }
    fallback = capnp::messageToFlatArray(segments);
    return {reinterpret_cast<const std::uint8_t*>(fallback.begin()), fallback.size() * sizeof(capnp::word)};
  }

  wire::Envelope::Builder envelope(std::size_t frame_words, std::uint32_t sender, std::uint32_t epoch) {
    auto env = start(frame_words).initRoot<wire::Envelope>();
    env.setVersion(kWireVersion);
    env.setSender(sender);
    env.setEpoch(epoch);
    return env;
  }
};

Encoder::Encoder() : state_(std::make_unique<State>()) {}
Encoder::~Encoder() = default;
Encoder::Encoder(Encoder&&) noexcept = default;
Encoder& Encoder::operator=(Encoder&&) noexcept = default;

std::span<const std::uint8_t> Encoder::encode_batch(std::uint32_t sender, std::uint32_t epoch, std::uint32_t channel,
                                                    std::uint64_t first_seq, std::span<const Item> items,
                                                    bool end_of_stream, std::span<const std::uint64_t> roots,
                                                    std::int64_t emitted_ns) {
  const std::size_t n = items.size();
  if (n > kMaxBatchItems) {
    throw FormatError("cannot encode a batch of " + std::to_string(n) + " items: the wire limit is " +
                      std::to_string(kMaxBatchItems) + " items per batch");
  }
  if (!roots.empty() && roots.size() != n) {
    throw FormatError("cannot encode a batch of " + std::to_string(n) + " items with " + std::to_string(roots.size()) +
                      " roots");
  }
  auto batch = state_->envelope(kBatchOverheadWords + (roots.empty() ? 3 : 4) * n, sender, epoch).initBatch();
  if (!roots.empty()) {
    auto r = batch.initRoots(static_cast<unsigned>(n));
    for (unsigned i = 0; i < n; ++i) r.set(i, roots[i]);
  }
  batch.setChannel(channel);
  batch.setFirstSeq(first_seq);
  batch.setEndOfStream(end_of_stream);
  batch.setEmittedNs(emitted_ns);
  const auto count = static_cast<unsigned>(n);
  auto keys = batch.initKeys(count);
  auto values = batch.initValues(count);
  auto times = batch.initTimes(count);
  if (n == 0) return state_->finish();
  if constexpr (kRawLists) {
    capnp::byte* k = raw_list_bytes<std::uint64_t>(keys);
    capnp::byte* v = raw_list_bytes<std::int64_t>(values);
    capnp::byte* t = raw_list_bytes<std::int64_t>(times);
    const Item* it = items.data();
    for (std::size_t i = 0; i < n; ++i) {
      store_u64(k + 8 * i, it[i].key);
      store_u64(v + 8 * i, static_cast<std::uint64_t>(it[i].value));
      store_u64(t + 8 * i, static_cast<std::uint64_t>(it[i].time));
    }
  } else {
    for (unsigned i = 0; i < count; ++i) {
      keys.set(i, items[i].key);
      values.set(i, items[i].value);
      times.set(i, items[i].time);
    }
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_feedback(std::uint32_t sender, std::uint32_t epoch,
                                                       std::span<const Item> items) {
  const std::size_t n = items.size();
  if (n > kMaxBatchItems) {
    throw FormatError("cannot encode feedback of " + std::to_string(n) + " items: the wire limit is " +
                      std::to_string(kMaxBatchItems) + " items per frame");
  }
  auto fb = state_->envelope(kBatchOverheadWords + 3 * n, sender, epoch).initFeedback();
  const auto count = static_cast<unsigned>(n);
  auto keys = fb.initKeys(count);
  auto values = fb.initValues(count);
  auto times = fb.initTimes(count);
  for (unsigned i = 0; i < count; ++i) {
    keys.set(i, items[i].key);
    values.set(i, items[i].value);
    times.set(i, items[i].time);
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_ack(std::uint32_t sender, std::uint32_t epoch, std::uint32_t channel,
                                                  std::uint64_t seq, std::uint64_t covered,
                                                  std::span<const std::uint64_t> trees) {
  auto ack = state_->envelope(kSmallMessageWords + trees.size(), sender, epoch).initAck();
  ack.setChannel(channel);
  ack.setSeq(seq);
  ack.setCovered(covered);
  if (!trees.empty()) {
    if (trees.size() % 2 != 0) throw FormatError("cannot encode tree acks: (root, xor) pairs expected");
    auto t = ack.initTrees(static_cast<unsigned>(trees.size()));
    for (unsigned i = 0; i < trees.size(); ++i) t.set(i, trees[i]);
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_control(std::uint32_t sender, std::uint32_t epoch,
                                                      const ControlMsg& control) {
  auto c = state_->envelope(kSmallMessageWords, sender, epoch).initControl();
  c.setKind(static_cast<wire::Control::Kind>(static_cast<std::uint16_t>(control.kind)));
  c.setWorker(control.worker);
  c.setEpoch(control.epoch);
  c.setSeq(control.seq);
  c.setChannel(control.channel);
  c.setCheckpoint(control.checkpoint);
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_worker_report(std::uint32_t sender, std::uint32_t epoch,
                                                            const WorkerReportMsg& report) {
  check_list_size(report.final_state.size(), "a final state of", "bytes");
  auto r = state_
               ->envelope(64 + blob_words(report.final_state.size()) + blob_words(report.data_endpoint.size() + 1) +
                              blob_words(report.ack_endpoint.size() + 1) + blob_words(report.curve_key.size() + 1) +
                              blob_words(report.error.size() + 1) + blob_words(report.job_config.size() + 1),
                          sender, epoch)
               .initWorkerReport();
  r.setKind(static_cast<wire::WorkerReport::Kind>(static_cast<std::uint16_t>(report.kind)));
  auto st = r.initStatus();
  const auto& s = report.status;
  st.setItemsIn(s.items_in);
  st.setItemsOut(s.items_out);
  st.setStateBackups(s.state_backups);
  st.setItemBackups(s.item_backups);
  st.setBackupBytes(s.backup_bytes);
  st.setDuplicatesDropped(s.duplicates_dropped);
  st.setTreesReplayed(s.trees_replayed);
  if (!s.latency.empty()) {
    auto l = st.initLatency(static_cast<unsigned>(s.latency.size()));
    for (unsigned i = 0; i < s.latency.size(); ++i) l.set(i, s.latency[i]);
  }
  st.setGaps(s.gaps);
  st.setBadMessages(s.bad_messages);
  st.setUnbacked(s.unbacked);
  st.setUnacked(s.unacked);
  st.setDivergence(s.divergence);
  st.setSourceOffset(s.source_offset);
  st.setUnauthorizedConnections(s.unauthorized_connections);
  st.setCheckpoints(s.checkpoints);
  st.setCheckpointsAbandoned(s.checkpoints_abandoned);
  st.setCheckpointMs(s.checkpoint_ms);
  st.setCheckpointMsMax(s.checkpoint_ms_max);
  st.setCheckpointBytes(s.checkpoint_bytes);
  st.setAlignments(s.alignments);
  st.setAlignmentMs(s.alignment_ms);
  st.setAlignmentMsMax(s.alignment_ms_max);
  st.setItemsHeld(s.items_held);
  st.setInputPosition(s.input_position);
  st.setOutputsAfterEnd(s.outputs_after_end);
  if (!report.final_state.empty()) {
    r.setFinalState(capnp::Data::Reader(report.final_state.data(), report.final_state.size()));
  }
  auto rc = r.initRecovery();
  const auto& v = report.recovery;
  rc.setFailureCount(v.failure_count);
  rc.setTheta(v.theta);
  rc.setL(v.l);
  rc.setGamma(v.gamma);
  rc.setAlpha(v.alpha);
  rc.setRestoreMs(v.restore_ms);
  rc.setRecoveredMs(v.recovered_ms);
  rc.setReplayedItems(v.replayed_items);
  rc.setMissingItems(v.missing_items);
  rc.setDone(v.done);
  rc.setReplayMs(v.replay_ms);
  rc.setResidual(v.residual);
  rc.setFirstItemMs(v.first_item_ms);
  rc.setCaughtUpMs(v.caught_up_ms);
  rc.setRepeatedItems(v.repeated_items);
  rc.setLostItems(v.lost_items);
  rc.setLostOutputs(v.lost_outputs);
  if (!report.data_endpoint.empty()) r.setDataEndpoint(as_text(report.data_endpoint));
  if (!report.ack_endpoint.empty()) r.setAckEndpoint(as_text(report.ack_endpoint));
  if (!report.curve_key.empty()) r.setCurveKey(as_text(report.curve_key));
  if (!report.error.empty()) r.setError(as_text(report.error));
  if (!report.job_config.empty()) r.setJobConfig(as_text(report.job_config));
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_directory(std::uint32_t sender, std::uint32_t epoch,
                                                        const DirectoryMsg& directory) {
  check_list_size(directory.peers.size(), "a directory of", "workers");
  std::size_t words = 16;
  for (const auto& p : directory.peers) {
    words += 6 + blob_words(p.data_endpoint.size() + 1) + blob_words(p.ack_endpoint.size() + 1) +
             blob_words(p.curve_key.size() + 1);
  }
  auto d = state_->envelope(words, sender, epoch).initDirectory();
  auto list = d.initPeers(static_cast<unsigned>(directory.peers.size()));
  for (std::size_t i = 0; i < directory.peers.size(); ++i) {
    const auto& p = directory.peers[i];
    auto out = list[static_cast<unsigned>(i)];
    out.setWorker(p.worker);
    out.setEpoch(p.epoch);
    out.setUp(p.up);
    out.setFinished(p.finished);
    if (!p.data_endpoint.empty()) out.setDataEndpoint(as_text(p.data_endpoint));
    if (!p.ack_endpoint.empty()) out.setAckEndpoint(as_text(p.ack_endpoint));
    if (!p.curve_key.empty()) out.setCurveKey(as_text(p.curve_key));
    out.setKilled(p.killed);
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_assignment(std::uint32_t sender, std::uint32_t epoch,
                                                         const AssignmentMsg& assignment) {
  check_list_size(assignment.failures.size(), "an assignment with", "failures");
  check_list_size(assignment.job_args.size(), "an assignment with", "job arguments");
  std::size_t words = kStoreOverheadWords + assignment.failures.size() + assignment.job_args.size() +
                      blob_words(assignment.directory.size() + 1) + blob_words(assignment.store.size() + 1) +
                      blob_words(assignment.error.size() + 1) + blob_words(assignment.store_key.size() + 1);
  for (const auto& a : assignment.job_args) words += blob_words(a.size() + 1);
  auto m = state_->envelope(words, sender, epoch).initAssignment();
  m.setWorker(assignment.worker);
  m.setEpoch(assignment.epoch);
  auto failures = m.initFailures(static_cast<unsigned>(assignment.failures.size()));
  for (std::size_t i = 0; i < assignment.failures.size(); ++i) {
    failures.set(static_cast<unsigned>(i), assignment.failures[i]);
  }
  auto args = m.initJobArgs(static_cast<unsigned>(assignment.job_args.size()));
  for (std::size_t i = 0; i < assignment.job_args.size(); ++i) {
    args.set(static_cast<unsigned>(i), as_text(assignment.job_args[i]));
  }
  m.setDirectory(as_text(assignment.directory));
  m.setStore(as_text(assignment.store));
  m.setHeartbeatMs(assignment.heartbeat_ms);
  m.setError(as_text(assignment.error));
  if (!assignment.store_key.empty()) m.setStoreKey(as_text(assignment.store_key));
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_store_request(std::uint32_t sender, std::uint32_t epoch,
                                                            const StoreRequestMsg& request) {
  std::size_t words = kStoreOverheadWords;
  if (const auto* p = std::get_if<PutStateReq>(&request.op)) {
    check_list_size(p->record.size(), "a put_state record of", "bytes");
    check_list_size(p->covered.size(), "a covered list of", "entries");
    words += blob_words(p->record.size()) + 2 * p->covered.size();
  } else if (const auto* p = std::get_if<StateChainReq>(&request.op)) {
    check_list_size(p->held.size(), "a held digest list of", "entries");
    words += 1 + p->held.size();
  } else if (const auto* p = std::get_if<PutItemsReq>(&request.op)) {
    check_list_size(p->record.size(), "a put_items record of", "bytes");
    check_list_size(p->infos.size(), "an item info list of", "entries");
    words += blob_words(p->record.size()) + 3 * p->infos.size();
  }
  auto r = state_->envelope(words, sender, epoch).initStoreRequest();
  r.setRequestId(request.request_id);
  r.setSession(request.session);
  if (const auto worker = op_worker(request.op)) r.setWorker(*worker);
  switch (request.op.index()) {
    case 0: {
      const auto& p = std::get<PutStateReq>(request.op);
      auto g = r.initPutState();
      g.setFull(p.full);
      g.setDigest(p.digest);
      if (p.in_copy) {
        g.setInCopy(true);
        g.setCopyOffset(p.copy_offset);
        g.setCopySize(p.copy_size);
      }
      g.setRecord(as_data(p.record));
      auto covered = g.initCovered(static_cast<unsigned>(p.covered.size()));
      for (unsigned i = 0; i < covered.size(); ++i) {
        covered[i].setChannel(p.covered[i].channel);
        covered[i].setSeq(p.covered[i].seq);
      }
      break;
    }
    case 1: {
      const auto& p = std::get<PutItemsReq>(request.op);
      auto g = r.initPutItems();
      g.setRecord(as_data(p.record));
      auto infos = g.initInfos(static_cast<unsigned>(p.infos.size()));
      for (unsigned i = 0; i < infos.size(); ++i) {
        infos[i].setChannel(p.infos[i].channel);
        infos[i].setFirstSeq(p.infos[i].first_seq);
        infos[i].setLastSeq(p.infos[i].last_seq);
      }
      break;
    }
    case 2: {
      const auto& p = std::get<StateChainReq>(request.op);
      r.setStateChain();
      if (!p.held.empty()) {
        auto held = r.initHeld(static_cast<unsigned>(p.held.size()));
        for (unsigned i = 0; i < held.size(); ++i) held.set(i, p.held[i]);
      }
      break;
    }
    case 3:
      r.setItemRecords();
      break;
    case 4:
      r.setDrop();
      break;
    case 5:
      r.setStats();
      break;
    case 6: {
      const auto& c = std::get<ConfirmCheckpointReq>(request.op);
      auto g = r.initConfirmCheckpoint();
      g.setCheckpoint(c.checkpoint);
      g.setWorkers(c.workers);
      g.setFinal(c.final);
      break;
    }
    case 7:
      r.setCheckpointStatus();
      break;
    case 8:
      r.setRejoinCheckpoints();
      break;
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode_store_reply(std::uint32_t sender, std::uint32_t epoch,
                                                          const StoreReplyMsg& reply) {
  std::size_t words = kStoreOverheadWords;
  if (const auto* r = std::get_if<StoreRecordsMsg>(&reply.result)) {
    check_list_size(r->records.size(), "a list of", "records");
    for (const auto& rec : r->records) {
      check_list_size(rec.size(), "a stored record of", "bytes");
      words += blob_words(rec.size());
    }
  } else if (const auto* e = std::get_if<StoreErrorMsg>(&reply.result)) {
    check_list_size(e->message.size() + 1, "an error message of", "bytes");
    words += blob_words(e->message.size() + 1);
  }
  auto r = state_->envelope(words, sender, epoch).initStoreReply();
  r.setRequestId(reply.request_id);
  switch (reply.result.index()) {
    case 0:
      r.setOk();
      break;
    case 1: {
      const auto& records = std::get<StoreRecordsMsg>(reply.result).records;
      auto list = r.initRecords(static_cast<unsigned>(records.size()));
      for (unsigned i = 0; i < list.size(); ++i) list.set(i, as_data(records[i]));
      break;
    }
    case 2: {
      const auto& st = std::get<StoreStatsMsg>(reply.result);
      auto w = r.initStats();
      w.setStateBackups(st.state_backups);
      w.setItemBackups(st.item_backups);
      w.setBytesWritten(st.bytes_written);
      w.setBytesStored(st.bytes_stored);
      break;
    }
    case 3: {
      const auto& e = std::get<StoreErrorMsg>(reply.result);
      auto w = r.initError();
      w.setKind(static_cast<wire::StoreError::Kind>(static_cast<std::uint16_t>(e.kind)));
      w.setMessage(capnp::Text::Reader(e.message.data(), e.message.size()));
      break;
    }
    case 4: {
      const auto& c = std::get<StoreChainMsg>(reply.result);
      auto w = r.initChain();
      w.setGeneration(c.generation);
      w.setLength(c.length);
      w.setFullBytes(c.full_bytes);
      w.setDeltaBytes(c.delta_bytes);
      break;
    }
    case 5: {
      const auto& c = std::get<StoreCheckpointsMsg>(reply.result);
      auto w = r.initCheckpoints();
      w.setComplete(c.complete);
      w.setRound(c.round);
      break;
    }
  }
  return state_->finish();
}

std::span<const std::uint8_t> Encoder::encode(const Message& message) {
  struct Visitor {
    Encoder& e;
    const Message& m;
    std::span<const std::uint8_t> operator()(const BatchMsg& b) const {
      return e.encode_batch(m.sender, m.epoch, b.channel, b.first_seq, b.items, b.end_of_stream, b.roots, b.emitted_ns);
    }
    std::span<const std::uint8_t> operator()(const AckMsg& a) const {
      return e.encode_ack(m.sender, m.epoch, a.channel, a.seq, a.covered, a.trees);
    }
    std::span<const std::uint8_t> operator()(const ControlMsg& c) const {
      return e.encode_control(m.sender, m.epoch, c);
    }
    std::span<const std::uint8_t> operator()(const StoreRequestMsg& r) const {
      return e.encode_store_request(m.sender, m.epoch, r);
    }
    std::span<const std::uint8_t> operator()(const StoreReplyMsg& r) const {
      return e.encode_store_reply(m.sender, m.epoch, r);
    }
    std::span<const std::uint8_t> operator()(const WorkerReportMsg& r) const {
      return e.encode_worker_report(m.sender, m.epoch, r);
    }
    std::span<const std::uint8_t> operator()(const DirectoryMsg& d) const {
      return e.encode_directory(m.sender, m.epoch, d);
    }
    std::span<const std::uint8_t> operator()(const AssignmentMsg& a) const {
      return e.encode_assignment(m.sender, m.epoch, a);
    }
    std::span<const std::uint8_t> operator()(const FeedbackMsg& f) const {
      return e.encode_feedback(m.sender, m.epoch, f.items);
    }
  };
  return std::visit(Visitor{*this, message}, message.body);
}

void Encoder::release_memory() {
  state_->builder.reset();
  state_->fallback = nullptr;
  std::vector<capnp::word>().swap(state_->buf);
}

std::vector<std::uint8_t> encode(const Message& message) {
  Encoder encoder;
  auto bytes = encoder.encode(message);
  return {bytes.begin(), bytes.end()};
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

namespace {

const char* body_name(wire::Envelope::Which which) {
  switch (which) {
    case wire::Envelope::BATCH:
      return "batch";
    case wire::Envelope::ACK:
      return "ack";
    case wire::Envelope::CONTROL:
      return "control";
    case wire::Envelope::STORE_REQUEST:
      return "store request";
    case wire::Envelope::STORE_REPLY:
      return "store reply";
    case wire::Envelope::WORKER_REPORT:
      return "worker report";
    case wire::Envelope::DIRECTORY:
      return "directory";
    case wire::Envelope::ASSIGNMENT:
      return "assignment";
    case wire::Envelope::FEEDBACK:
      return "feedback";
  }
  return "unknown";
}

// Frames up to this size that are not 8-byte aligned are copied into a per-thread buffer that is kept for
// reuse; larger ones into a temporary one (so a thread does not hold on to a huge buffer).
constexpr std::size_t kScratchKeepWords = std::size_t{1} << 17;  // 1 MiB

// Validates the frame's size, makes it word-aligned, opens it as an Envelope of our version and calls
// fn(envelope). Cap'n Proto errors (kj::Exception) become FormatError.
template <typename Fn>
void with_envelope(std::span<const std::uint8_t> frame, const DecodeLimits& limits, Fn&& fn) {
  if (frame.empty()) throw FormatError("wire frame is empty");
  if (frame.size() % sizeof(capnp::word) != 0) {
    throw FormatError("wire frame of " + std::to_string(frame.size()) +
                      " bytes is truncated or corrupt: its size is not a multiple of 8");
  }
  if (frame.size() > limits.max_message_bytes) {
    throw FormatError("wire frame of " + std::to_string(frame.size()) + " bytes exceeds the limit of " +
                      std::to_string(limits.max_message_bytes) + " bytes");
  }
  const std::size_t words = frame.size() / sizeof(capnp::word);
  const capnp::word* data = reinterpret_cast<const capnp::word*>(frame.data());
  thread_local std::vector<capnp::word> scratch;
  std::vector<capnp::word> big;
  if (reinterpret_cast<std::uintptr_t>(frame.data()) % alignof(std::uint64_t) != 0) {
    std::vector<capnp::word>& copy = words <= kScratchKeepWords ? scratch : big;
    if (copy.size() < words) copy.resize(words);
    std::memcpy(copy.data(), frame.data(), frame.size());
    data = copy.data();
  }
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = limits.max_message_bytes / sizeof(capnp::word);
    options.nestingLimit = limits.nesting_limit;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(data, words), options);
    if (reader.getEnd() != data + words) {
      throw FormatError("wire frame of " + std::to_string(frame.size()) + " bytes has " +
                        std::to_string((data + words - reader.getEnd()) * sizeof(capnp::word)) +
                        " trailing bytes after the message");
    }
    auto env = reader.getRoot<wire::Envelope>();
    if (env.getVersion() != kWireVersion) {
      throw FormatError("wire message has version " + std::to_string(env.getVersion()) + ", expected version " +
                        std::to_string(kWireVersion));
    }
    fn(env);
  } catch (const kj::Exception& e) {
    throw FormatError("malformed wire message (frame of " + std::to_string(frame.size()) +
                      " bytes): " + std::string(e.getDescription().cStr()));
  }
}

// Copies a batch into `out`, reusing out.items' storage.
void read_batch(wire::Batch::Reader batch, BatchMsg& out) {
  auto keys = batch.getKeys();
  auto values = batch.getValues();
  auto times = batch.getTimes();
  const std::size_t n = keys.size();
  if (values.size() != n || times.size() != n) {
    throw FormatError("wire batch has lists of different lengths: " + std::to_string(keys.size()) + " keys, " +
                      std::to_string(values.size()) + " values, " + std::to_string(times.size()) + " times");
  }
  const std::uint64_t first_seq = batch.getFirstSeq();
  if (n > 0 && first_seq > std::numeric_limits<std::uint64_t>::max() - (n - 1)) {
    throw FormatError("wire batch seqs overflow: first seq " + std::to_string(first_seq) + " with " +
                      std::to_string(n) + " items");
  }
  out.channel = batch.getChannel();
  out.first_seq = first_seq;
  out.end_of_stream = batch.getEndOfStream();
  out.emitted_ns = batch.getEmittedNs();
  const auto roots = batch.getRoots();
  if (roots.size() != 0 && roots.size() != n) {
    throw FormatError("wire batch has " + std::to_string(n) + " items and " + std::to_string(roots.size()) + " roots");
  }
  out.roots.resize(roots.size());
  for (unsigned i = 0; i < roots.size(); ++i) out.roots[i] = roots[i];
  out.items.resize(n);
  Item* it = out.items.data();

  // Fast path: plain 8-byte element lists (what every encoder writes). A message may legally encode the lists
  // differently (e.g. as struct lists, for schema evolution); the generic getters handle those.
  const capnp::AnyList::Reader ak(keys), av(values), at(times);
  if (kRawLists && ak.getElementSize() == capnp::ElementSize::EIGHT_BYTES &&
      av.getElementSize() == capnp::ElementSize::EIGHT_BYTES &&
      at.getElementSize() == capnp::ElementSize::EIGHT_BYTES) {
    const capnp::byte* k = ak.getRawBytes().begin();
    const capnp::byte* v = av.getRawBytes().begin();
    const capnp::byte* t = at.getRawBytes().begin();
    for (std::size_t i = 0; i < n; ++i) {
      it[i].key = load_u64(k + 8 * i);
      it[i].value = static_cast<std::int64_t>(load_u64(v + 8 * i));
      it[i].time = static_cast<std::int64_t>(load_u64(t + 8 * i));
      it[i].seq = first_seq + i;
    }
  } else {
    for (unsigned i = 0; i < n; ++i) {
      it[i] = Item{keys[i], values[i], times[i], first_seq + i};
    }
  }
}

ControlMsg read_control(wire::Control::Reader c) {
  const auto kind = static_cast<std::uint16_t>(c.getKind());
  if (kind == 0 || kind > kMaxControlKind) {
    throw FormatError("wire control message has unknown kind " + std::to_string(kind));
  }
  return ControlMsg{
      static_cast<ControlKind>(kind), c.getWorker(), c.getEpoch(), c.getSeq(), c.getChannel(), c.getCheckpoint()};
}

inline std::vector<std::uint8_t> to_vector(capnp::Data::Reader data) { return {data.begin(), data.end()}; }

StoreRequestMsg read_store_request(wire::StoreRequest::Reader r) {
  StoreRequestMsg m;
  m.request_id = r.getRequestId();
  m.session = r.getSession();
  const std::int32_t worker = r.getWorker();
  switch (r.which()) {
    case wire::StoreRequest::UNSET:
      throw FormatError("wire store request " + std::to_string(m.request_id) + " has no operation");
    case wire::StoreRequest::PUT_STATE: {
      auto g = r.getPutState();
      PutStateReq p{.worker = worker,
                    .full = g.getFull(),
                    .record = to_vector(g.getRecord()),
                    .covered = {},
                    .digest = g.getDigest(),
                    .in_copy = g.getInCopy(),
                    .copy_offset = g.getCopyOffset(),
                    .copy_size = g.getCopySize()};
      if (p.in_copy && !p.record.empty()) {
        throw FormatError("wire store request " + std::to_string(m.request_id) + " (put_state for worker " +
                          std::to_string(worker) + ") has both a record and its place in a local copy");
      }
      auto covered = g.getCovered();
      p.covered.reserve(covered.size());
      for (auto c : covered) p.covered.push_back(ChannelSeqMsg{c.getChannel(), c.getSeq()});
      std::vector<std::uint32_t> channels;
      channels.reserve(p.covered.size());
      for (const auto& c : p.covered) channels.push_back(c.channel);
      std::sort(channels.begin(), channels.end());
      if (auto it = std::adjacent_find(channels.begin(), channels.end()); it != channels.end()) {
        throw FormatError("wire store request " + std::to_string(m.request_id) + " (put_state for worker " +
                          std::to_string(worker) + ") lists channel " + std::to_string(*it) + " twice in covered");
      }
      m.op = std::move(p);
      return m;
    }
    case wire::StoreRequest::PUT_ITEMS: {
      auto g = r.getPutItems();
      PutItemsReq p{.worker = worker, .record = to_vector(g.getRecord()), .infos = {}};
      auto infos = g.getInfos();
      p.infos.reserve(infos.size());
      for (auto i : infos) p.infos.push_back(ItemRangeMsg{i.getChannel(), i.getFirstSeq(), i.getLastSeq()});
      m.op = std::move(p);
      return m;
    }
    case wire::StoreRequest::STATE_CHAIN: {
      StateChainReq p{worker, {}};
      auto held = r.getHeld();
      p.held.reserve(held.size());
      for (const std::uint64_t d : held) p.held.push_back(d);
      m.op = std::move(p);
      return m;
    }
    case wire::StoreRequest::ITEM_RECORDS:
      m.op = ItemRecordsReq{worker};
      return m;
    case wire::StoreRequest::DROP:
      m.op = DropReq{worker};
      return m;
    case wire::StoreRequest::STATS:
      m.op = StatsReq{};
      return m;
    case wire::StoreRequest::CONFIRM_CHECKPOINT: {
      auto g = r.getConfirmCheckpoint();
      m.op = ConfirmCheckpointReq{worker, g.getCheckpoint(), g.getWorkers(), g.getFinal()};
      return m;
    }
    case wire::StoreRequest::CHECKPOINT_STATUS:
      m.op = CheckpointStatusReq{};
      return m;
    case wire::StoreRequest::REJOIN_CHECKPOINTS:
      m.op = RejoinCheckpointsReq{worker};
      return m;
  }
  throw FormatError("wire store request " + std::to_string(m.request_id) + " has unknown operation " +
                    std::to_string(static_cast<unsigned>(r.which())));
}

StoreReplyMsg read_store_reply(wire::StoreReply::Reader r) {
  StoreReplyMsg m;
  m.request_id = r.getRequestId();
  switch (r.which()) {
    case wire::StoreReply::UNSET:
      throw FormatError("wire store reply " + std::to_string(m.request_id) + " has no result");
    case wire::StoreReply::OK:
      m.result = StoreOkMsg{};
      return m;
    case wire::StoreReply::RECORDS: {
      auto list = r.getRecords();
      StoreRecordsMsg records;
      records.records.reserve(list.size());
      for (auto d : list) records.records.push_back(to_vector(d));
      m.result = std::move(records);
      return m;
    }
    case wire::StoreReply::STATS: {
      auto st = r.getStats();
      m.result = StoreStatsMsg{st.getStateBackups(), st.getItemBackups(), st.getBytesWritten(), st.getBytesStored()};
      return m;
    }
    case wire::StoreReply::CHAIN: {
      auto c = r.getChain();
      m.result = StoreChainMsg{c.getGeneration(), c.getLength(), c.getFullBytes(), c.getDeltaBytes()};
      return m;
    }
    case wire::StoreReply::CHECKPOINTS: {
      auto c = r.getCheckpoints();
      m.result = StoreCheckpointsMsg{c.getComplete(), c.getRound()};
      return m;
    }
    case wire::StoreReply::ERROR: {
      auto e = r.getError();
      const auto kind = static_cast<std::uint16_t>(e.getKind());
      if (kind == 0 || kind > kMaxStoreErrorKind) {
        throw FormatError("wire store reply " + std::to_string(m.request_id) + " has an error of unknown kind " +
                          std::to_string(kind));
      }
      auto text = e.getMessage();
      m.result = StoreErrorMsg{static_cast<StoreErrorKind>(kind), std::string(text.begin(), text.end())};
      return m;
    }
  }
  throw FormatError("wire store reply " + std::to_string(m.request_id) + " has unknown result kind " +
                    std::to_string(static_cast<unsigned>(r.which())));
}

WorkerReportMsg read_worker_report(wire::WorkerReport::Reader r) {
  WorkerReportMsg m;
  const auto kind = static_cast<std::uint16_t>(r.getKind());
  if (kind == 0 || kind > static_cast<std::uint16_t>(ReportKind::kFailed)) {
    throw FormatError("wire worker report has unknown kind " + std::to_string(kind));
  }
  m.kind = static_cast<ReportKind>(kind);
  auto st = r.getStatus();
  m.status = {st.getItemsIn(),
              st.getItemsOut(),
              st.getStateBackups(),
              st.getItemBackups(),
              st.getBackupBytes(),
              st.getDuplicatesDropped(),
              st.getGaps(),
              st.getBadMessages(),
              st.getUnbacked(),
              st.getUnacked(),
              st.getDivergence(),
              st.getSourceOffset(),
              st.getUnauthorizedConnections(),
              st.getTreesReplayed(),
              {},
              st.getCheckpoints(),
              st.getCheckpointsAbandoned(),
              st.getCheckpointMs(),
              st.getCheckpointMsMax(),
              st.getCheckpointBytes(),
              st.getAlignments(),
              st.getAlignmentMs(),
              st.getAlignmentMsMax(),
              st.getItemsHeld(),
              st.getInputPosition(),
              st.getOutputsAfterEnd()};
  for (auto v : st.getLatency()) m.status.latency.push_back(v);
  m.final_state = to_vector(r.getFinalState());
  auto rc = r.getRecovery();
  m.recovery = {rc.getFailureCount(), rc.getTheta(),         rc.getL(),
                rc.getGamma(),        rc.getAlpha(),         rc.getRestoreMs(),
                rc.getRecoveredMs(),  rc.getReplayedItems(), rc.getMissingItems(),
                rc.getDone(),         rc.getReplayMs(),      rc.getResidual(),
                rc.getFirstItemMs(),  rc.getCaughtUpMs(),    rc.getRepeatedItems(),
                rc.getLostItems(),    rc.getLostOutputs()};
  m.data_endpoint = from_text(r.getDataEndpoint());
  m.ack_endpoint = from_text(r.getAckEndpoint());
  m.curve_key = from_text(r.getCurveKey());
  m.error = from_text(r.getError());
  m.job_config = from_text(r.getJobConfig());
  return m;
}

AssignmentMsg read_assignment(wire::Assignment::Reader r) {
  AssignmentMsg m;
  m.worker = r.getWorker();
  m.epoch = r.getEpoch();
  for (auto f : r.getFailures()) m.failures.push_back(f);
  for (auto a : r.getJobArgs()) m.job_args.push_back(from_text(a));
  m.directory = from_text(r.getDirectory());
  m.store = from_text(r.getStore());
  m.heartbeat_ms = r.getHeartbeatMs();
  m.error = from_text(r.getError());
  m.store_key = from_text(r.getStoreKey());
  return m;
}

}  // namespace

void decode_into(std::span<const std::uint8_t> frame, const DecodeLimits& limits, Message& out) {
  with_envelope(frame, limits, [&](wire::Envelope::Reader env) {
    out.sender = env.getSender();
    out.epoch = env.getEpoch();
    switch (env.which()) {
      case wire::Envelope::BATCH: {
        BatchMsg* batch = std::get_if<BatchMsg>(&out.body);
        if (batch == nullptr) batch = &out.body.emplace<BatchMsg>();
        read_batch(env.getBatch(), *batch);
        return;
      }
      case wire::Envelope::ACK: {
        auto ack = env.getAck();
        AckMsg a{ack.getChannel(), ack.getSeq(), ack.getCovered(), {}};
        const auto trees = ack.getTrees();
        if (trees.size() % 2 != 0) throw FormatError("wire ack has an odd number of tree entries");
        a.trees.reserve(trees.size());
        for (auto v : trees) a.trees.push_back(v);
        out.body = std::move(a);
        return;
      }
      case wire::Envelope::CONTROL:
        out.body = read_control(env.getControl());
        return;
      case wire::Envelope::STORE_REQUEST:
        out.body = read_store_request(env.getStoreRequest());
        return;
      case wire::Envelope::STORE_REPLY:
        out.body = read_store_reply(env.getStoreReply());
        return;
      case wire::Envelope::WORKER_REPORT:
        out.body = read_worker_report(env.getWorkerReport());
        return;
      case wire::Envelope::DIRECTORY: {
        DirectoryMsg d;
        for (auto p : env.getDirectory().getPeers()) {
          d.peers.push_back({p.getWorker(), p.getEpoch(), p.getUp(), p.getFinished(), from_text(p.getDataEndpoint()),
                             from_text(p.getAckEndpoint()), from_text(p.getCurveKey()), p.getKilled()});
        }
        out.body = std::move(d);
        return;
      }
      case wire::Envelope::ASSIGNMENT:
        out.body = read_assignment(env.getAssignment());
        return;
      case wire::Envelope::FEEDBACK: {
        auto fb = env.getFeedback();
        auto keys = fb.getKeys();
        auto values = fb.getValues();
        auto times = fb.getTimes();
        if (values.size() != keys.size() || times.size() != keys.size()) {
          throw FormatError("wire feedback has lists of different lengths: " + std::to_string(keys.size()) + " keys, " +
                            std::to_string(values.size()) + " values, " + std::to_string(times.size()) + " times");
        }
        FeedbackMsg f;
        f.items.resize(keys.size());
        for (unsigned i = 0; i < keys.size(); ++i) f.items[i] = Item{keys[i], values[i], times[i], 0};
        out.body = std::move(f);
        return;
      }
    }
    throw FormatError("wire message has unknown body kind " + std::to_string(static_cast<unsigned>(env.which())));
  });
}

Message decode(std::span<const std::uint8_t> frame, const DecodeLimits& limits) {
  Message message;
  decode_into(frame, limits, message);
  return message;
}

std::optional<std::uint64_t> peek_store_request_id(std::span<const std::uint8_t> frame) noexcept {
  try {
    if (frame.empty() || frame.size() % sizeof(capnp::word) != 0) return std::nullopt;
    const std::size_t words = frame.size() / sizeof(capnp::word);
    const capnp::word* data = reinterpret_cast<const capnp::word*>(frame.data());
    std::vector<capnp::word> copy;
    if (reinterpret_cast<std::uintptr_t>(frame.data()) % alignof(std::uint64_t) != 0) {
      copy.resize(words);
      std::memcpy(copy.data(), frame.data(), frame.size());
      data = copy.data();
    }
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 1024;  // the envelope and the request's own struct only
    options.nestingLimit = 4;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(data, words), options);
    auto env = reader.getRoot<wire::Envelope>();
    if (env.which() != wire::Envelope::STORE_REQUEST) return std::nullopt;
    return env.getStoreRequest().getRequestId();
  } catch (...) {
    return std::nullopt;
  }
}

FrameHeader decode_batch_into(std::span<const std::uint8_t> frame, const DecodeLimits& limits, BatchMsg& out) {
  FrameHeader header;
  with_envelope(frame, limits, [&](wire::Envelope::Reader env) {
    if (env.which() != wire::Envelope::BATCH) {
      throw FormatError(std::string("expected a wire batch message, got ") + body_name(env.which()));
    }
    header = FrameHeader{env.getSender(), env.getEpoch()};
    read_batch(env.getBatch(), out);
  });
  return header;
}

}  // namespace afs::net
