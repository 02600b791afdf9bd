// Checking endpoints given by people (endpoint.h).
#include "afstream/net/endpoint.h"

#include <arpa/inet.h>

#include <cctype>

#include "afstream/core/errors.h"

namespace afs::net {

namespace {

constexpr const char* kTcp = "tcp://";

bool is_ipv4(const std::string& host) {
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1;
}

// "[addr]" with addr an IPv6 address.
bool is_bracketed_ipv6(const std::string& host) {
  if (host.size() < 3 || host.front() != '[' || host.back() != ']') return false;
  in6_addr a{};
  return ::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a) == 1;
}

bool is_host_name(const std::string& host) {
  if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.') return false;
  bool letter = false;
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
    letter = letter || std::isalpha(static_cast<unsigned char>(c));
  }
  return letter;  // digits and dots only is an IPv4 address or nothing (10.0.0.300)
}

bool is_wildcard(const std::string& host) {
  return host == "*" || host == "0.0.0.0" || host == "[::]" || host == "[0:0:0:0:0:0:0:0]";
}

// Splits "tcp://HOST[:PORT]" after the scheme; port_text is empty when there is no port.
void split_tcp(const std::string& endpoint, std::string& host, std::string& port_text, bool& has_port) {
  const std::string rest = endpoint.substr(std::char_traits<char>::length(kTcp));
  const auto bracket = rest.rfind(']');
  const auto colon = rest.rfind(':');
  has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  host = has_port ? rest.substr(0, colon) : rest;
  port_text = has_port ? rest.substr(colon + 1) : "";
}

// -1 if not a number in 0..65535.
int parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5) return -1;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  }
  const int port = std::stoi(text);
  return port <= 65535 ? port : -1;
}

[[noreturn]] void bad(const std::string& option, const std::string& endpoint, const std::string& why) {
  throw ConfigError(option + ": '" + endpoint + "' " + why);
}

}  // namespace

std::string TcpAddress::endpoint() const {
  return std::string(kTcp) + host + ":" + (port == 0 ? std::string("*") : std::to_string(port));
}

bool is_tcp(const std::string& endpoint) { return endpoint.rfind(kTcp, 0) == 0; }

void check_connect_endpoint(const std::string& endpoint, const std::string& option) {
  const std::string expected = "(expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)";
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) {
    if (endpoint.size() == endpoint.find("://") + 3) bad(option, endpoint, "names no path " + expected);
    return;
  }
  if (!is_tcp(endpoint)) bad(option, endpoint, "is not an endpoint " + expected);
  std::string host, port_text;
  bool has_port = false;
  split_tcp(endpoint, host, port_text, has_port);
  if (is_bracketed_ipv6(host)) bad(option, endpoint, "is an IPv6 address: only IPv4 is supported (yet)");
  if (!is_ipv4(host) && !is_host_name(host)) {
    bad(option, endpoint, "has no valid host " + expected);
  }
  if (!has_port) bad(option, endpoint, "has no port " + expected);
  const int port = parse_port(port_text);
  if (port <= 0) bad(option, endpoint, "has no valid port (expected 1..65535)");
  if (is_wildcard(host)) bad(option, endpoint, "is a wildcard address, not one to connect to");
}

TcpAddress parse_tcp_bind(const std::string& endpoint, const std::string& option, bool allow_port) {
  const std::string expected = allow_port ? "(expected tcp://IP or tcp://IP:PORT, IP an address of this host)"
                                          : "(expected tcp://IP, IP an address of this host; the ports are chosen "
                                            "by the operating system)";
  if (!is_tcp(endpoint)) bad(option, endpoint, "is not a tcp address " + expected);
  std::string host, port_text;
  bool has_port = false;
  split_tcp(endpoint, host, port_text, has_port);
  if (is_wildcard(host)) {
    bad(option, endpoint,
        "is a wildcard address: give the address of this host that the other hosts reach it at " + expected);
  }
  if (is_bracketed_ipv6(host)) bad(option, endpoint, "is an IPv6 address: only IPv4 is supported (yet)");
  if (!is_ipv4(host)) bad(option, endpoint, "has no valid IP address " + expected);
  TcpAddress a;
  a.host = host;
  if (has_port && port_text != "*") {
    const int port = parse_port(port_text);
    if (port < 0) bad(option, endpoint, "has no valid port " + expected);
    if (port != 0 && !allow_port) bad(option, endpoint, "names a port " + expected);
    a.port = static_cast<std::uint16_t>(port);
  }
  return a;
}

}  // namespace afs::net
