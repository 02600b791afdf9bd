// Sealed snapshot envelope: the versioned, checksummed wrapper around every state backup payload.
//
// DESIGN.md section 3: a state backup is a full copy of an operator's state or a delta of what changed since the
// last backup; section 8: a backup whose checksum or schema version does not match is rejected with a clear error.
// Layout (little-endian, 28-byte header, then the payload):
//   u32 magic 'AFSN' (bytes "AFSN") | u16 format version (1) | u16 kind (1 = full, 2 = delta) |
//   u32 type id (which state type wrote it, see type_id_of) | u64 payload size | u64 XXH3_64bits(payload)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace afs {

// Whether a snapshot holds a whole state or the changes since the last backup (DESIGN.md section 3).
enum class SnapshotKind : std::uint16_t { Full = 1, Delta = 2 };

const char* to_string(SnapshotKind kind);  // "full" / "delta"

inline constexpr std::uint32_t kSnapshotMagic = 0x4E534641u;  // the bytes "AFSN" read as a little-endian u32
inline constexpr std::uint16_t kSnapshotFormatVersion = 1;
inline constexpr std::size_t kSnapshotHeaderSize = 28;

// A stable 32-bit identifier for a state type name (low 32 bits of XXH3_64bits of the name). Stable across builds
// and hosts, so snapshots written by one process can be checked by another.
std::uint32_t type_id_of(std::string_view name);

// XXH3_64bits of the bytes: the checksum stored in a snapshot header.
std::uint64_t checksum(std::span<const std::uint8_t> bytes);
// The checksum of `first` followed by `second`, without joining them.
std::uint64_t checksum(std::span<const std::uint8_t> first, std::span<const std::uint8_t> second);

// Wraps a payload in the snapshot header (DESIGN.md sections 3 and 8).
// As seal_snapshot, without copying the payload: buffer holds kSnapshotHeaderSize reserved bytes followed by the
// payload; the header is written over the reserved bytes.
void seal_snapshot_in_place(std::vector<std::uint8_t>& buffer, std::uint32_t type_id, SnapshotKind kind);

std::vector<std::uint8_t> seal_snapshot(std::uint32_t type_id, SnapshotKind kind,
                                        std::span<const std::uint8_t> payload);

// A validated snapshot. `payload` points into the buffer given to open_snapshot and lives as long as it does.
struct OpenedSnapshot {
  SnapshotKind kind;
  std::span<const std::uint8_t> payload;
};

// Validates a sealed snapshot and returns its kind and payload. Throws FormatError, naming what is wrong, when the
// buffer is shorter than the header, the magic is not 'AFSN', the format version is not supported, the kind is
// unknown, the type id differs from expected_type_id (both ids are named), the payload size does not match the
// bytes that follow, or the payload checksum does not match.
OpenedSnapshot open_snapshot(std::span<const std::uint8_t> bytes, std::uint32_t expected_type_id);

}  // namespace afs
