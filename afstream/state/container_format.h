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
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

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

// --- fixed-size arrays (TrackedArray, BlockTrackedArray: the same payloads) ----------------------------------------
// full:  header (tag, version, n), then put_array<T>(the n values).
// delta: header (tag, version, n), then put_array<u32>(indices) and put_array<T>(their values), in the same order.

template <typename T>
constexpr std::uint16_t array_tag() {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>);
  return std::is_same_v<T, std::int64_t> ? kTagArrayInt64 : kTagArrayDouble;
}

// The slots a delta sets and their values (indices < the array's size; an index may repeat, the last value wins).
template <typename T>
struct ArrayDelta {
  std::vector<std::uint32_t> indices;
  std::vector<T> values;
};

template <typename T>
void write_array_full(ByteWriter& w, std::span<const T> values) {
  write_container_header(w, array_tag<T>() | kTagFull, values.size());
  w.put_array<T>(values);
}
// n values stored every 2^shift elements from data (a tracked container's values interleaved with its bookkeeping).
template <typename T>
struct StridedValues {
  const T* data;
  unsigned shift;
  std::size_t n;
  std::size_t size() const { return n; }
  T operator[](std::size_t i) const { return data[i << shift]; }
};
// put_array<T>'s layout (u64 count, then the values) from values stored some other way: anything with size() and a
// T operator[](std::size_t).
template <typename T, typename Values>
void put_array_gathered(ByteWriter& w, const Values& values) {
  const std::size_t n = values.size();
  w.put<std::uint64_t>(n);
  auto& buf = w.buffer();
  const std::size_t off = buf.size();
  buf.resize(off + n * sizeof(T));
  std::uint8_t* out = buf.data() + off;
  for (std::size_t i = 0; i < n; ++i, out += sizeof(T)) {
    const T x = values[i];
    std::memcpy(out, &x, sizeof(T));
  }
}
// A delta of the k slots for_each_index(f) yields (f(u32 index), exactly k calls), written in one pass. Values: a
// span, or anything with size() and a T operator[](std::size_t).
template <typename T, typename Values, typename F>
void write_array_delta(ByteWriter& w, const Values& values, std::size_t k, F&& for_each_index) {
  write_container_header(w, array_tag<T>() | kTagDelta, values.size());
  auto& buf = w.buffer();
  const std::size_t off = buf.size();
  buf.resize(off + 2 * sizeof(std::uint64_t) + k * (sizeof(std::uint32_t) + sizeof(T)));
  std::uint8_t* idx_out = buf.data() + off;
  const std::uint64_t count = k;
  std::memcpy(idx_out, &count, sizeof count);
  idx_out += sizeof count;
  std::uint8_t* val_out = idx_out + k * sizeof(std::uint32_t);
  std::memcpy(val_out, &count, sizeof count);
  val_out += sizeof count;
  for_each_index([&](std::uint32_t i) {
    std::memcpy(idx_out, &i, sizeof i);
    idx_out += sizeof i;
    const T x = values[i];
    std::memcpy(val_out, &x, sizeof(T));
    val_out += sizeof(T);
  });
}

// Reads and checks a full payload for an array of n slots: exactly n values, or FormatError naming what is wrong.
template <typename T>
std::vector<T> read_array_full(ByteReader& r, std::size_t n) {
  const char* what = container_tag_name(array_tag<T>() | kTagFull);
  const std::uint64_t size = read_container_header(r, array_tag<T>() | kTagFull);
  if (size != n) {
    throw FormatError(std::string(what) + ": holds " + std::to_string(size) + " slots but this array has " +
                      std::to_string(n));
  }
  std::vector<T> v = r.get_array<T>(what);
  if (v.size() != n) {
    throw FormatError(std::string(what) + ": header says " + std::to_string(n) + " slots but " +
                      std::to_string(v.size()) + " values follow");
  }
  return v;
}

// Reads and checks a delta payload for an array of n slots (every index in range), or FormatError.
template <typename T>
ArrayDelta<T> read_array_delta(ByteReader& r, std::size_t n) {
  const char* what = container_tag_name(array_tag<T>() | kTagDelta);
  const std::uint64_t size = read_container_header(r, array_tag<T>() | kTagDelta);
  if (size != n) {
    throw FormatError(std::string(what) + ": written for " + std::to_string(size) + " slots but this array has " +
                      std::to_string(n));
  }
  ArrayDelta<T> d{r.get_array<std::uint32_t>(what), r.get_array<T>(what)};
  if (d.indices.size() != d.values.size()) {
    throw FormatError(std::string(what) + ": " + std::to_string(d.indices.size()) + " indices but " +
                      std::to_string(d.values.size()) + " values");
  }
  for (const std::uint32_t i : d.indices) {
    if (i >= n) {
      throw FormatError(std::string(what) + ": slot index " + std::to_string(i) + " out of range (size " +
                        std::to_string(n) + ")");
    }
  }
  return d;
}

}  // namespace afs::detail
