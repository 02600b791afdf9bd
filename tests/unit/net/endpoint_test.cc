// Endpoints given by people (afstream/net/endpoint.h): well-formed ones pass, each malformed one is a ConfigError
// that names the option and the address.
#include "afstream/net/endpoint.h"

#include <gtest/gtest.h>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs::net {
namespace {

using afs::testing::error_message;

TEST(Endpoint, ConnectEndpointsThatAreWellFormedPass) {
  for (const char* e : {"tcp://127.0.0.1:5560", "tcp://10.200.0.1:1", "tcp://10.0.0.1:65535",
                        "tcp://backup-1.example:7", "ipc:///tmp/afs-x/control", "inproc://afs-job-w1"}) {
    EXPECT_NO_THROW(check_connect_endpoint(e, "worker.controller")) << e;
  }
}

TEST(Endpoint, MalformedConnectEndpointsNameTheOptionAndTheAddress) {
  struct Case {
    const char* endpoint;
    const char* why;
  };
  for (const auto& c :
       {Case{"127.0.0.1:5560", "is not an endpoint"}, Case{"tcp://127.0.0.1", "has no port"},
        Case{"tcp://127.0.0.1:0", "no valid port"}, Case{"tcp://127.0.0.1:70000", "no valid port"},
        Case{"tcp://127.0.0.1:x", "no valid port"}, Case{"tcp://10.0.0.300:5", "no valid host"},
        Case{"tcp://:5", "no valid host"}, Case{"tcp://0.0.0.0:5", "wildcard"}, Case{"tcp://*:5", "no valid host"},
        Case{"tcp://[::1]:5", "IPv6"}, Case{"ipc://", "names no path"}, Case{"", "not an endpoint"}}) {
    const auto msg = error_message<ConfigError>([&] { check_connect_endpoint(c.endpoint, "worker.store"); });
    EXPECT_NE(msg.find("worker.store: '" + std::string(c.endpoint) + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << c.endpoint << ": " << msg;
  }
}

TEST(Endpoint, TcpBindAddressesParse) {
  const auto a = parse_tcp_bind("tcp://10.200.0.2", "worker.bind", false);
  EXPECT_EQ(a.host, "10.200.0.2");
  EXPECT_EQ(a.port, 0);
  EXPECT_EQ(a.endpoint(), "tcp://10.200.0.2:*");
  EXPECT_EQ(parse_tcp_bind("tcp://127.0.0.1:0", "worker.bind", false).endpoint(), "tcp://127.0.0.1:*");
  EXPECT_EQ(parse_tcp_bind("tcp://127.0.0.1:*", "worker.bind", false).endpoint(), "tcp://127.0.0.1:*");
  const auto p = parse_tcp_bind("tcp://10.0.0.1:7000", "controller.bind", true);
  EXPECT_EQ(p.port, 7000);
  EXPECT_EQ(p.endpoint(), "tcp://10.0.0.1:7000");
}

TEST(Endpoint, MalformedBindAddressesNameTheOptionAndTheAddress) {
  struct Case {
    const char* endpoint;
    bool allow_port;
    const char* why;
  };
  for (const auto& c :
       {Case{"10.0.0.1", false, "is not a tcp address"}, Case{"tcp://0.0.0.0", false, "wildcard"},
        Case{"tcp://*", true, "wildcard"}, Case{"tcp://[::]", true, "wildcard"}, Case{"tcp://[::1]", false, "IPv6"},
        Case{"tcp://10.0.0.300", false, "no valid IP address"}, Case{"tcp://localhost", false, "no valid IP address"},
        Case{"tcp://10.0.0.1:7000", false, "names a port"}, Case{"tcp://10.0.0.1:99999", true, "no valid port"},
        Case{"tcp://10.0.0.1:", true, "no valid port"}}) {
    const auto msg = error_message<ConfigError>([&] { (void)parse_tcp_bind(c.endpoint, "worker.bind", c.allow_port); });
    EXPECT_NE(msg.find("worker.bind: '" + std::string(c.endpoint) + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << c.endpoint << ": " << msg;
  }
}

}  // namespace
}  // namespace afs::net
