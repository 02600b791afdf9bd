// The controller's handle on its fork server (afstream/runtime/fork_server.h), against small shell scripts that speak
// the protocol: the server is asked for workers only once it has said it is ready (it builds the job first, which
// may take seconds), and one that says something else, or exits first, is given up.
#include "afstream/runtime/fork_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace {

using namespace std::chrono_literals;

// Polls ready() for up to `limit`, or until the server is given up.
bool ready_within(afs::ForkServer& server, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until && server.running()) {
    if (server.ready()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(ForkServer, IsAskedOnlyOnceItSaysItIsReady) {
  afs::ForkServer server;
  // Builds for 0.3 s, says ready, answers one request with a made-up pid, then waits for end of file.
  server.start("/bin/sh", {"-c", "sleep 0.3; echo ready >&3; read request; echo 4242 >&3; cat >/dev/null"});
  EXPECT_FALSE(server.ready());                   // still "building"
  EXPECT_EQ(server.fork_worker({1, 2, {}}), -1);  // not asked: nothing written, the server kept
  EXPECT_TRUE(server.running());
  ASSERT_TRUE(ready_within(server, 10s));
  EXPECT_EQ(server.fork_worker({1, 2, {100, 200}}, 5000ms), 4242);
  EXPECT_TRUE(server.running());
  server.stop();
  EXPECT_FALSE(server.running());
}

TEST(ForkServer, OneThatSaysSomethingElseOrExitsFirstIsGivenUp) {
  afs::ForkServer confused;
  confused.start("/bin/sh", {"-c", "echo hello >&3; cat >/dev/null"});
  EXPECT_FALSE(ready_within(confused, 10s));
  EXPECT_FALSE(confused.running());

  afs::ForkServer gone;
  gone.start("/bin/sh", {"-c", "exit 3"});
  EXPECT_FALSE(ready_within(gone, 10s));
  EXPECT_FALSE(gone.running());
}

}  // namespace
