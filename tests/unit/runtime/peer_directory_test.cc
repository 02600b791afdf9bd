// PeerDirectory (afstream/runtime/worker.h): where workers bind (a prefix scheme or tcp://IP) and where their peers
// reach them, which is only ever what they announced for their current incarnation.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace afs
