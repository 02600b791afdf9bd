// CURVE keys and key files (afstream/net/curve.h): keygen writes a secret file only its owner can read and a public
// file, which read back to the same keys; every bad key file (missing, unreadable, truncated, wrong characters,
// wrong length, readable by others, mismatched keys, the wrong half) is one ConfigError naming the option and the
// file; public keys are taken from files or given as themselves; an authorized directory is every key file in it.
#include "afstream/net/curve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "afstream/core/errors.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs::net {
namespace {

namespace fs = std::filesystem;
using afs::testing::error_message;
using afs::testing::TempDir;

void write(const fs::path& p, const std::string& text, mode_t mode = 0600) {
  std::ofstream(p, std::ios::binary) << text;
  ::chmod(p.c_str(), mode);
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

// The ConfigError message of reading `p` as a secret key file under option "net.curve-secret".
std::string secret_error(const fs::path& p) {
  return error_message<ConfigError>([&] { (void)read_curve_secret_file(p.string(), "net.curve-secret"); });
}

void expect_names(const std::string& msg, const fs::path& p, const std::string& what) {
  EXPECT_EQ(msg.rfind("net.curve-secret: '" + p.string() + "'", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
}

TEST(CurveKeys, AreWellFormedZ85AndThePublicKeyBelongsToTheSecret) {
  ASSERT_TRUE(curve_available()) << "Debian's libzmq is built with libsodium";
  const auto k = generate_curve_keypair();
  EXPECT_EQ(z85_key_problem(k.public_key), "");
  EXPECT_EQ(z85_key_problem(k.secret_key), "");
  EXPECT_EQ(curve_public_of(k.secret_key), k.public_key);
  EXPECT_NE(generate_curve_keypair(), k);
  EXPECT_EQ(binary_to_z85(z85_to_binary(k.public_key)), k.public_key);
  EXPECT_EQ(z85_to_binary(k.public_key).size(), 32u);
  EXPECT_NE(z85_key_problem(k.public_key.substr(1)).find("is 39 characters long, expected 40"), std::string::npos);
  EXPECT_NE(z85_key_problem("~" + k.public_key.substr(1)).find("'~' at position 1"), std::string::npos);
  EXPECT_NE(z85_key_problem(std::string(39, 'a') + "\n").find("\\x0a at position 40"), std::string::npos);
}

TEST(CurveKeyFiles, KeygenWritesASecretFileOnlyItsOwnerReadsAndAPublicFile) {
  TempDir t;
  const auto k = generate_curve_keypair();
  const auto old_umask = ::umask(0);  // even with no umask, the secret file is its owner's alone
  const auto files = write_curve_keypair((t.path() / "keys").string(), "hostA", k);
  ::umask(old_umask);
  EXPECT_EQ(files.secret_file, (t.path() / "keys" / "hostA.key").string());
  EXPECT_EQ(files.public_file, (t.path() / "keys" / "hostA.pub").string());
  EXPECT_EQ(mode_of(files.secret_file), 0600u);
  EXPECT_EQ(mode_of(files.public_file), 0644u);
  EXPECT_EQ(read_curve_secret_file(files.secret_file, "net.curve-secret"), k);
  EXPECT_EQ(read_curve_public_file(files.public_file, "net.curve-authorized"), k.public_key);
  std::ifstream pub(files.public_file);
  const std::string text((std::istreambuf_iterator<char>(pub)), {});
  EXPECT_EQ(text.find(k.secret_key), std::string::npos) << "the public file holds no secret";

  // Never overwrites a key.
  const auto again = error_message<InputError>(
      [&] { (void)write_curve_keypair((t.path() / "keys").string(), "hostA", generate_curve_keypair()); });
  EXPECT_NE(again.find(files.secret_file), std::string::npos) << again;
  EXPECT_NE(again.find("not overwriting"), std::string::npos) << again;
  EXPECT_EQ(read_curve_secret_file(files.secret_file, "net.curve-secret"), k);
  EXPECT_NE(error_message<ConfigError>([&] { (void)write_curve_keypair(t.str(), "a/b", k); }).find("'a/b'"),
            std::string::npos);
}

TEST(CurveKeyFiles, MissingUnreadableOrNotAFileIsOneErrorNamingIt) {
  TempDir t;
  const auto missing = t.path() / "nope.key";
  expect_names(secret_error(missing), missing, "cannot be read: No such file or directory");
  expect_names(secret_error(t.path()), t.path(), "is a directory, expected a key file");
  const auto k = generate_curve_keypair();
  const auto locked = t.path() / "locked.key";
  write(locked, secret_key_file_text(k), 0000);
  if (::geteuid() != 0) {  // root reads it anyway
    expect_names(secret_error(locked), locked, "cannot be read: Permission denied");
  }
  const auto empty = t.path() / "empty.key";
  write(empty, "");
  expect_names(secret_error(empty), empty, "has no public-key");
}

TEST(CurveKeyFiles, EveryTruncationOfASecretFileIsRefusedNamingTheFile) {
  TempDir t;
  const auto text = secret_key_file_text(generate_curve_keypair());
  const auto p = t.path() / "cut.key";
  for (std::size_t len = 0; len + 1 < text.size(); ++len) {  // the last byte is the final newline
    write(p, text.substr(0, len));
    const auto msg = secret_error(p);
    EXPECT_EQ(msg.rfind("net.curve-secret: '" + p.string() + "'", 0), 0u) << len << ": " << msg;
  }
  write(p, text.substr(0, text.size() - 1));
  EXPECT_EQ(secret_error(p), "") << "only the final newline missing";
}

TEST(CurveKeyFiles, WrongCharactersOrLengthNameTheLine) {
  TempDir t;
  const auto k = generate_curve_keypair();
  const auto text = secret_key_file_text(k);
  const auto p = t.path() / "bad.key";

  auto with_secret = [&](const std::string& secret) {
    auto s = text;
    s.replace(s.find(k.secret_key), k.secret_key.size(), secret);
    return s;
  };
  write(p, with_secret("~" + k.secret_key.substr(1)));
  expect_names(secret_error(p), p, "line 8: secret-key has '~' at position 1, which is not a Z85 character");
  write(p, with_secret(k.secret_key.substr(0, 39)));
  expect_names(secret_error(p), p, "line 8: secret-key is 39 characters long, expected 40");
  write(p, with_secret(k.secret_key + "x"));
  expect_names(secret_error(p), p, "is 41 characters long");
  // A secret key of another keypair.
  write(p, with_secret(generate_curve_keypair().secret_key));
  expect_names(secret_error(p), p, "line 8: the secret-key does not belong to the public-key of line 7");
  // Not a certificate at all.
  write(p, "hello world\n");
  expect_names(secret_error(p), p, "line 1: expected a section 'metadata' or 'curve'");
  write(p, "curve\n    private-key = \"" + k.secret_key + "\"\n");
  expect_names(secret_error(p), p, "line 2: unknown key 'private-key'");
  write(p, "curve\n    public-key = \"" + k.public_key + "\"\n    public-key = \"" + k.public_key + "\"\n");
  expect_names(secret_error(p), p, "line 3: public-key given twice (also on line 2)");
}

TEST(CurveKeyFiles, ASecretFileOthersMayReadIsRefused) {
  TempDir t;
  const auto p = t.path() / "open.key";
  write(p, secret_key_file_text(generate_curve_keypair()), 0644);
  expect_names(secret_error(p), p, "other users may read or change it (mode 0644): chmod 600");
  ::chmod(p.c_str(), 0600);
  EXPECT_EQ(secret_error(p), "");
}

TEST(CurveKeyFiles, TheWrongHalfIsRefused) {
  TempDir t;
  const auto k = generate_curve_keypair();
  const auto files = write_curve_keypair(t.str(), "h", k);
  expect_names(secret_error(files.public_file), files.public_file, "has no secret-key: it is a public key file");
  const auto msg =
      error_message<ConfigError>([&] { (void)read_curve_public_file(files.secret_file, "net.curve-authorized"); });
  EXPECT_NE(msg.find("net.curve-authorized: '" + files.secret_file + "' holds a secret key"), std::string::npos) << msg;
}

TEST(CurveKeyFiles, ReadsZeroMqCertificatesWithMetadataAndCrLf) {
  TempDir t;
  const auto k = generate_curve_keypair();
  const auto p = t.path() / "czmq_secret";
  write(p,
        "#   ZeroMQ CURVE **Secret** Certificate\r\n\r\nmetadata\r\n    name = \"host-b\"\r\ncurve\r\n"
        "    public-key = \"" +
            k.public_key + "\"\r\n    secret-key = \"" + k.secret_key + "\"\r\n");
  EXPECT_EQ(read_curve_secret_file(p.string(), "net.curve-secret"), k);
}

TEST(CurvePublicKeys, AreAFileOrTheKeyItself) {
  TempDir t;
  const auto k = generate_curve_keypair();
  const auto files = write_curve_keypair(t.str(), "c", k);
  EXPECT_EQ(read_curve_public_key(files.public_file, "worker.controller-key"), k.public_key);
  EXPECT_EQ(read_curve_public_key(k.public_key, "worker.controller-key"), k.public_key);
  const auto typo = error_message<ConfigError>(
      [&] { (void)read_curve_public_key((t.path() / "c.pbu").string(), "worker.controller-key"); });
  EXPECT_NE(typo.find("worker.controller-key: '" + (t.path() / "c.pbu").string() + "' is neither a public key file"),
            std::string::npos)
      << typo;
  const auto bad = error_message<ConfigError>(
      [&] { (void)read_curve_public_key(std::string(39, 'a') + "~", "worker.controller-key"); });
  EXPECT_NE(bad.find("'~' at position 40"), std::string::npos) << bad;
}

TEST(CurveAuthorized, IsAKeyFileOrEveryKeyFileInADirectory) {
  TempDir t;
  const auto a = generate_curve_keypair(), b = generate_curve_keypair();
  const auto dir = t.path() / "authorized";
  fs::create_directories(dir / "sub");
  write(dir / "a.pub", public_key_file_text(a.public_key), 0644);
  write(dir / "b.pub", public_key_file_text(b.public_key), 0644);
  write(dir / ".a.pub.swp", "editor litter");  // hidden files are not keys
  EXPECT_EQ(read_curve_authorized(dir.string(), "net.curve-authorized"),
            (std::set<std::string>{a.public_key, b.public_key}));
  EXPECT_EQ(read_curve_authorized((dir / "a.pub").string(), "net.curve-authorized"),
            std::set<std::string>{a.public_key});

  write(dir / "notes.txt", "b is host B\n");
  auto msg = error_message<ConfigError>([&] { (void)read_curve_authorized(dir.string(), "net.curve-authorized"); });
  EXPECT_NE(msg.find("net.curve-authorized: '" + (dir / "notes.txt").string() + "' line 1"), std::string::npos) << msg;
  fs::remove(dir / "notes.txt");
  write(dir / "c.key", secret_key_file_text(generate_curve_keypair()));
  msg = error_message<ConfigError>([&] { (void)read_curve_authorized(dir.string(), "net.curve-authorized"); });
  EXPECT_NE(msg.find("c.key' holds a secret key"), std::string::npos) << msg;

  fs::create_directories(t.path() / "empty");
  msg = error_message<ConfigError>(
      [&] { (void)read_curve_authorized((t.path() / "empty").string(), "net.curve-authorized"); });
  EXPECT_NE(msg.find("holds no public key files"), std::string::npos) << msg;
  msg = error_message<ConfigError>(
      [&] { (void)read_curve_authorized((t.path() / "nowhere").string(), "net.curve-authorized"); });
  EXPECT_NE(msg.find("net.curve-authorized: '" + (t.path() / "nowhere").string() + "' cannot be read"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace afs::net
