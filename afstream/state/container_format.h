// Internal: the small header that starts every tracked container's full or delta payload.
//
// DESIGN.md section 3 (state backups, full or delta) and section 8 (reject a backup whose schema does not match):
// every payload written by TrackedArray / TrackedMap / TrackedVector starts with
//   u16 container tag | u16 container format version (1) | u64 size
// The tag names the container type, its value type and whether the payload is a full copy or a delta, so reading
// the wrong container, the wrong value type, or a delta as a full copy is a FormatError. The size is the number of
// slots (arrays, vectors) or of entries after applying the payload (maps).
#pragma once

#include <cstdint>
#include <cstring>

#include "afstream/core/bytes.h"

namespace afs::detail {

inline constexpr std::uint16_t kContainerFormatVersion = 1;

// Container families (high byte) and payload kinds (low byte).
inline constexpr std::uint16_t kTagArrayInt64 = 0x0100;
inline constexpr std::uint16_t kTagArrayDouble = 0x0200;
inline constexpr std::uint16_t kTagMapInt64 = 0x0300;
inline constexpr std::uint16_t kTagMapDouble = 0x0400;
inline constexpr std::uint16_t kTagVector = 0x0500;
inline constexpr std::uint16_t kTagFull = 0x0001;
inline constexpr std::uint16_t kTagDelta = 0x0002;

// "TrackedArray<int64> delta", "TrackedMap<double> full", ... or "unknown container payload".
const char* container_tag_name(std::uint16_t tag);

void write_container_header(ByteWriter& w, std::uint16_t tag, std::uint64_t size);

// Reads and checks the tag and version; returns the size. Throws FormatError naming what was expected and found.
std::uint64_t read_container_header(ByteReader& r, std::uint16_t expected_tag);

// Appends a u64 count and then the values v[idx[0]], v[idx[1]], ... in ByteWriter::put_array's layout, so that
// ByteReader::get_array<T> reads them back.
template <typename T, typename Values, typename Index>
void put_gathered(ByteWriter& w, const Values& v, const Index& idx) {
  w.put<std::uint64_t>(idx.size());
  auto& buf = w.buffer();
  const std::size_t off = buf.size();
  buf.resize(off + idx.size() * sizeof(T));
  std::uint8_t* out = buf.data() + off;
  for (const auto i : idx) {
    const T x = v[i];
    std::memcpy(out, &x, sizeof(T));
    out += sizeof(T);
  }
}

}  // namespace afs::detail
