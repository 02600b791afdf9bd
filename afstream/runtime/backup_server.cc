// BackupServer: a BackupStore served over a ZeroMQ ROUTER socket (see backup_server.h).
#include "afstream/runtime/backup_server.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "afstream/core/errors.h"
#include "afstream/net/endpoint.h"
#include "afstream/net/handoff.h"
#include "afstream/runtime/gatekeeper.h"
#include "afstream/store/local_recovery_store.h"

namespace afs {

namespace {

// Reply frames above this size free the encoder's buffer afterwards instead of keeping it for the next reply.
constexpr std::size_t kKeepEncoderBytes = std::size_t{1} << 20;

// tcp://HOST:0 asks for an ephemeral port, which ZeroMQ spells tcp://HOST:*.
std::string zmq_bind_address(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) == 0 && endpoint.size() > 2 && endpoint.compare(endpoint.size() - 2, 2, ":0") == 0) {
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  }
  return endpoint;
}

SeqByChannel to_store(const std::vector<net::ChannelSeqMsg>& covered) {
  SeqByChannel out;
  for (const auto& c : covered) out[c.channel] = c.seq;
  return out;
}

std::vector<ItemRecordInfo> to_store(const std::vector<net::ItemRangeMsg>& infos) {
  std::vector<ItemRecordInfo> out;
  out.reserve(infos.size());
  for (const auto& i : infos) out.push_back(ItemRecordInfo{i.channel, i.first_seq, i.last_seq});
  return out;
}

}  // namespace

struct BackupServer::Impl {
  struct Session {
    std::uint64_t last_request_id = 0;  // the last put or drop applied
    std::vector<std::uint8_t> reply;    // its reply frame
    std::uint64_t last_used = 0;        // for evicting the least recently active session
  };

  zmq::context_t context{1};
  std::optional<Gatekeeper> gatekeeper;  // CURVE on tcp://: who may connect (bound before the socket)
  zmq::socket_t socket{context, zmq::socket_type::router};
  net::Encoder encoder;
  net::Message message;  // the request being served (its storage is reused)
  std::unordered_map<std::uint64_t, Session> sessions;
  std::uint64_t tick = 0;
  std::unordered_map<std::int32_t, std::uint32_t> incarnations;  // per worker, the newest incarnation seen
  std::unique_ptr<ChainCompactor> compactor;                     // before the store goes (Impl is destroyed first)
  // Per worker, the digests its client gave for the records of its chain of `generation`, in order: present only
  // while every record of that chain came with one (backup_server.h). The server's first record stands for the
  // client's first `prefix` records (more than one once the compactor replaced them by a full record of the same
  // state), each later one for one of the client's.
  struct Manifest {
    std::uint64_t generation = 0;
    std::vector<std::uint64_t> digests;
    std::uint64_t prefix = 1;
    std::uint64_t server_length() const { return digests.size() - prefix + 1; }
  };
  std::unordered_map<std::int32_t, Manifest> manifests;
  // Compactions applied, reported from the compactor's thread (worker, generation compacted, records replaced).
  std::mutex compacted_mu;
  std::vector<std::tuple<std::int32_t, std::uint64_t, std::uint64_t>> compacted;
  std::atomic<bool> any_compacted{false};

  // After a put_state applied with `digest` (0: none) that left the chain as `info`.
  void note_put(std::int32_t worker, bool full, std::uint64_t digest, const ChainInfo& info) {
    auto it = manifests.find(worker);
    if (digest != 0 && full && info.length == 1) {
      manifests[worker] = Manifest{info.generation, {digest}, 1};
    } else if (digest != 0 && !full && it != manifests.end() && it->second.generation == info.generation &&
               it->second.server_length() + 1 == info.length) {
      it->second.digests.push_back(digest);
    } else if (it != manifests.end()) {
      manifests.erase(it);
    }
  }
  // The compactions reported since the last call: a manifest of the compacted generation follows its chain to the
  // new one (read from the store now: no put for the worker came in between, this thread handles them), provided
  // the lengths agree; else it is dropped. Called before each request.
  void follow_compactions(const BackupStore& store) {
    if (!any_compacted.load(std::memory_order_acquire)) return;
    std::vector<std::tuple<std::int32_t, std::uint64_t, std::uint64_t>> done;
    {
      std::lock_guard lock(compacted_mu);
      done.swap(compacted);
      any_compacted.store(false, std::memory_order_release);
    }
    for (const auto& [worker, generation, count] : done) {
      auto it = manifests.find(worker);
      if (it == manifests.end() || it->second.generation != generation || count < 1) continue;
      const ChainInfo info = store.chain_info(worker);
      auto& m = it->second;
      m.generation = info.generation;
      m.prefix += count - 1;
      if (m.prefix > m.digests.size() || m.server_length() != info.length) manifests.erase(it);
    }
  }
  // How many of `held` (a client's digests, in order) stand for worker's chain as it is now (`info`): all of the
  // client's records the manifest lists, if they are the first of held and the manifest is of this chain; else 0.
  std::uint64_t held_length(std::int32_t worker, const std::vector<std::uint64_t>& held, const ChainInfo& info) const {
    auto it = manifests.find(worker);
    if (it == manifests.end() || info.length == 0) return 0;
    const auto& m = it->second;
    if (m.generation != info.generation || m.server_length() != info.length || m.digests.size() > held.size()) {
      return 0;
    }
    return std::equal(m.digests.begin(), m.digests.end(), held.begin()) ? m.digests.size() : 0;
  }

  ~Impl() {
    compactor.reset();  // its thread reports into `compacted` until it stops
    socket.close();
  }

  Session& remember(std::uint64_t session, std::size_t capacity) {
    if (sessions.size() >= capacity && !sessions.count(session)) {
      auto oldest = sessions.begin();
      for (auto it = sessions.begin(); it != sessions.end(); ++it) {
        if (it->second.last_used < oldest->second.last_used) oldest = it;
      }
      if (oldest != sessions.end()) sessions.erase(oldest);
    }
    Session& s = sessions[session];
    s.last_used = ++tick;
    return s;
  }
};

BackupServer::BackupServer(std::string endpoint, std::unique_ptr<BackupStore> store, BackupServerOptions options)
    : store_(std::move(store)), options_(options), impl_(std::make_unique<Impl>()) {
  if (!store_) throw ConfigError("backup server: no store given");
  auto& socket = impl_->socket;
  try {
    socket.set(zmq::sockopt::linger, 200);             // let the last replies out on shutdown, briefly
    socket.set(zmq::sockopt::router_mandatory, true);  // an unroutable reply is an error we count, not silence
    const auto cap = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 2);
    socket.set(zmq::sockopt::maxmsgsize,
               static_cast<std::int64_t>(std::min<std::uint64_t>(2 * std::uint64_t{options_.max_message_bytes}, cap)));
    if (options_.curve && net::is_tcp(endpoint)) {
      impl_->gatekeeper.emplace(impl_->context, options_.curve->authorized);
      net::make_curve_server(socket, options_.curve->keys);
    }
    socket.bind(zmq_bind_address(endpoint));
    bound_endpoint_ = socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw ConfigError("backup server: cannot listen on '" + endpoint + "': " + e.what() +
                      " (expected tcp://HOST:PORT, port 0 for any free one, or ipc://PATH)");
  }
  if (options_.make_operator) {
    Impl* im = impl_.get();
    impl_->compactor = std::make_unique<ChainCompactor>(
        *store_, options_.make_operator, options_.compaction, options_.on_compaction_error,
        [im](int worker, std::uint64_t generation, std::uint64_t count) {
          std::lock_guard lock(im->compacted_mu);
          im->compacted.emplace_back(worker, generation, count);
          im->any_compacted.store(true, std::memory_order_release);
        });
  }
}

BackupServer::~BackupServer() = default;

CompactorCounters BackupServer::compactor_counters() const {
  return impl_->compactor ? impl_->compactor->counters() : CompactorCounters{};
}

void BackupServer::wait_compactions() {
  if (impl_->compactor) impl_->compactor->wait_idle();
}

BackupServerCounters BackupServer::counters() const {
  return BackupServerCounters{requests_.load(),
                              bad_frames_.load(),
                              duplicates_.load(),
                              store_errors_.load(),
                              unroutable_.load(),
                              stale_.load(),
                              impl_->gatekeeper ? impl_->gatekeeper->unauthorized() : 0,
                              held_.load(),
                              from_copies_.load(),
                              copies_refused_.load()};
}

void BackupServer::run(const std::atomic<bool>& stop) {
  auto& socket = impl_->socket;
  net::DecodeLimits limits;
  limits.max_message_bytes = options_.max_message_bytes;
  std::vector<zmq::message_t> parts;

  // Sends [routing parts..., payload]; counts the reply as unroutable if its client is gone or not reading.
  auto send_reply = [&](std::span<const std::uint8_t> payload) {
    try {
      for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        zmq::message_t route(parts[i].data(), parts[i].size());
        if (!socket.send(route, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
          ++unroutable_;
          return;
        }
      }
      if (!socket.send(net::outgoing(payload), zmq::send_flags::dontwait)) ++unroutable_;
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) throw RuntimeError(std::string("backup server: cannot send a reply: ") + e.what());
      ++unroutable_;
    }
  };
  auto encode = [&](const net::StoreReplyMsg& reply) { return impl_->encoder.encode_store_reply(0, 0, reply); };
  auto release_if_big = [&](std::size_t bytes) {
    if (bytes > kKeepEncoderBytes) impl_->encoder.release_memory();
  };

  while (!stop.load(std::memory_order_relaxed)) {
    if (impl_->gatekeeper && options_.on_refused) {
      for (const auto& r : impl_->gatekeeper->new_refusals()) options_.on_refused(r);
    }
    zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, options_.poll_interval);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;  // a signal (e.g. the SIGTERM that sets `stop`)
      throw RuntimeError(std::string("backup server: polling the socket failed: ") + e.what());
    }
    if (!(item.revents & ZMQ_POLLIN)) continue;

    // A few requests per wakeup, so that `stop` is still looked at under a steady load.
    for (int served = 0; served < 64 && !stop.load(std::memory_order_relaxed); ++served) {
      parts.clear();
      bool more = true;
      try {
        while (more) {
          zmq::message_t part;
          if (!socket.recv(part, zmq::recv_flags::dontwait)) break;
          more = part.more();
          parts.push_back(std::move(part));
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) break;  // back to the loop that looks at `stop`
        throw RuntimeError(std::string("backup server: receiving a request failed: ") + e.what());
      }
      if (parts.empty()) break;  // nothing more to read now
      if (more || parts.size() < 2) {
        ++bad_frames_;  // no routing id and payload: nothing to answer
        continue;
      }
      const zmq::message_t& payload = parts.back();
      net::received(payload);
      const std::span<const std::uint8_t> frame(static_cast<const std::uint8_t*>(payload.data()), payload.size());

      net::StoreRequestMsg* request = nullptr;
      try {
        net::decode_into(frame, limits, impl_->message);
        request = std::get_if<net::StoreRequestMsg>(&impl_->message.body);
        if (request == nullptr) throw FormatError("expected a store request");
      } catch (const FormatError& e) {
        ++bad_frames_;
        if (const auto id = net::peek_store_request_id(frame)) {
          send_reply(encode(net::StoreReplyMsg{
              *id, net::StoreErrorMsg{net::StoreErrorKind::kBadRequest, std::string("bad request: ") + e.what()}}));
        }
        continue;
      }
      ++requests_;

      // At most once per (session, request id) for what changes the store.
      const bool dedupe = request->session != 0 && net::op_mutates(request->op);
      if (dedupe) {
        auto it = impl_->sessions.find(request->session);
        if (it != impl_->sessions.end() && request->request_id <= it->second.last_request_id) {
          ++duplicates_;
          it->second.last_used = ++impl_->tick;
          if (request->request_id == it->second.last_request_id) send_reply(it->second.reply);
          continue;
        }
      }

      // Fencing: nothing from an incarnation older than one that has used the store. A first incarnation fenced off
      // is a new run's worker on a server that served an earlier run with failures: the message says so.
      static constexpr const char* kEarlierRunHint =
          " (a new run on a backup server that served an earlier run: start the backup server anew; the new run "
          "drops the earlier run's backups)";
      const auto incarnation = impl_->message.epoch;
      if (const auto w = net::op_worker(request->op); w && incarnation > 0) {
        auto& newest = impl_->incarnations[*w];
        if (incarnation < newest) {
          ++stale_;
          send_reply(encode(net::StoreReplyMsg{
              request->request_id,
              net::StoreErrorMsg{net::StoreErrorKind::kStaleIncarnation,
                                 "worker " + std::to_string(*w) + ": incarnation " + std::to_string(incarnation) +
                                     " is fenced off: incarnation " + std::to_string(newest) +
                                     " has used the store since" + (incarnation == 1 ? kEarlierRunHint : "")}}));
          continue;
        }
        newest = incarnation;
      }

      impl_->follow_compactions(*store_);
      net::StoreReplyMsg reply{request->request_id, net::StoreOkMsg{}};
      try {
        std::visit(
            [&](auto& op) {
              using Op = std::decay_t<decltype(op)>;
              if constexpr (std::is_same_v<Op, net::PutStateReq>) {
                const bool from_copy = op.in_copy;
                if (op.in_copy) {
                  std::string why = "this server reads no local copies (it was given no local directory)";
                  std::optional<Bytes> record;
                  if (op.copy_size > options_.max_message_bytes) {
                    // It could never be sent back: as over the socket, the limit applies.
                    why = "a record of " + std::to_string(op.copy_size) + " bytes is over the message limit of " +
                          std::to_string(options_.max_message_bytes) + " bytes";
                  } else if (!options_.local_dir.empty()) {
                    record = LocalRecoveryStore::read_record(options_.local_dir, op.worker, op.copy_offset,
                                                             op.copy_size, op.digest, &why);
                  }
                  if (!record) {
                    ++copies_refused_;
                    reply.result = net::StoreErrorMsg{net::StoreErrorKind::kNoLocalCopy, why};
                    return;
                  }
                  op.record = std::move(*record);
                } else if (op.digest != 0 && XXH3_64bits(op.record.data(), op.record.size()) != op.digest) {
                  op.digest = 0;  // not the record's: vouch for nothing of this chain
                }
                const ChainInfo info =
                    store_->put_state(op.worker, op.full, std::move(op.record), to_store(op.covered));
                if (from_copy) ++from_copies_;
                impl_->note_put(op.worker, op.full, op.digest, info);
                if (impl_->compactor) impl_->compactor->notify(op.worker, info);
                reply.result = net::StoreChainMsg{info.generation, info.length, info.full_bytes, info.delta_bytes};
              } else if constexpr (std::is_same_v<Op, net::PutItemsReq>) {
                store_->put_items(op.worker, std::move(op.record), to_store(op.infos));
              } else if constexpr (std::is_same_v<Op, net::StateChainReq>) {
                if (!op.held.empty()) {
                  const ChainInfo info = store_->chain_info(op.worker);
                  if (const auto n = impl_->held_length(op.worker, op.held, info); n > 0) {
                    ++held_;
                    reply.result = net::StoreChainMsg{info.generation, n, info.full_bytes, info.delta_bytes};
                    return;
                  }
                }
                reply.result = net::StoreRecordsMsg{store_->state_chain(op.worker)};
              } else if constexpr (std::is_same_v<Op, net::ItemRecordsReq>) {
                reply.result = net::StoreRecordsMsg{store_->item_records(op.worker)};
              } else if constexpr (std::is_same_v<Op, net::DropReq>) {
                store_->drop(op.worker);
                impl_->manifests.erase(op.worker);
              } else if constexpr (std::is_same_v<Op, net::ConfirmCheckpointReq>) {
                store_->confirm_checkpoint(op.worker, op.checkpoint, op.workers, op.final);
                const auto st = store_->checkpoint_status();
                reply.result = net::StoreCheckpointsMsg{st.complete, st.round};
              } else if constexpr (std::is_same_v<Op, net::CheckpointStatusReq>) {
                const auto st = store_->checkpoint_status();
                reply.result = net::StoreCheckpointsMsg{st.complete, st.round};
              } else if constexpr (std::is_same_v<Op, net::RejoinCheckpointsReq>) {
                const auto st = store_->rejoin_checkpoints(op.worker);
                reply.result = net::StoreCheckpointsMsg{st.complete, st.round};
              } else {
                const StoreStats st = store_->stats();
                reply.result = net::StoreStatsMsg{st.state_backups, st.item_backups, st.bytes_written, st.bytes_stored};
              }
            },
            request->op);
      } catch (const FormatError& e) {
        ++store_errors_;
        reply.result = net::StoreErrorMsg{net::StoreErrorKind::kCorruptRecord, e.what()};
      } catch (const std::exception& e) {
        ++store_errors_;
        reply.result = net::StoreErrorMsg{net::StoreErrorKind::kStoreFailure, e.what()};
      } catch (...) {
        ++store_errors_;
        reply.result = net::StoreErrorMsg{net::StoreErrorKind::kStoreFailure, "unknown exception from the store"};
      }

      std::span<const std::uint8_t> out;
      try {
        out = encode(reply);
        if (out.size() > options_.max_message_bytes) {
          throw FormatError("the reply is " + std::to_string(out.size()) + " bytes, over the message limit of " +
                            std::to_string(options_.max_message_bytes) + " bytes");
        }
      } catch (const FormatError& e) {
        ++store_errors_;
        std::string what(net::op_name(request->op));
        if (const auto w = net::op_worker(request->op)) what += " for worker " + std::to_string(*w);
        release_if_big(out.size());
        out = encode(net::StoreReplyMsg{
            request->request_id, net::StoreErrorMsg{net::StoreErrorKind::kStoreFailure, what + ": " + e.what()}});
      }
      if (dedupe) {
        auto& s = impl_->remember(request->session, std::max<std::size_t>(options_.dedupe_sessions, 1));
        s.last_request_id = request->request_id;
        s.reply.assign(out.begin(), out.end());
      }
      send_reply(out);
      release_if_big(out.size());
    }
  }
}

}  // namespace afs
