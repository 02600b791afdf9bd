// RemoteStore: the BackupStore interface over ZeroMQ to a backup server (see remote_store.h for the retry and
// deduplication rules).
#include "afstream/store/remote_store.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <variant>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/codec.h"
#include "afstream/net/endpoint.h"
#include "afstream/net/handoff.h"

namespace afs {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// "10 s", "1.5 s", "300 ms".
std::string format_duration(milliseconds d) {
  const auto ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

// "put_state for worker 3", "stats".
std::string describe(const net::StoreOp& op) {
  std::string s(net::op_name(op));
  if (const auto w = net::op_worker(op)) s += " for worker " + std::to_string(*w);
  return s;
}
std::string describe(const char* op, int worker) { return std::string(op) + " for worker " + std::to_string(worker); }

// Requests above this size free the lane's encoder buffer after the call instead of keeping it for the next one.
constexpr std::size_t kKeepEncoderBytes = std::size_t{1} << 20;

}  // namespace

struct RemoteStore::Impl {
  // One sequential request stream: a DEALER socket (replaced on every retry), its session id and request ids.
  struct Lane {
    std::unique_ptr<zmq::socket_t> socket;
    std::string connected_to;  // the endpoint `socket` is connected to
    std::uint64_t session = 0;
    std::uint64_t last_request_id = 0;
    net::Encoder encoder;
  };

  // Returns the lane to the pool however the call ends.
  class LaneGuard {
   public:
    LaneGuard(Impl& impl, std::unique_ptr<Lane> lane) : impl_(impl), lane_(std::move(lane)) {}
    ~LaneGuard() { impl_.release(std::move(lane_)); }
    LaneGuard(const LaneGuard&) = delete;
    LaneGuard& operator=(const LaneGuard&) = delete;
    Lane* operator->() { return lane_.get(); }

   private:
    Impl& impl_;
    std::unique_ptr<Lane> lane_;
  };

  zmq::context_t context{1};
  mutable std::mutex mu;  // guards endpoint, idle and rng
  std::string endpoint;
  std::vector<std::unique_ptr<Lane>> idle;
  std::mt19937_64 rng{std::random_device{}()};

  std::atomic<std::uint64_t> calls{0}, resends{0}, stale_replies{0}, bad_replies{0}, timeouts{0};

  ~Impl() { idle.clear(); }  // close every socket before the context

  // A connected DEALER socket (a CURVE client on tcp:// when options.curve is set); throws zmq::error_t if ZeroMQ
  // rejects the endpoint.
  std::unique_ptr<zmq::socket_t> connect(const std::string& to, const RemoteStoreOptions& options) {
    auto s = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);  // a dropped socket discards what it still holds (the retry resends it)
    // A worker usually starts before its backup server listens (ipc: nothing tells it when): with ZeroMQ's default
    // reconnect interval of 100 ms its first request waited that long after the server was up, which made every
    // fault-tolerant run on worker processes start about 190 ms after mode none (a fifth of a 1 s learn job).
    s->set(zmq::sockopt::reconnect_ivl, 5);
    if (options.curve && net::is_tcp(to)) net::make_curve_client(*s, *options.curve);
    s->connect(to);
    return s;
  }

  std::unique_ptr<Lane> acquire() {
    std::lock_guard lock(mu);
    if (!idle.empty()) {
      auto lane = std::move(idle.back());
      idle.pop_back();
      return lane;
    }
    auto lane = std::make_unique<Lane>();
    while (lane->session == 0) lane->session = rng();
    return lane;
  }

  void release(std::unique_ptr<Lane> lane) {
    std::lock_guard lock(mu);
    idle.push_back(std::move(lane));
  }

  std::string current_endpoint() const {
    std::lock_guard lock(mu);
    return endpoint;
  }

  net::StoreReplyMsg call(const RemoteStoreOptions& options, net::StoreOp op);
};

// Sends one request and waits for its reply, retrying as remote_store.h describes.
net::StoreReplyMsg RemoteStore::Impl::call(const RemoteStoreOptions& options, net::StoreOp op) {
  const auto start = Clock::now();
  const auto give_up = start + options.deadline;
  ++calls;
  LaneGuard lane(*this, acquire());
  const std::string what = describe(op);

  net::StoreRequestMsg request{.request_id = ++lane->last_request_id, .session = lane->session, .op = std::move(op)};
  const std::span<const std::uint8_t> frame = lane->encoder.encode_store_request(0, options.incarnation, request);
  struct ReleaseBigBuffer {
    net::Encoder& encoder;
    bool big;
    ~ReleaseBigBuffer() {
      if (big) encoder.release_memory();
    }
  } release_big{lane->encoder, frame.size() > kKeepEncoderBytes};
  if (frame.size() > options.max_message_bytes) {
    throw RuntimeError("backup server " + current_endpoint() + ": " + what + " is a message of " +
                       std::to_string(frame.size()) + " bytes, over the limit of " +
                       std::to_string(options.max_message_bytes) + " bytes");
  }

  net::DecodeLimits limits;
  limits.max_message_bytes = options.max_message_bytes;
  net::Message reply;
  milliseconds attempt = options.attempt_timeout;
  milliseconds backoff = options.backoff;
  std::string to;
  for (int attempts = 0;; ++attempts) {
    auto now = Clock::now();
    if (attempts > 0) {
      // The previous attempt got no reply: drop its socket (and whatever it still queues), pause, try again.
      lane->socket.reset();
      if (now + backoff >= give_up) break;
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, options.backoff_max);
      attempt = std::min(attempt * 2, options.attempt_timeout_max);
      ++resends;
      now = Clock::now();
    }
    if (now >= give_up) break;

    to = current_endpoint();
    if (!lane->socket || lane->connected_to != to) {
      lane->socket.reset();
      try {
        lane->socket = connect(to, options);
      } catch (const zmq::error_t& e) {
        throw RuntimeError("backup server " + to + ": cannot connect for " + what + ": " + e.what());
      }
      lane->connected_to = to;
    }
    zmq::socket_t& socket = *lane->socket;
    try {
      // With no connection yet the message waits in the socket's queue; if even that is full, this attempt
      // times out like one whose reply never came.
      (void)socket.send(net::outgoing(frame), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      throw RuntimeError("backup server " + to + ": cannot send " + what + ": " + e.what());
    }

    const auto attempt_end = std::min(now + attempt, give_up);
    for (;;) {
      const auto left = std::chrono::ceil<milliseconds>(attempt_end - Clock::now());
      if (left.count() <= 0) break;
      zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, left);
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw RuntimeError("backup server " + to + ": waiting for the reply to " + what + ": " + e.what());
      }
      if (!(item.revents & ZMQ_POLLIN)) continue;
      // Replies are single frames; a multipart message is read whole and judged by its last frame.
      zmq::message_t msg;
      bool more = true;
      while (more) {
        if (!socket.recv(msg, zmq::recv_flags::dontwait)) break;
        more = msg.more();
      }
      if (more) continue;
      net::received(msg);
      try {
        net::decode_into({static_cast<const std::uint8_t*>(msg.data()), msg.size()}, limits, reply);
      } catch (const FormatError&) {
        ++bad_replies;
        continue;
      }
      auto* r = std::get_if<net::StoreReplyMsg>(&reply.body);
      if (r == nullptr) {
        ++bad_replies;
        continue;
      }
      if (r->request_id != request.request_id) {
        ++stale_replies;
        continue;
      }
      return std::move(*r);
    }
  }
  ++timeouts;
  if (to.empty()) to = current_endpoint();
  throw RuntimeError("backup server " + to + ": no reply to " + what + " after " + format_duration(options.deadline) +
                     (options.curve && net::is_tcp(to)
                          ? " (with CURVE: is this process's key in the server's net.curve-authorized, and the "
                            "server's public key the one given?)"
                          : ""));
}

namespace {

// Turns an error reply into the exception the BackupStore contract promises; returns the reply otherwise.
net::StoreReplyMsg checked(net::StoreReplyMsg reply, const RemoteStore& store, const std::string& what) {
  if (const auto* e = std::get_if<net::StoreErrorMsg>(&reply.result)) {
    if (e->kind == net::StoreErrorKind::kCorruptRecord) throw FormatError(e->message);
    throw RuntimeError("backup server " + store.endpoint() + ": " + what + " failed (" +
                       std::string(net::to_string(e->kind)) + "): " + e->message);
  }
  return reply;
}

[[noreturn]] void unexpected(const RemoteStore& store, const std::string& what) {
  throw RuntimeError("backup server " + store.endpoint() + ": unexpected kind of reply to " + what);
}

}  // namespace

RemoteStore::RemoteStore(std::string endpoint, RemoteStoreOptions options)
    : options_(options), impl_(std::make_unique<Impl>()) {
  set_endpoint(std::move(endpoint));
}

RemoteStore::~RemoteStore() = default;

void RemoteStore::set_endpoint(std::string endpoint) {
  // Connect one socket now, so that a malformed endpoint is reported here rather than at the first put.
  auto lane = impl_->acquire();
  try {
    lane->socket = impl_->connect(endpoint, options_);
  } catch (const zmq::error_t& e) {
    impl_->release(std::move(lane));
    throw ConfigError("backup server endpoint '" + endpoint + "': " + e.what() +
                      " (expected tcp://HOST:PORT or ipc://PATH)");
  }
  lane->connected_to = endpoint;
  std::lock_guard lock(impl_->mu);
  impl_->endpoint = std::move(endpoint);
  impl_->idle.push_back(std::move(lane));
}

std::string RemoteStore::endpoint() const { return impl_->current_endpoint(); }

ChainInfo RemoteStore::put_state(int worker, bool full, Bytes record, const SeqByChannel& covered) {
  return put_state(worker, full, std::move(record), covered, 0);
}

namespace {

std::vector<net::ChannelSeqMsg> covered_msg(const SeqByChannel& covered) {
  std::vector<net::ChannelSeqMsg> out;
  out.reserve(covered.size());
  for (const auto& [channel, seq] : covered) out.push_back({channel, seq});
  return out;
}

// The shape of a chain read whole (its records in order).
ChainInfo shape_of(const std::vector<Bytes>& records) {
  ChainInfo info;
  info.length = records.size();
  for (std::size_t i = 0; i < records.size(); ++i) (i == 0 ? info.full_bytes : info.delta_bytes) += records[i].size();
  return info;
}

}  // namespace

// A put_state's reply: the chain after it, or, for a put in_copy, nullopt if the server could not read the record
// from the client's copy (no local copy).
std::optional<ChainInfo> RemoteStore::put(net::PutStateReq req) {
  const std::string what = describe("put_state", req.worker);
  const bool in_copy = req.in_copy;
  auto reply = impl_->call(options_, std::move(req));
  if (const auto* e = std::get_if<net::StoreErrorMsg>(&reply.result);
      in_copy && e && e->kind == net::StoreErrorKind::kNoLocalCopy) {
    return std::nullopt;
  }
  reply = checked(std::move(reply), *this, what);
  const auto* c = std::get_if<net::StoreChainMsg>(&reply.result);
  if (c == nullptr) unexpected(*this, what);
  return ChainInfo{c->generation, c->length, c->full_bytes, c->delta_bytes};
}

ChainInfo RemoteStore::put_state(int worker, bool full, Bytes record, const SeqByChannel& covered,
                                 std::uint64_t digest) {
  return *put(net::PutStateReq{
      .worker = worker, .full = full, .record = std::move(record), .covered = covered_msg(covered), .digest = digest});
}

std::vector<Bytes> RemoteStore::state_chain(int worker, ChainInfo* info) const {
  const net::StoreOp op = net::StateChainReq{worker, {}};
  const std::string what = describe(op);
  auto reply = checked(impl_->call(options_, op), *this, what);
  auto* records = std::get_if<net::StoreRecordsMsg>(&reply.result);
  if (records == nullptr) unexpected(*this, what);
  if (info) *info = shape_of(records->records);
  return std::move(records->records);
}

std::optional<ChainInfo> RemoteStore::put_state_in_copy(int worker, bool full, std::uint64_t offset, std::uint64_t size,
                                                        std::uint64_t digest, const SeqByChannel& covered) {
  return put(net::PutStateReq{.worker = worker,
                              .full = full,
                              .record = {},
                              .covered = covered_msg(covered),
                              .digest = digest,
                              .in_copy = true,
                              .copy_offset = offset,
                              .copy_size = size});
}

RemoteStore::HeldChain RemoteStore::state_chain_held(int worker, std::vector<std::uint64_t> held) const {
  const std::size_t offered = held.size();
  const net::StoreOp op = net::StateChainReq{worker, std::move(held)};
  const std::string what = describe(op);
  auto reply = checked(impl_->call(options_, op), *this, what);
  HeldChain out;
  if (const auto* c = std::get_if<net::StoreChainMsg>(&reply.result)) {
    if (c->length == 0 || c->length > offered) {
      throw RuntimeError("backup server " + endpoint() + ": " + what + ": vouched for " + std::to_string(c->length) +
                         " of the " + std::to_string(offered) + " records held");
    }
    out.held = c->length;
    out.info = ChainInfo{0, c->length, c->full_bytes, c->delta_bytes};
    return out;
  }
  auto* records = std::get_if<net::StoreRecordsMsg>(&reply.result);
  if (records == nullptr) unexpected(*this, what);
  out.info = shape_of(records->records);
  out.records = std::move(records->records);
  return out;
}

void RemoteStore::put_items(int worker, Bytes record, std::vector<ItemRecordInfo> infos) {
  net::PutItemsReq req{.worker = worker, .record = std::move(record), .infos = {}};
  req.infos.reserve(infos.size());
  for (const auto& i : infos) req.infos.push_back({i.channel, i.first_seq, i.last_seq});
  const std::string what = describe("put_items", worker);
  auto reply = checked(impl_->call(options_, std::move(req)), *this, what);
  if (!std::holds_alternative<net::StoreOkMsg>(reply.result)) unexpected(*this, what);
}

std::vector<Bytes> RemoteStore::item_records(int worker) const {
  const net::StoreOp op = net::ItemRecordsReq{worker};
  const std::string what = describe(op);
  auto reply = checked(impl_->call(options_, op), *this, what);
  auto* records = std::get_if<net::StoreRecordsMsg>(&reply.result);
  if (records == nullptr) unexpected(*this, what);
  return std::move(records->records);
}

void RemoteStore::drop(int worker) {
  const net::StoreOp op = net::DropReq{worker};
  const std::string what = describe(op);
  auto reply = checked(impl_->call(options_, op), *this, what);
  if (!std::holds_alternative<net::StoreOkMsg>(reply.result)) unexpected(*this, what);
}

namespace {
CheckpointStatus checkpoints_of(const net::StoreReplyMsg& reply, const RemoteStore& store, const std::string& what) {
  const auto* c = std::get_if<net::StoreCheckpointsMsg>(&reply.result);
  if (c == nullptr) unexpected(store, what);
  return CheckpointStatus{c->complete, c->round};
}
}  // namespace

void RemoteStore::confirm_checkpoint(int worker, std::uint64_t id, int workers, bool final) {
  const net::StoreOp op = net::ConfirmCheckpointReq{worker, id, workers, final};
  const std::string what = describe(op);
  (void)checkpoints_of(checked(impl_->call(options_, op), *this, what), *this, what);
}

CheckpointStatus RemoteStore::checkpoint_status() const {
  const net::StoreOp op = net::CheckpointStatusReq{};
  const std::string what = describe(op);
  return checkpoints_of(checked(impl_->call(options_, op), *this, what), *this, what);
}

CheckpointStatus RemoteStore::rejoin_checkpoints(int worker) {
  const net::StoreOp op = net::RejoinCheckpointsReq{worker};
  const std::string what = describe(op);
  return checkpoints_of(checked(impl_->call(options_, op), *this, what), *this, what);
}

StoreStats RemoteStore::stats() const {
  const net::StoreOp op = net::StatsReq{};
  const std::string what = describe(op);
  auto reply = checked(impl_->call(options_, op), *this, what);
  auto* st = std::get_if<net::StoreStatsMsg>(&reply.result);
  if (st == nullptr) unexpected(*this, what);
  return StoreStats{st->state_backups, st->item_backups, st->bytes_written, st->bytes_stored};
}

RemoteStoreCounters RemoteStore::counters() const {
  return RemoteStoreCounters{impl_->calls.load(), impl_->resends.load(), impl_->stale_replies.load(),
                             impl_->bad_replies.load(), impl_->timeouts.load()};
}

}  // namespace afs
