// The controller's handle on its fork server (afstream/runtime/fork_server.h), against small shell scripts that speak
// the protocol: the server is asked for workers only once it has said it is ready (it builds the job first, which
// may take seconds), and one that says something else, or exits first, is given up.
#include "afstream/runtime/fork_server.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "algorithms/heavy_hitters/hh_operators.h"

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

// The fork server holds one instance of each source stage (prebuild_sources): a source built later in a process it
// forks shares what that instance built, here a Zipf source's alias table, instead of building it again (a
// restarted heavy-hitter source took 50-60 ms to its hello, most of it the table of 1e6 keys).
TEST(ForkServer, ASourceBuiltInAForkedProcessSharesThePrebuiltTable) {
  afs::Registry registry;
  afs::hh::register_heavy_hitters(registry);
  afs::Params src;
  src.set("items", 1000).set("keys", 50000).set("skew", 0.9).set("seed", 3);
  const auto topology = afs::TopologyBuilder()
                            .source("source", "zipf", src)
                            .parallelism(2)
                            .stage("hh", "count-min-hh", afs::Params())
                            .from("source")
                            .build();
  const auto prebuilt = afs::prebuild_sources(topology, registry);
  ASSERT_EQ(prebuilt.size(), 1u);  // one per source stage, not per instance
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // as a forked worker: its source, instance 1, built from the registry as a worker builds it
    const auto mine = registry.make_source("zipf", src, {1, 2});
    const auto* a = dynamic_cast<const afs::hh::ZipfSource*>(mine.get());
    const auto* b = dynamic_cast<const afs::hh::ZipfSource*>(prebuilt.front().get());
    ::_exit(a && b && a->generator().shares_table_with(b->generator()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the forked process built its own table";
}

}  // namespace
