// Sealing and opening snapshot envelopes (DESIGN.md sections 3 and 8).
#include "afstream/state/snapshot.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t, for a checksum of two parts on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

namespace afs {
namespace {

std::string hex(std::uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const char* to_string(SnapshotKind kind) {
  switch (kind) {
    case SnapshotKind::Full:
      return "full";
    case SnapshotKind::Delta:
      return "delta";
  }
  return "unknown";
}

std::uint32_t type_id_of(std::string_view name) {
  return static_cast<std::uint32_t>(XXH3_64bits(name.data(), name.size()));
}

std::uint64_t checksum(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::uint64_t checksum(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, first.data(), first.size());
  XXH3_64bits_update(&state, second.data(), second.size());
  return XXH3_64bits_digest(&state);
}

void seal_snapshot_in_place(std::vector<std::uint8_t>& buffer, std::uint32_t type_id, SnapshotKind kind) {
  if (buffer.size() < kSnapshotHeaderSize) {
    throw FormatError("seal_snapshot_in_place: buffer lacks the reserved header");
  }
  const std::span<const std::uint8_t> payload(buffer.data() + kSnapshotHeaderSize, buffer.size() - kSnapshotHeaderSize);
  ByteWriter w;
  w.put<std::uint32_t>(kSnapshotMagic);
  w.put<std::uint16_t>(kSnapshotFormatVersion);
  w.put<std::uint16_t>(static_cast<std::uint16_t>(kind));
  w.put<std::uint32_t>(type_id);
  w.put<std::uint64_t>(payload.size());
  w.put<std::uint64_t>(checksum(payload));
  std::copy(w.buffer().begin(), w.buffer().end(), buffer.begin());
}

std::vector<std::uint8_t> seal_snapshot(std::uint32_t type_id, SnapshotKind kind,
                                        std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> buffer;
  buffer.reserve(kSnapshotHeaderSize + payload.size());
  buffer.resize(kSnapshotHeaderSize);
  buffer.insert(buffer.end(), payload.begin(), payload.end());
  seal_snapshot_in_place(buffer, type_id, kind);
  return buffer;
}

OpenedSnapshot open_snapshot(std::span<const std::uint8_t> bytes, std::uint32_t expected_type_id) {
  if (bytes.size() < kSnapshotHeaderSize) {
    throw FormatError("snapshot too short: " + std::to_string(bytes.size()) + " bytes, but the header alone needs " +
                      std::to_string(kSnapshotHeaderSize));
  }
  ByteReader r(bytes);
  const auto magic = r.get<std::uint32_t>("snapshot magic");
  const auto version = r.get<std::uint16_t>("snapshot format version");
  const auto kind = r.get<std::uint16_t>("snapshot kind");
  const auto type_id = r.get<std::uint32_t>("snapshot type id");
  const auto size = r.get<std::uint64_t>("snapshot payload size");
  const auto sum = r.get<std::uint64_t>("snapshot checksum");
  if (magic != kSnapshotMagic) {
    throw FormatError("not a snapshot: bad magic " + hex(magic, 8) + " (expected " + hex(kSnapshotMagic, 8) +
                      ", the bytes 'AFSN')");
  }
  if (version != kSnapshotFormatVersion) {
    throw FormatError("unsupported snapshot format version " + std::to_string(version) + " (this build reads version " +
                      std::to_string(kSnapshotFormatVersion) + ")");
  }
  if (kind != static_cast<std::uint16_t>(SnapshotKind::Full) &&
      kind != static_cast<std::uint16_t>(SnapshotKind::Delta)) {
    throw FormatError("unknown snapshot kind " + std::to_string(kind) + " (expected 1 = full or 2 = delta)");
  }
  if (type_id != expected_type_id) {
    throw FormatError("snapshot type mismatch: the snapshot holds state type id " + hex(type_id, 8) + " but type id " +
                      hex(expected_type_id, 8) + " was expected");
  }
  const std::span<const std::uint8_t> payload = r.rest();
  if (size != payload.size()) {
    throw FormatError("snapshot size mismatch: the header announces " + std::to_string(size) + " payload bytes but " +
                      std::to_string(payload.size()) + " follow (truncated or padded)");
  }
  const std::uint64_t actual = checksum(payload);
  if (actual != sum) {
    throw FormatError("snapshot checksum mismatch: the header says " + hex(sum, 16) + " but the payload hashes to " +
                      hex(actual, 16) + " (corrupt payload)");
  }
  return OpenedSnapshot{static_cast<SnapshotKind>(kind), payload};
}

}  // namespace afs
