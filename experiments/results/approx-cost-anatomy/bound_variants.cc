// Count-Min 4 x 8000 with packet weights on Zipf(0.9) keys over 1e6 keys, per item: mode none's counter updates
// against ways of keeping each counter's bound (its distance from the last backup) as approx mode needs it.
// A standalone model of count-min-hh's hot loop (afstream/state/block_tracked_array.h), not the engine's code.
// Build and run: g++ -O2 -march=native -std=c++20 bound_variants.cc -o bound_variants && ./bound_variants [ROUNDS]
// Variants (the backup: every time the highest bound passes 2 x 25,000, the bounds of the counters listed as having
// passed 25,000 go back to 0 and the high-water mark to 25,000, as a partial delta leaves them):
//   0 none: the counters alone
//   1 as BlockTrackedArray<int64> with blocks of one: 32-bit bounds in an array of their own, saturating add, the
//     crossing list for partial deltas, the high-water mark
//   2 the same with the four bounds of an item gathered, added and scattered as one AVX-512 vector
//   3 each bound in the low 16 bits of its counter's word (the value in the high 48): no memory beyond none's
//   4 the bounds' adds alone (no checks, no backups): what the extra memory costs
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {
using u64 = std::uint64_t;
using i64 = std::int64_t;
using u32 = std::uint32_t;
constexpr int kDepth = 4, kWidth = 8000, kItems = 1 << 20;
constexpr u64 kWatch = 25000, kTrigger = 50000;
struct Item {
  u64 key;
  i64 w;
};
u32 bucket(int r, u64 k) {
  u64 h = (k ^ (0x9E3779B97F4A7C15ull * static_cast<u64>(r + 1))) * 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<u32>(((h >> 32) * kWidth) >> 32) + static_cast<u32>(r * kWidth);
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  std::mt19937_64 g(1);
  const int keys = 1000000;
  std::vector<double> cdf(keys);
  double s = 0;
  for (int i = 0; i < keys; ++i) cdf[i] = s += std::pow(i + 1, -0.9);
  std::vector<Item> items(kItems);
  std::uniform_real_distribution<double> u(0, s);
  std::uniform_int_distribution<int> weight(40, 1500);
  for (auto& it : items) {
    it.key = static_cast<u64>(std::lower_bound(cdf.begin(), cdf.end(), u(g)) - cdf.begin()) * 0x9E3779B97F4A7C15ull;
    it.w = weight(g);
  }
  std::vector<i64> c(kDepth * kWidth);
  std::vector<u32> b(kDepth * kWidth), crossed(kDepth * kWidth + 16);
  std::vector<u64> packed(kDepth * kWidth);
  constexpr int kPasses = 20;
  for (int round = 0; round < rounds; ++round) {
    for (int v = 0; v < 5; ++v) {
      std::fill(c.begin(), c.end(), 0);
      std::fill(b.begin(), b.end(), 0);
      std::fill(packed.begin(), packed.end(), 0);
      u64 high = 0, backups = 0;
      std::size_t nc = 0;
      i64 sum = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int pass = 0; pass < kPasses; ++pass) {
        for (const Item& it : items) {
          alignas(16) u32 sl[kDepth];
          for (int d = 0; d < kDepth; ++d) sl[d] = bucket(d, it.key);
          i64 est = INT64_MAX;
          if (v == 3) {
            for (int d = 0; d < kDepth; ++d) {
              u64 word = packed[sl[d]];
              const u64 before = word & 0xffff;
              u64 next = before + static_cast<u64>(it.w);
              if (next > 0xffff) [[unlikely]] {
                word = (word | 0xffff) + (static_cast<u64>(it.w) << 16);
                next = 0xffff;
              } else {
                word += (static_cast<u64>(it.w) << 16) + static_cast<u64>(it.w);
              }
              packed[sl[d]] = word;
              if ((before <= kWatch) & (next > kWatch)) [[unlikely]]
                crossed[nc++] = sl[d];
              if (next > high) [[unlikely]]
                high = next;
              est = std::min(est, static_cast<i64>(word >> 16));
            }
          } else {
            for (int d = 0; d < kDepth; ++d) c[sl[d]] += it.w;
            if (v == 1) {
              for (int d = 0; d < kDepth; ++d) {
                const u64 before = b[sl[d]];
                const u64 next = before + static_cast<u64>(it.w);
                b[sl[d]] = static_cast<u32>(std::min<u64>(next, 0xffffffffu));
                if ((before <= kWatch) & (next > kWatch)) [[unlikely]]
                  crossed[nc++] = sl[d];
                if (next > high) [[unlikely]]
                  high = next;
              }
            } else if (v == 2) {
              const __m128i idx = _mm_load_si128(reinterpret_cast<const __m128i*>(sl));
              const __m128i before = _mm_i32gather_epi32(reinterpret_cast<const int*>(b.data()), idx, 4);
              const __m128i sum = _mm_add_epi32(before, _mm_set1_epi32(static_cast<int>(it.w)));
              const __m128i next = _mm_mask_mov_epi32(sum, _mm_cmplt_epu32_mask(sum, before), _mm_set1_epi32(-1));
              _mm_i32scatter_epi32(b.data(), idx, next, 4);
              const __m128i watch = _mm_set1_epi32(static_cast<int>(kWatch));
              const __m128i hv = _mm_set1_epi32(static_cast<int>(std::min<u64>(high, 0x7fffffff)));
              const __mmask8 m = _mm_cmpgt_epu32_mask(next, hv) |
                                 (_mm_cmple_epu32_mask(before, watch) & _mm_cmpgt_epu32_mask(next, watch));
              if (m) [[unlikely]] {
                alignas(16) u32 bb[4], nn[4];
                _mm_store_si128(reinterpret_cast<__m128i*>(bb), before);
                _mm_store_si128(reinterpret_cast<__m128i*>(nn), next);
                for (int d = 0; d < kDepth; ++d) {
                  if ((bb[d] <= kWatch) & (nn[d] > kWatch)) crossed[nc++] = sl[d];
                  high = std::max<u64>(high, nn[d]);
                }
              }
            } else if (v == 4) {
              for (int d = 0; d < kDepth; ++d) b[sl[d]] += static_cast<u32>(it.w);
            }
            for (int d = 0; d < kDepth; ++d) est = std::min(est, c[sl[d]]);
          }
          if (high > kTrigger) {
            ++backups;
            for (std::size_t k = 0; k < nc; ++k) {
              if (v == 3) {
                packed[crossed[k]] &= ~u64{0xffff};
              } else {
                b[crossed[k]] = 0;
              }
            }
            nc = 0;
            high = kWatch;
          }
          sum += est;
        }
      }
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                        (static_cast<double>(kPasses) * kItems);
      std::printf("round %d variant %d: %.2f ns/item, %llu backups (checksum %lld)\n", round, v, ns,
                  static_cast<unsigned long long>(backups), static_cast<long long>(sum % 1000));
    }
  }
}
