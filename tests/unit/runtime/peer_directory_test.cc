// PeerDirectory (afstream/runtime/worker.h): where workers bind (a prefix scheme or tcp://IP) and where their peers
// reach them, which is only ever what they announced for their current incarnation.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "afstream/runtime/worker.h"

namespace afs {
namespace {

TEST(PeerDirectory, PrefixSchemeNamesTheIncarnationWhereItBinds) {
  PeerDirectory d("ipc:///tmp/afs-job/", 3);
  EXPECT_FALSE(d.binds_tcp());
  EXPECT_EQ(d.bind_endpoint(2, 5, false), "ipc:///tmp/afs-job/w2-e5-data");
  EXPECT_EQ(d.bind_endpoint(2, 5, true), "ipc:///tmp/afs-job/w2-e5-acks");
}

TEST(PeerDirectory, TcpBindsOnAnyPort) {
  PeerDirectory d("tcp://10.200.0.2:*", 3);
  EXPECT_TRUE(d.binds_tcp());
  EXPECT_EQ(d.bind_endpoint(1, 1, false), "tcp://10.200.0.2:*");
  EXPECT_EQ(d.bind_endpoint(1, 1, true), "tcp://10.200.0.2:*");
}

TEST(PeerDirectory, PeersAreReachedAtWhatTheirCurrentIncarnationAnnounced) {
  PeerDirectory d("inproc://afs-test-", 2);
  EXPECT_EQ(d.endpoint(1, 0, false), "") << "nothing announced yet";
  EXPECT_EQ(d.endpoint(1, 1, false), "");
  const auto v0 = d.version();
  d.set_up(1, 1, {"tcp://10.0.0.2:4000", "tcp://10.0.0.2:4001", ""});
  EXPECT_GT(d.version(), v0);
  EXPECT_TRUE(d.up(1));
  EXPECT_EQ(d.epoch(1), 1u);
  EXPECT_EQ(d.endpoint(1, 1, false), "tcp://10.0.0.2:4000");
  EXPECT_EQ(d.endpoint(1, 1, true), "tcp://10.0.0.2:4001");
  EXPECT_EQ((d.endpoints(1)), (PeerEndpoints{"tcp://10.0.0.2:4000", "tcp://10.0.0.2:4001", ""}));
  d.set_down(1);
  EXPECT_FALSE(d.up(1));
  const std::string key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";  // CURVE: the key incarnation 2 serves with
  d.set_up(1, 2, {"tcp://10.0.0.3:5000", "tcp://10.0.0.3:5001", key});
  // A socket for the replaced incarnation gets no endpoint (it would reach whoever holds that port now).
  EXPECT_EQ(d.endpoint(1, 1, false), "");
  EXPECT_EQ(d.endpoint(1, 2, false), "tcp://10.0.0.3:5000");
  EXPECT_EQ(d.endpoints(1, 1), PeerEndpoints{}) << "nor a key";
  EXPECT_EQ(d.endpoints(1, 2), (PeerEndpoints{"tcp://10.0.0.3:5000", "tcp://10.0.0.3:5001", key}));
  EXPECT_EQ(d.endpoint(0, 1, false), "") << "another worker is unaffected";
}

// The state a sender acts on (up, and the incarnation) is read in one piece: a worker coming up for the first time is
// never seen down with an incarnation, i.e. crashed. Mode none drops what it holds for a crashed receiver (nothing
// resends it), so a sender that read the two apart dropped a whole window of items about one run in 3,000 under
// load (every copy of HeavyHittersProperty's mode-none reference then missed them).
TEST(PeerDirectory, AWorkerComingUpIsNeverSeenCrashed) {
  constexpr int kRounds = 2000;
  for (int round = 0; round < kRounds; ++round) {
    PeerDirectory d("inproc://afs-test-", 1);
    std::atomic<bool> go{false};
    std::thread up([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      d.set_up(0, 1, {"inproc://a", "inproc://b", ""});
    });
    go.store(true, std::memory_order_release);
    bool seen_up = false;
    for (int i = 0; i < 100000 && !seen_up; ++i) {
      const auto s = d.state(0);
      ASSERT_FALSE(s.crashed()) << "round " << round << ": incarnation " << s.epoch << " seen down before any failure";
      seen_up = s.up;
    }
    up.join();
    const auto s = d.state(0);
    EXPECT_TRUE(s.up);
    EXPECT_EQ(s.epoch, 1u);
    d.set_down(0);
    EXPECT_TRUE(d.state(0).crashed());
    EXPECT_EQ(d.state(0).epoch, 1u) << "going down keeps the incarnation";
  }
}

}  // namespace
}  // namespace afs
