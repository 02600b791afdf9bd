// Endpoints given by people (DESIGN 8): checked before ZeroMQ sees them, so that a malformed address is one error
// naming the option ("worker.bind: ...") rather than ZeroMQ's "Invalid argument" or "No such device". Two uses:
//
//   - where to connect: tcp://HOST:PORT (HOST an IPv4 address or a host name; PORT 1..65535), ipc://PATH or
//     inproc://NAME;
//   - where to bind on tcp so that peers on other hosts can connect: tcp://IP[:PORT], IP a concrete IPv4 address
//     (not a wildcard such as 0.0.0.0 or *, which no peer can connect to), PORT 0, * or absent for a port the
//     operating system chooses.
// IPv6 addresses ([::1]) are refused with a message saying so: the sockets are not opened for IPv6 (yet).
#pragma once

#include <cstdint>
#include <string>

namespace afs::net {

struct TcpAddress {
  std::string host;        // an IPv4 address
  std::uint16_t port = 0;  // 0: any free port

  // tcp://HOST:PORT, or tcp://HOST:* (ZeroMQ's spelling of "any free port") when port is 0.
  std::string endpoint() const;
};

bool is_tcp(const std::string& endpoint);

// Throws ConfigError naming `option` unless `endpoint` is a well-formed endpoint to connect to.
void check_connect_endpoint(const std::string& endpoint, const std::string& option);

// Parses a tcp bind address. allow_port false: a port other than 0 or * is refused (the address is shared by
// sockets that each need a port of their own). Throws ConfigError naming `option`.
TcpAddress parse_tcp_bind(const std::string& endpoint, const std::string& option, bool allow_port);

}  // namespace afs::net
