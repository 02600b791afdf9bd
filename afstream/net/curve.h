// ZeroMQ CURVE (authentication and encryption of tcp:// connections, RFC 26 CurveZMQ) for jobs across hosts:
// keypairs, their files, and setting up sockets. CURVE applies to tcp:// only: ipc:// and inproc:// never leave
// the host and are left as they are.
//
// Keys are Curve25519 keys written in Z85 (40 characters). Key files use ZeroMQ's certificate format (zcert, a
// ZPL text file), so files written by czmq's tools are read too:
//
//     #   ZeroMQ CURVE **Secret** Certificate          (comment lines start with '#')
//     metadata
//     curve
//         public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
//         secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
//
// A public key file is the same without the secret-key line. `afstream keygen` writes NAME.key (both keys, mode
// 0600) and NAME.pub (the public key). A secret key file must not be readable by other users (as for ssh), and its
// two keys must belong together. Every problem with a key file is one ConfigError naming the option and the file
// (and the line, when there is one). Never prints or exits.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <zmq.hpp>

namespace afs::net {

inline constexpr std::size_t kZ85KeyChars = 40;

struct CurveKeypair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
  friend bool operator==(const CurveKeypair&, const CurveKeypair&) = default;
};

// What a process uses on tcp:// when CURVE is on: its keypair (its identity when it connects; the sockets it binds
// serve with it, except the workers' data and acknowledgement sockets, which serve with a keypair of their own
// incarnation) and the public keys allowed to connect to it.
struct CurveConfig {
  CurveKeypair keys;
  std::set<std::string> authorized;  // Z85 public keys
};

// What a connecting socket needs: its own keypair and the server's public key.
struct CurveClient {
  CurveKeypair keys;
  std::string server_key;  // Z85
};

// Whether this libzmq was built with CURVE (libsodium).
bool curve_available();
// A fresh keypair. Throws RuntimeError if libzmq has no CURVE.
CurveKeypair generate_curve_keypair();

// "" if `key` is a well-formed Z85 key (40 characters of the Z85 alphabet that decode), else why not.
std::string z85_key_problem(std::string_view key);
// The Z85 public key that belongs to a Z85 secret key ("" if the secret key is malformed).
std::string curve_public_of(const std::string& secret_key);
// The binary form of a Z85 key (32 bytes), as a ZAP request carries it, and back.
std::string z85_to_binary(const std::string& key);
std::string binary_to_z85(std::string_view key32);

// The text of a secret key file (both keys) and of a public key file.
std::string secret_key_file_text(const CurveKeypair& keys);
std::string public_key_file_text(const std::string& public_key);

// Writes DIR/NAME.key (mode 0600) and DIR/NAME.pub (mode 0644), creating DIR if needed; never overwrites a file
// (InputError naming it). Returns the two paths.
struct KeyFiles {
  std::string secret_file, public_file;
};
KeyFiles write_curve_keypair(const std::string& dir, const std::string& name, const CurveKeypair& keys);

// A secret key file: both keys, checked (well-formed, belonging together, file not readable by other users).
// Throws ConfigError naming `option` and the file.
CurveKeypair read_curve_secret_file(const std::string& path, const std::string& option);
// A public key file (a secret key file is refused: secret keys are not handed around). Throws ConfigError.
std::string read_curve_public_file(const std::string& path, const std::string& option);
// A public key given as a file or as the key itself (40 Z85 characters): a file that exists is read, else the
// value must be a key. Throws ConfigError naming `option`.
std::string read_curve_public_key(const std::string& file_or_key, const std::string& option);
// The public keys allowed to connect: a public key file, or a directory of them (every regular file in it whose
// name does not start with '.'). At least one key. Throws ConfigError naming `option` and the offending file.
std::set<std::string> read_curve_authorized(const std::string& file_or_dir, const std::string& option);

// Before bind: the socket is a CURVE server with `server`'s keys (clients must know its public key; the context's
// ZAP handler decides who gets in: afstream/runtime/gatekeeper.h).
void make_curve_server(zmq::socket_t& socket, const CurveKeypair& server);
// Before connect: the socket is a CURVE client with `client.keys`, accepting only a server holding the secret key of
// `client.server_key`.
void make_curve_client(zmq::socket_t& socket, const CurveClient& client);

}  // namespace afs::net
