// Fencing of tcp:// connections by incarnation (DESIGN 5): a worker's data and acknowledgement sockets on tcp://
// accept a connection only from a peer that means this incarnation of this worker.
//
// On inproc:// and ipc:// the incarnation is part of the endpoint's name (w<id>-e<epoch>-data), so a peer that has
// not yet heard of a restart connects to the dead incarnation's endpoint and reaches nobody. On tcp:// the operating
// system may give a restarted worker the very port an earlier incarnation had, and such a peer would reconnect to it
// and deliver items meant for the dead one (which the new incarnation would count as gaps). So a connecting socket
// presents "w<worker>-e<epoch>" as its ZeroMQ PLAIN user name (no secret: this is fencing, not authentication), and
// the gate, the ZeroMQ authentication handler (ZAP) of the process's context, lets in only the incarnations
// admitted to it. A refused peer retries on its own and delivers nothing until it learns of the new incarnation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <zmq.hpp>

namespace afs {

class IncarnationGate {
 public:
  // Binds the context's authentication endpoint (inproc://zeromq.zap.01: one gate per context) and starts the
  // thread that answers it. Throws RuntimeError if the context already has one. Destroy it before the context.
  explicit IncarnationGate(zmq::context_t& zmq);
  ~IncarnationGate();
  IncarnationGate(const IncarnationGate&) = delete;
  IncarnationGate& operator=(const IncarnationGate&) = delete;

  // Connections presenting this incarnation are let in from now on.
  void admit(int worker, std::uint32_t epoch);
  // Connections refused so far (peers that meant another incarnation, or presented nothing).
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  // Before bind: the socket takes only connections the gate lets in.
  static void guard(zmq::socket_t& listening);
  // Before connect: the socket presents the incarnation it means to reach.
  static void present(zmq::socket_t& connecting, int worker, std::uint32_t epoch);

 private:
  void serve();

  zmq::socket_t socket_;
  std::mutex mu_;
  std::set<std::pair<int, std::uint32_t>> admitted_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace afs
