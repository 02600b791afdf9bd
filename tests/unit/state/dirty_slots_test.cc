// Unit tests of DirtySlots (afstream/state/dirty_slots.h): remember keeps a slot's value at its first change, clear
// makes every slot clean in either regime, and insert_clean restores a list of entries all or none (an
// index already dirty or given twice leaves the slots as they were), against a brute-force map.
#include "afstream/state/dirty_slots.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace afs {
namespace {

// The slots as a map from index to backed-up value, in the order they became dirty.
std::vector<std::pair<std::uint32_t, double>> listed(const DirtySlots<double>& d) {
  std::vector<std::pair<std::uint32_t, double>> v;
  for (std::size_t k = 0; k < d.count(); ++k) v.emplace_back(d.indices()[k], d.bases()[k]);
  return v;
}

// Slot i's remembered value after remember(i, current): current if it was clean (a search of the list: the class
// itself never looks a value up by slot).
double base_for(DirtySlots<double>& d, std::uint32_t i, double current) {
  if (d.remember(i, current)) return current;
  for (std::size_t k = 0; k < d.count(); ++k) {
    if (d.indices()[k] == i) return d.bases()[k];
  }
  ADD_FAILURE() << "slot " << i << " is dirty but not listed";
  return 0;
}

TEST(DirtySlots, BaseForRemembersTheValueAtTheFirstChange) {
  DirtySlots<double> d(10);
  EXPECT_EQ(base_for(d, 3, 1.5), 1.5);
  EXPECT_EQ(base_for(d, 3, 9.0), 1.5);
  EXPECT_EQ(base_for(d, 7, -2.0), -2.0);
  EXPECT_TRUE(d.is_dirty(3));
  EXPECT_FALSE(d.is_dirty(4));
  EXPECT_EQ(d.count(), 2u);
  d.clear();
  EXPECT_EQ(d.count(), 0u);
  EXPECT_FALSE(d.is_dirty(3));
  EXPECT_EQ(base_for(d, 3, 4.0), 4.0);
}

TEST(DirtySlots, RememberTellsWhetherTheSlotWasClean) {
  DirtySlots<double> d(10);
  EXPECT_TRUE(d.remember(3, 1.5));
  EXPECT_FALSE(d.remember(3, 9.0));  // keeps 1.5
  EXPECT_TRUE(d.remember(7, -2.0));
  EXPECT_EQ(listed(d), (std::vector<std::pair<std::uint32_t, double>>{{3, 1.5}, {7, -2.0}}));
  d.clear();
  EXPECT_TRUE(d.remember(3, 4.0));
}

TEST(DirtySlots, ClearCleansEverySlotInBothRegimes) {
  for (const std::size_t dirty : {5u, 900u}) {  // sparse (<= one per word: bit by bit) and dense (a fill)
    DirtySlots<double> d(1000);
    std::mt19937_64 rng(dirty);
    for (std::size_t k = 0; k < dirty; ++k) (void)d.remember(rng() % 1000, 1.0);
    d.clear();
    for (std::size_t i = 0; i < 1000; ++i) ASSERT_FALSE(d.is_dirty(i)) << dirty << " slot " << i;
  }
}

TEST(DirtySlots, InsertCleanAddsEveryEntryOrNone) {
  const std::size_t n = 1 << 16;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    DirtySlots<double> d(n);
    std::map<std::uint32_t, double> truth;
    for (int k = 0; k < 200; ++k) {
      const auto i = static_cast<std::uint32_t>(rng() % n);
      truth.emplace(i, base_for(d, i, static_cast<double>(k)));
    }
    // A batch of fresh entries (and, in half the rounds, one that is dirty already or given twice).
    std::vector<std::uint32_t> idx;
    std::vector<double> base;
    std::map<std::uint32_t, double> batch;
    while (idx.size() < 500) {
      const auto i = static_cast<std::uint32_t>(rng() % n);
      if (truth.count(i) || batch.count(i)) continue;
      batch.emplace(i, -static_cast<double>(idx.size()));
      idx.push_back(i);
      base.push_back(-static_cast<double>(idx.size() - 1));
    }
    std::size_t bad = idx.size();
    if (round % 2 == 1) {  // position bad >= 1 names a dirty slot, or repeats an earlier entry of the batch
      bad = 1 + rng() % (idx.size() - 1);
      idx[bad] = round % 4 == 1 ? truth.begin()->first : idx[rng() % bad];
    }
    const auto before = listed(d);
    const std::size_t got = d.insert_clean(idx, base);
    EXPECT_EQ(got, bad) << "round " << round;
    if (got < idx.size()) {
      EXPECT_EQ(listed(d), before) << "round " << round << ": a refused batch left entries behind";
      for (const auto i : idx) EXPECT_EQ(d.is_dirty(i), truth.count(i) == 1) << "round " << round;
      continue;
    }
    for (const auto& [i, b] : batch) truth.emplace(i, b);
    ASSERT_EQ(d.count(), truth.size());
    for (const auto& [i, b] : truth) {
      ASSERT_TRUE(d.is_dirty(i));
      EXPECT_EQ(base_for(d, i, 1e9), b) << "round " << round << " slot " << i;
    }
  }
}

}  // namespace
}  // namespace afs
