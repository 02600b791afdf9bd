// Wakeup: a signal from another thread ends a zmq::poll at once (Worker::kill wakes a worker waiting for input).
#include "afstream/runtime/wakeup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <zmq.hpp>

namespace afs {
namespace {

TEST(Wakeup, ASignalFromAnotherThreadEndsAPollAtOnceAndStaysReadable) {
  zmq::context_t ctx;
  zmq::socket_t quiet(ctx, zmq::socket_type::pull);  // nothing ever arrives on it
  quiet.bind("inproc://wakeup-test");
  Wakeup w;
  zmq::pollitem_t items[] = {{static_cast<void*>(quiet), 0, ZMQ_POLLIN, 0}, {nullptr, w.fd(), ZMQ_POLLIN, 0}};
  EXPECT_EQ(zmq::poll(items, 2, std::chrono::milliseconds(0)), 0);  // not signalled: nothing ready
  const auto t0 = std::chrono::steady_clock::now();
  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.signal();
  });
  const int ready = zmq::poll(items, 2, std::chrono::milliseconds(30000));
  const auto waited = std::chrono::steady_clock::now() - t0;
  signaller.join();
  EXPECT_EQ(ready, 1);
  EXPECT_TRUE(items[1].revents & ZMQ_POLLIN);
  EXPECT_FALSE(items[0].revents & ZMQ_POLLIN);
  EXPECT_LT(waited, std::chrono::seconds(10));  // woken by the signal, not the 30 s timeout
  // Readable for good: every later poll returns at once.
  items[1].revents = 0;
  EXPECT_EQ(zmq::poll(items, 2, std::chrono::milliseconds(30000)), 1);
}

}  // namespace
}  // namespace afs
