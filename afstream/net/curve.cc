// CURVE keys, key files and sockets (curve.h).
#include "afstream/net/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "afstream/core/errors.h"

namespace afs::net {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
constexpr std::size_t kMaxKeyFileBytes = 64 * 1024;  // a certificate is a few hundred bytes

std::string quoted(const std::string& path) { return "'" + path + "'"; }

[[noreturn]] void bad(const std::string& option, const std::string& path, const std::string& why) {
  throw ConfigError(option + ": " + quoted(path) + " " + why);
}

std::string printable(char c) {
  if (c >= 32 && c < 127) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
  return buf;
}

// The keys of a certificate file, with the lines they were on.
struct Certificate {
  std::string public_key, secret_key;
  int public_line = 0, secret_line = 0;
};

// The text of a key file, read with POSIX calls so that every failure has its errno. Also its mode.
std::string read_key_file(const std::string& path, const std::string& option, mode_t* mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad(option, path, std::string("cannot be read: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) bad(option, path, std::string("cannot be read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) bad(option, path, "is a directory, expected a key file");
  if (!S_ISREG(st.st_mode)) bad(option, path, "is not a regular file, expected a key file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxKeyFileBytes) {
    bad(option, path, "is " + std::to_string(st.st_size) + " bytes, too large for a key file");
  }
  if (mode) *mode = st.st_mode;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      bad(option, path, std::string("cannot be read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxKeyFileBytes) bad(option, path, "is too large for a key file");
  }
  return text;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// Parses the ZPL subset of ZeroMQ certificates: '#' comment lines, top-level sections `metadata` (anything below it
// is ignored) and `curve` (public-key and secret-key), children indented, `name = value` with the value quoted.
Certificate parse_certificate(const std::string& text, const std::string& path, const std::string& option) {
  Certificate cert;
  std::string section;
  int n = 0;
  std::size_t start = 0;
  auto at = [&](int line, const std::string& why) { bad(option, path, "line " + std::to_string(line) + ": " + why); };
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const bool indented = line[0] == ' ' || line[0] == '\t';
    if (!indented) {
      if (t != "metadata" && t != "curve") {
        at(n, "expected a section 'metadata' or 'curve' (a ZeroMQ certificate, as `afstream keygen` writes), got '" +
                  t + "'");
      }
      section = t;
      continue;
    }
    if (section.empty()) at(n, "an indented line before any section");
    if (section == "metadata") continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos) at(n, "expected 'public-key = \"KEY\"' or 'secret-key = \"KEY\"', got '" + t + "'");
    const std::string name = trim(std::string_view(t).substr(0, eq));
    std::string value = trim(std::string_view(t).substr(eq + 1));
    if (!value.empty() && (value[0] == '"' || value[0] == '\'')) {
      if (value.size() < 2 || value.back() != value[0]) {
        at(n, "the value of " + name + " has no closing quote (is the file truncated?)");
      }
      value = value.substr(1, value.size() - 2);
    }
    std::string* slot = nullptr;
    int* slot_line = nullptr;
    if (name == "public-key") {
      slot = &cert.public_key;
      slot_line = &cert.public_line;
    } else if (name == "secret-key") {
      slot = &cert.secret_key;
      slot_line = &cert.secret_line;
    } else {
      at(n, "unknown key '" + name + "' in section curve (expected public-key or secret-key)");
    }
    if (*slot_line != 0) at(n, name + " given twice (also on line " + std::to_string(*slot_line) + ")");
    const auto problem = z85_key_problem(value);
    if (!problem.empty()) at(n, name + " " + problem);
    *slot = value;
    *slot_line = n;
  }
  if (cert.public_line == 0) {
    bad(option, path,
        "has no public-key (expected a ZeroMQ certificate as `afstream keygen` writes: a 'curve' section with "
        "'public-key = \"KEY\"')");
  }
  return cert;
}

// Creates `path` with exactly `mode`, failing if it exists.
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      throw InputError("key file " + quoted(path) +
                       " exists already: not overwriting it (remove it, or choose "
                       "another name)");
    }
    throw InputError("cannot create key file " + quoted(path) + ": " + std::strerror(errno));
  }
  bool ok = ::fchmod(fd, mode) == 0;  // the umask may have taken bits away from the public file
  std::size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(path.c_str());
    throw InputError("cannot write key file " + quoted(path) + ": " + std::strerror(err));
  }
}

}  // namespace

bool curve_available() { return zmq_has("curve") == 1; }

CurveKeypair generate_curve_keypair() {
  std::array<char, kZ85KeyChars + 1> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    throw RuntimeError(std::string("cannot generate a CURVE keypair: ") + zmq_strerror(zmq_errno()) +
                       " (is libzmq built with libsodium? zmq_has(\"curve\") is " + std::to_string(zmq_has("curve")) +
                       ")");
  }
  return {pub.data(), sec.data()};
}

std::string z85_key_problem(std::string_view key) {
  if (key.size() != kZ85KeyChars) {
    return "is " + std::to_string(key.size()) + " characters long, expected " + std::to_string(kZ85KeyChars) +
           " (a Z85 key)";
  }
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (kZ85Alphabet.find(key[i]) == std::string_view::npos) {
      return "has " + printable(key[i]) + " at position " + std::to_string(i + 1) + ", which is not a Z85 character";
    }
  }
  std::array<std::uint8_t, 32> bin{};
  const std::string z(key);
  if (zmq_z85_decode(bin.data(), z.c_str()) == nullptr) return "does not decode as Z85";
  return "";
}

std::string curve_public_of(const std::string& secret_key) {
  if (!z85_key_problem(secret_key).empty()) return "";
  std::array<char, kZ85KeyChars + 1> pub{};
  if (zmq_curve_public(pub.data(), secret_key.c_str()) != 0) return "";
  return pub.data();
}

std::string z85_to_binary(const std::string& key) {
  std::array<std::uint8_t, 32> bin{};
  if (key.size() != kZ85KeyChars || zmq_z85_decode(bin.data(), key.c_str()) == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(bin.data()), bin.size());
}

std::string binary_to_z85(std::string_view key32) {
  if (key32.size() != 32) return "";
  std::array<char, kZ85KeyChars + 1> z{};
  if (zmq_z85_encode(z.data(), reinterpret_cast<const std::uint8_t*>(key32.data()), key32.size()) == nullptr) {
    return "";
  }
  return z.data();
}

std::string secret_key_file_text(const CurveKeypair& keys) {
  return "#   ****  Generated by afstream keygen  ****\n"
         "#   ZeroMQ CURVE **Secret** Certificate\n"
         "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
         "\n"
         "metadata\n"
         "curve\n"
         "    public-key = \"" +
         keys.public_key +
         "\"\n"
         "    secret-key = \"" +
         keys.secret_key + "\"\n";
}

std::string public_key_file_text(const std::string& public_key) {
  return "#   ****  Generated by afstream keygen  ****\n"
         "#   ZeroMQ CURVE Public Certificate\n"
         "#   Exchange securely, or use a secure mechanism to verify the contents\n"
         "#   of this file after exchange.\n"
         "\n"
         "metadata\n"
         "curve\n"
         "    public-key = \"" +
         public_key + "\"\n";
}

KeyFiles write_curve_keypair(const std::string& dir, const std::string& name, const CurveKeypair& keys) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    throw ConfigError("name: '" + name +
                      "' is not a key name (expected a file name without '/', not starting with '.')");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot create directory " + quoted(dir) + ": " + ec.message());
  KeyFiles files{(fs::path(dir) / (name + ".key")).string(), (fs::path(dir) / (name + ".pub")).string()};
  for (const auto* p : {&files.secret_file, &files.public_file}) {
    if (fs::exists(fs::symlink_status(*p, ec))) {
      throw InputError("key file " + quoted(*p) +
                       " exists already: not overwriting it (remove it, or choose another --name or --out)");
    }
  }
  write_new_file(files.secret_file, secret_key_file_text(keys), 0600);
  try {
    write_new_file(files.public_file, public_key_file_text(keys.public_key), 0644);
  } catch (...) {
    ::unlink(files.secret_file.c_str());
    throw;
  }
  return files;
}

CurveKeypair read_curve_secret_file(const std::string& path, const std::string& option) {
  mode_t mode = 0;
  const auto text = read_key_file(path, option, &mode);
  const auto cert = parse_certificate(text, path, option);
  if (cert.secret_line == 0) {
    bad(option, path, "has no secret-key: it is a public key file (give the secret key file, NAME.key)");
  }
  if ((mode & 077) != 0) {
    char m[8];
    std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode & 07777));
    bad(option, path,
        std::string("holds a secret key but other users may read or change it (mode ") + m + "): chmod 600 " +
            quoted(path));
  }
  if (curve_public_of(cert.secret_key) != cert.public_key) {
    bad(option, path,
        "line " + std::to_string(cert.secret_line) +
            ": the secret-key does not belong to the public-key "
            "of line " +
            std::to_string(cert.public_line));
  }
  return {cert.public_key, cert.secret_key};
}

std::string read_curve_public_file(const std::string& path, const std::string& option) {
  const auto cert = parse_certificate(read_key_file(path, option, nullptr), path, option);
  if (cert.secret_line != 0) {
    bad(option, path,
        "holds a secret key: give the public key file (NAME.pub) here; a secret key stays with its owner");
  }
  return cert.public_key;
}

std::string read_curve_public_key(const std::string& file_or_key, const std::string& option) {
  std::error_code ec;
  if (fs::exists(file_or_key, ec)) return read_curve_public_file(file_or_key, option);
  if (file_or_key.size() == kZ85KeyChars) {
    const auto problem = z85_key_problem(file_or_key);
    if (!problem.empty()) throw ConfigError(option + ": the key " + quoted(file_or_key) + " " + problem);
    return file_or_key;
  }
  bad(option, file_or_key,
      "is neither a public key file (no such file) nor a public key (40 Z85 characters, as `afstream controller` "
      "prints)");
}

std::set<std::string> read_curve_authorized(const std::string& file_or_dir, const std::string& option) {
  std::error_code ec;
  const auto status = fs::status(file_or_dir, ec);
  if (ec || !fs::exists(status)) {
    bad(option, file_or_dir,
        "cannot be read: " + (ec ? ec.message() : std::string("no such file or directory")) +
            " (expected a public key file or a directory of them)");
  }
  std::set<std::string> keys;
  if (!fs::is_directory(status)) {
    keys.insert(read_curve_public_file(file_or_dir, option));
    return keys;
  }
  std::vector<std::string> files;
  fs::directory_iterator it(file_or_dir, ec);
  if (ec) bad(option, file_or_dir, "cannot be listed: " + ec.message());
  for (const auto& entry : it) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (entry.is_directory(ec)) continue;
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) keys.insert(read_curve_public_file(f, option));
  if (keys.empty()) {
    bad(option, file_or_dir,
        "holds no public key files (put there the NAME.pub of every host of the job, from `afstream keygen`)");
  }
  return keys;
}

void make_curve_server(zmq::socket_t& socket, const CurveKeypair& server) {
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, server.secret_key);
}

void make_curve_client(zmq::socket_t& socket, const CurveClient& client) {
  socket.set(zmq::sockopt::curve_serverkey, client.server_key);
  socket.set(zmq::sockopt::curve_publickey, client.keys.public_key);
  socket.set(zmq::sockopt::curve_secretkey, client.keys.secret_key);
}

}  // namespace afs::net
