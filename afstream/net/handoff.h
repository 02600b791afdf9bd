// Frames handed from one thread to another through ZeroMQ, made visible to ThreadSanitizer.
//
// libzmq is built without TSan, so TSan cannot see the synchronization inside it (its lock-free pipes between a
// sending thread, its I/O threads and the receiving thread). A frame's bytes are written into a message by the
// sender (cppzmq's inline copy, which TSan sees) and read by the receiver's decoder (which TSan sees too), and with
// nothing in between that TSan recognizes it reports every such hand-off as a data race: 3,976 reports over the
// suite, none a race in our code (experiments/results/README.md, "ThreadSanitizer"). These two functions tell TSan
// what ZeroMQ guarantees: a message's contents are written before it is sent and read after it is received
// (__tsan_release on the buffer when it is sent, __tsan_acquire on it when it arrives). Accesses made inside libzmq
// itself are ignored through tsan.supp (`called_from_lib`).
//
// Built without TSan both compile to what they replace: `zmq::message_t(frame.data(), frame.size())` and nothing.
#pragma once

#include <cstdint>
#include <span>
#include <zmq.hpp>

#if defined(__SANITIZE_THREAD__)
#define AFS_NET_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AFS_NET_TSAN 1
#endif
#endif

#ifdef AFS_NET_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace afs::net {

// A message holding a copy of `frame`, ready to send (the encoder's buffer may be reused at once).
inline zmq::message_t outgoing(std::span<const std::uint8_t> frame) {
  zmq::message_t m(frame.data(), frame.size());
#ifdef AFS_NET_TSAN
  __tsan_release(m.data());
#endif
  return m;
}

// Call on a message just received, before reading its contents.
inline void received([[maybe_unused]] const zmq::message_t& m) {
#ifdef AFS_NET_TSAN
  __tsan_acquire(const_cast<void*>(m.data()));
#endif
}

}  // namespace afs::net
