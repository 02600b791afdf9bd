// CRC-32C: the crc32 instruction, eight bytes at a time, where the CPU has SSE4.2; a byte-wise table otherwise.
#include "afstream/store/crc32c.h"

#include <array>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace afs {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78;  // Castagnoli, reflected

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kTable = make_table();

std::uint32_t update_portable(std::uint32_t c, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c = (c >> 8) ^ kTable[(c ^ p[i]) & 0xff];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t update_sse42(std::uint32_t c, const unsigned char* p, std::size_t n) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

bool detect_sse42() {
  __builtin_cpu_init();  // this runs among the static initialisers, perhaps before libgcc's own
  return __builtin_cpu_supports("sse4.2");
}
// Until it is set (calls from other static initialisers), the tables: the same checksums.
const bool kHardware = detect_sse42();
#else
const bool kHardware = false;
#endif

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (kHardware) return ~update_sse42(~crc, p, n);
#endif
  return ~update_portable(~crc, p, n);
}

std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t n) {
  return ~update_portable(~crc, static_cast<const unsigned char*>(data), n);
}

bool crc32c_hardware() { return kHardware; }

namespace {
std::atomic<std::uint64_t> rocksdb_calls{0};
}  // namespace

std::uint64_t rocksdb_crc32c_calls() { return rocksdb_calls.load(std::memory_order_relaxed); }
void count_rocksdb_crc32c_call() { rocksdb_calls.fetch_add(1, std::memory_order_relaxed); }

}  // namespace afs
