// Unit tests for the sealed snapshot envelope (DESIGN.md sections 3 and 8): round trip, and rejection of truncated
// buffers, flipped bytes, wrong type ids, versions and kinds with a clear FormatError.
#include "afstream/state/snapshot.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {
namespace {

std::vector<std::uint8_t> random_payload(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> p(n);
  for (auto& b : p) b = static_cast<std::uint8_t>(rng());
  return p;
}

std::string error_of(const std::vector<std::uint8_t>& bytes, std::uint32_t type_id) {
  try {
    open_snapshot(bytes, type_id);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

const std::uint32_t kType = type_id_of("test.state");

TEST(Snapshot, RoundTrip) {
  const auto payload = random_payload(200, 1);
  for (SnapshotKind kind : {SnapshotKind::Full, SnapshotKind::Delta}) {
    const auto sealed = seal_snapshot(kType, kind, payload);
    ASSERT_EQ(sealed.size(), kSnapshotHeaderSize + payload.size());
    EXPECT_EQ(0, std::memcmp(sealed.data(), "AFSN", 4));
    const OpenedSnapshot s = open_snapshot(sealed, kType);
    EXPECT_EQ(s.kind, kind);
    EXPECT_EQ(std::vector<std::uint8_t>(s.payload.begin(), s.payload.end()), payload);
    EXPECT_EQ(s.payload.data(), sealed.data() + kSnapshotHeaderSize);  // a view into the buffer, no copy
  }
}

TEST(Snapshot, EmptyPayload) {
  const auto sealed = seal_snapshot(kType, SnapshotKind::Delta, {});
  const OpenedSnapshot s = open_snapshot(sealed, kType);
  EXPECT_EQ(s.kind, SnapshotKind::Delta);
  EXPECT_TRUE(s.payload.empty());
}

TEST(Snapshot, RejectsEveryTruncation) {
  const auto sealed = seal_snapshot(kType, SnapshotKind::Full, random_payload(64, 2));
  for (std::size_t len = 0; len < sealed.size(); ++len) {
    const std::vector<std::uint8_t> prefix(sealed.begin(), sealed.begin() + static_cast<std::ptrdiff_t>(len));
    const std::string msg = error_of(prefix, kType);
    ASSERT_FALSE(msg.empty()) << "prefix of " << len << " bytes accepted";
    if (len < kSnapshotHeaderSize) {
      EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("size mismatch"), std::string::npos) << msg;
    }
  }
}

TEST(Snapshot, RejectsTrailingBytes) {
  auto sealed = seal_snapshot(kType, SnapshotKind::Full, random_payload(16, 3));
  sealed.push_back(0);
  EXPECT_NE(error_of(sealed, kType).find("size mismatch"), std::string::npos);
}

TEST(Snapshot, RejectsEveryFlippedByte) {
  const auto sealed = seal_snapshot(kType, SnapshotKind::Full, random_payload(48, 4));
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    for (std::uint8_t mask : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xFF}}) {
      auto bad = sealed;
      bad[i] ^= mask;
      const std::string msg = error_of(bad, kType);
      ASSERT_FALSE(msg.empty()) << "flip of byte " << i << " accepted";
      const char* expected = i < 4    ? "magic"
                             : i < 6  ? "version"
                             : i < 8  ? "kind"
                             : i < 12 ? "type mismatch"
                             : i < 20 ? "size mismatch"
                                      : "checksum mismatch";
      // Flipping bit 0 of kind 1 gives 0 and bit 1 would give 3: both unknown kinds; never the other valid kind.
      EXPECT_NE(msg.find(expected), std::string::npos) << "byte " << i << ": " << msg;
    }
  }
}

TEST(Snapshot, RejectsWrongTypeNamingBothIds) {
  const auto sealed = seal_snapshot(0x11223344u, SnapshotKind::Full, random_payload(8, 5));
  const std::string msg = error_of(sealed, 0x55667788u);
  EXPECT_NE(msg.find("type mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x11223344"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x55667788"), std::string::npos) << msg;
}

TEST(Snapshot, RejectsWrongVersionAndKind) {
  auto sealed = seal_snapshot(kType, SnapshotKind::Full, random_payload(8, 6));
  auto v2 = sealed;
  v2[4] = 2;
  EXPECT_NE(error_of(v2, kType).find("unsupported snapshot format version 2"), std::string::npos);
  auto k3 = sealed;
  k3[6] = 3;
  EXPECT_NE(error_of(k3, kType).find("unknown snapshot kind 3"), std::string::npos);
  auto k0 = sealed;
  k0[6] = 0;
  EXPECT_NE(error_of(k0, kType).find("unknown snapshot kind 0"), std::string::npos);
}

TEST(Snapshot, TypeIdAndChecksumAreStableXxh3) {
  EXPECT_EQ(type_id_of("afs.count_min"), type_id_of("afs.count_min"));
  EXPECT_NE(type_id_of("afs.count_min"), type_id_of("afs.count_sketch"));
  const std::string name = "afs.sgd";
  EXPECT_EQ(type_id_of(name), static_cast<std::uint32_t>(XXH3_64bits(name.data(), name.size())));
  EXPECT_EQ(checksum({}), 0x2D06800538D394C2ULL);  // XXH3_64bits of the empty input, seed 0
  const auto p = random_payload(33, 7);
  EXPECT_EQ(checksum(p), XXH3_64bits(p.data(), p.size()));
}

// The two-part checksum (RocksDbStore's header + record) equals the checksum of the two joined, at every split,
// across XXH3's internal block and stripe sizes.
TEST(Snapshot, ChecksumOfTwoPartsIsTheChecksumOfBothJoined) {
  for (const std::size_t n : {0, 1, 11, 240, 241, 1024, 5000}) {
    const auto p = random_payload(n, n + 1);
    for (std::size_t split : {std::size_t{0}, n / 3, std::size_t{11}, n}) {
      split = std::min(split, n);
      const std::span<const std::uint8_t> all(p);
      EXPECT_EQ(checksum(all.first(split), all.subspan(split)), checksum(all)) << n << " split at " << split;
    }
  }
}

TEST(Snapshot, KindNames) {
  EXPECT_STREQ(to_string(SnapshotKind::Full), "full");
  EXPECT_STREQ(to_string(SnapshotKind::Delta), "delta");
}

}  // namespace
}  // namespace afs
