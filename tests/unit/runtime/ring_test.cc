// Ring: the worker's growing FIFO (afstream/runtime/ring.h): order across growth and wrap-around, bulk pops, and
// the contiguous runs that batches are sent from without a copy.
#include "afstream/runtime/ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>

namespace afs {
namespace {

TEST(Ring, MatchesADequeThroughGrowthWrapAroundAndBulkPops) {
  Ring<std::uint64_t> ring;
  std::deque<std::uint64_t> ref;
  std::mt19937_64 rng(3);
  std::uint64_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto push = rng() % 40;
    for (std::uint64_t i = 0; i < push; ++i) {
      ring.push_back(next);
      ref.push_back(next++);
    }
    const auto pop = ref.empty() ? 0 : rng() % (ref.size() + 1);
    if (pop == 1) {
      ring.pop_front();
    } else {
      ring.pop_front(pop);
    }
    ref.erase(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(pop));
    ASSERT_EQ(ring.size(), ref.size());
    if (!ref.empty()) {
      ASSERT_EQ(ring.front(), ref.front());
    }
    // Any range is covered by at most two contiguous runs, in order.
    if (ref.empty()) continue;
    const std::size_t from = rng() % ref.size();
    const std::size_t n = 1 + rng() % (ref.size() - from);
    std::size_t got = 0;
    for (int part = 0; part < 2 && got < n; ++part) {
      const auto run = ring.contiguous(from + got, n - got);
      ASSERT_FALSE(run.empty());
      for (std::size_t i = 0; i < run.size(); ++i) ASSERT_EQ(run[i], ref[from + got + i]);
      got += run.size();
    }
    ASSERT_EQ(got, n) << "step " << step;
  }
}

}  // namespace
}  // namespace afs
