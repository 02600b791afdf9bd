// Unit tests of the NEXMark generator (afs::nexmark::Generator) and the `nexmark` source: determinism per seed, the
// epoch proportions, ids that grow with the stream and bids that name existing auctions and persons, random access
// equal to sequential generation, the hot-auction skew, the exact bid counts, and parameter validation.
#include "algorithms/nexmark/nexmark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "afstream/core/errors.h"
#include "algorithms/nexmark/nexmark_source.h"
#include "tests/error_message.h"

namespace afs::nexmark {
namespace {

using afs::testing::expect_throw_mentioning;

std::vector<Event> sequential(const Generator& gen) {
  std::vector<Event> v;
  v.reserve(gen.events());
  for (std::uint64_t n = 0; n < gen.events(); ++n) v.push_back(gen.event_at(n));
  return v;
}

TEST(NexmarkGenerator, SameSeedSameStreamOtherSeedOtherBids) {
  const Generator a({.events = 20'000, .seed = 7}), b({.events = 20'000, .seed = 7}), c({.events = 20'000, .seed = 8});
  const auto ea = sequential(a), eb = sequential(b), ec = sequential(c);
  EXPECT_EQ(ea, eb);
  std::size_t differing_bids = 0, bids = 0;
  for (std::size_t n = 0; n < ea.size(); ++n) {
    EXPECT_EQ(ea[n].kind(), ec[n].kind());  // the layout does not depend on the seed
    if (ea[n].kind() != EventKind::Bid) continue;
    ++bids;
    differing_bids += std::get<Bid>(ea[n].body) != std::get<Bid>(ec[n].body);
  }
  EXPECT_EQ(bids, 18'400u);
  EXPECT_GT(differing_bids, bids * 9 / 10);  // prices alone differ almost always
}

TEST(NexmarkGenerator, DefaultProportionsAreOnePersonThreeAuctionsFortySixBidsPerFifty) {
  const Generator gen({.events = 100'000, .seed = 1});
  std::uint64_t count[3] = {0, 0, 0};
  for (std::uint64_t n = 0; n < gen.events(); ++n) ++count[static_cast<int>(gen.kind_at(n))];
  EXPECT_EQ(count[0], 2'000u);
  EXPECT_EQ(count[1], 6'000u);
  EXPECT_EQ(count[2], 92'000u);
  EXPECT_EQ(gen.persons_before(gen.events()), 2'000u);
  EXPECT_EQ(gen.auctions_before(gen.events()), 6'000u);
  EXPECT_EQ(gen.bids_before(gen.events()), 92'000u);
}

TEST(NexmarkGenerator, CustomProportionsHoldInEveryPrefix) {
  const Generator gen(
      {.events = 10'007, .seed = 3, .person_proportion = 2, .auction_proportion = 5, .bid_proportion = 13});
  EXPECT_EQ(gen.epoch_size(), 20u);
  std::uint64_t persons = 0, auctions = 0, bids = 0;
  for (std::uint64_t n = 0; n < gen.events(); ++n) {
    ASSERT_EQ(gen.persons_before(n), persons) << n;
    ASSERT_EQ(gen.auctions_before(n), auctions) << n;
    ASSERT_EQ(gen.bids_before(n), bids) << n;
    switch (gen.kind_at(n)) {
      case EventKind::Person:
        ++persons;
        break;
      case EventKind::Auction:
        ++auctions;
        break;
      case EventKind::Bid:
        ASSERT_EQ(gen.bid_index(bids), n);
        ++bids;
        break;
    }
  }
  // 500 whole epochs and 7 events of the next: 2 persons and 5 auctions.
  EXPECT_EQ(persons, 1'002u);
  EXPECT_EQ(auctions, 2'505u);
  EXPECT_EQ(bids, 6'500u);
  // Within tolerance of the nominal shares over the whole stream.
  EXPECT_NEAR(static_cast<double>(bids) / static_cast<double>(gen.events()), 13.0 / 20, 1e-3);
}

TEST(NexmarkGenerator, IdsGrowAndBidsReferenceExistingAuctionsAndPersons) {
  const NexmarkParams p{.events = 50'000, .seed = 11};
  const Generator gen(p);
  std::uint64_t next_person = 0, next_auction = 0;
  std::int64_t last_time = -1;
  for (std::uint64_t n = 0; n < gen.events(); ++n) {
    const Event e = gen.event_at(n);
    ASSERT_EQ(e.index, n);
    ASSERT_GE(e.time, last_time);
    last_time = e.time;
    if (const auto* person = std::get_if<Person>(&e.body)) {
      ASSERT_EQ(person->id, next_person++);
      EXPECT_FALSE(person->first_name.empty());
      EXPECT_FALSE(person->city.empty());
    } else if (const auto* auction = std::get_if<Auction>(&e.body)) {
      ASSERT_EQ(auction->id, next_auction++);
      ASSERT_LT(auction->seller, next_person);
      EXPECT_LT(auction->category, 5u);
      EXPECT_GT(auction->reserve, auction->initial_bid);
      EXPECT_GT(auction->expires, auction->time);
    } else {
      const Bid& bid = std::get<Bid>(e.body);
      ASSERT_LT(bid.auction, next_auction) << n;  // an auction that exists
      ASSERT_LT(bid.bidder, next_person) << n;
      // Hot (a multiple of the span, at most the newest) or one of the newest in-flight + 1 auctions.
      const bool hot = bid.auction == (next_auction - 1) / p.hot_auction_span * p.hot_auction_span;
      ASSERT_TRUE(hot || bid.auction + p.in_flight_auctions + 1 >= next_auction) << n;
      ASSERT_GE(bid.price, 100);
      ASSERT_LE(bid.price, 100'000'000);
      ASSERT_EQ(bid.time, e.time);
    }
  }
  EXPECT_EQ(last_time, gen.time_at(49'999));
  EXPECT_EQ(gen.time_at(10'000), 1'000'000);  // 10'000 events per second by default
}

TEST(NexmarkGenerator, RandomAccessEqualsSequential) {
  const Generator gen({.events = 30'000, .seed = 5, .hot_auction_ratio = 3});
  const auto seq = sequential(gen);
  std::vector<std::uint64_t> order(gen.events());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  for (const auto n : order) {
    ASSERT_EQ(gen.event_at(n), seq[n]) << n;
    if (seq[n].kind() == EventKind::Bid) {
      ASSERT_EQ(gen.bid_auction_at(n), std::get<Bid>(seq[n].body).auction);
    }
  }
  // A second generator built later gives the same events (no hidden state).
  const Generator again({.events = 30'000, .seed = 5, .hot_auction_ratio = 3});
  EXPECT_EQ(again.event_at(29'999), seq[29'999]);
}

// The hot-auction skew: about 1 - 1/ratio of the bids (plus the in-flight draws that happen to hit it) go to the
// hot auction, and over the whole stream exactly the multiples of the span collect many bids.
TEST(NexmarkGenerator, HotAuctionRatioSkewsTheBids) {
  for (const std::uint64_t ratio : {2u, 4u}) {
    const NexmarkParams p{.events = 100'000, .seed = 9, .hot_auction_ratio = ratio};
    const Generator gen(p);
    std::uint64_t on_hot = 0;
    const std::uint64_t bids = gen.bids_before(gen.events());
    for (std::uint64_t b = 0; b < bids; ++b) {
      const auto n = gen.bid_index(b);
      on_hot += gen.bid_auction_at(n) == (gen.auctions_before(n) - 1) / p.hot_auction_span * p.hot_auction_span;
    }
    const double hot_share = 1.0 - 1.0 / static_cast<double>(ratio);
    const double expected = hot_share + (1 - hot_share) / static_cast<double>(p.in_flight_auctions + 1);
    EXPECT_NEAR(static_cast<double>(on_hot) / static_cast<double>(bids), expected, 0.01) << ratio;
  }
  // Ratio 1: no hot auction; bids spread over the in-flight window, about 46 * (101 / 3) / 101 ~ 15 per auction once
  // the window is full (the first auctions share a smaller window: auction 0 gets ~ 15 * H(33) ~ 63).
  const Generator flat({.events = 100'000, .seed = 9, .hot_auction_ratio = 1});
  std::int64_t most = 0, most_steady = 0;
  for (const auto& [auction, c] : flat.exact_bid_counts(flat.events())) {
    most = std::max(most, c);
    if (auction >= 200) most_steady = std::max(most_steady, c);
  }
  EXPECT_LT(most, 100);
  EXPECT_LT(most_steady, 40);
  // Ratio 2 (default): the auctions with over 300 bids are exactly the multiples of 100 whose span is complete.
  const Generator gen({.events = 100'000, .seed = 9});
  std::vector<std::uint64_t> heavy;
  for (const auto& [auction, c] : gen.exact_bid_counts(gen.events())) {
    if (c > 300) heavy.push_back(auction);
  }
  std::sort(heavy.begin(), heavy.end());
  std::vector<std::uint64_t> expected;
  for (std::uint64_t a = 0; a + 100 <= gen.auctions_before(gen.events()); a += 100) expected.push_back(a);
  EXPECT_EQ(heavy, expected);
}

TEST(NexmarkGenerator, ExactBidCountsEqualBruteForceOnEveryPrefix) {
  const Generator gen({.events = 20'000, .seed = 4});
  std::unordered_map<std::uint64_t, std::int64_t> brute;
  for (std::uint64_t n = 0; n <= gen.events(); ++n) {
    if (n % 4'999 == 0 || n == gen.events()) {
      ASSERT_EQ(gen.exact_bid_counts(n), brute) << n;
    }
    if (n < gen.events() && gen.kind_at(n) == EventKind::Bid) ++brute[std::get<Bid>(gen.event_at(n).body).auction];
  }
  std::int64_t total = 0;
  for (const auto& [a, c] : brute) total += c;
  EXPECT_EQ(total, 18'400);
  expect_throw_mentioning<ConfigError>([&] { (void)gen.exact_bid_counts(20'001); }, "exceeds the stream's 20000");
}

TEST(NexmarkGenerator, BadParametersAreConfigErrorsNamingThem) {
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .person_proportion = 0}); }, "person proportion");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .auction_proportion = 0}); },
                                       "auction proportion");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .bid_proportion = 2'000'000}); }, "at most");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .hot_auction_ratio = 0}); }, "hot auction ratio");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .hot_auction_span = 0}); }, "hot auction span");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = 10, .events_per_second = 0}); }, "events per second");
  expect_throw_mentioning<ConfigError>([] { Generator({.events = ~0ULL}); }, "INT64_MAX");
  const Generator no_bids({.events = 10, .bid_proportion = 0});
  EXPECT_EQ(no_bids.bids_before(10), 0u);
  expect_throw_mentioning<ConfigError>([&] { (void)no_bids.bid_index(0); }, "bid proportion");
}

// The source: bids as (auction, 1 or price, time); parallel instances partition the bid stream; any chunking reads
// the same items; kinds=all carries every event with its kind.
TEST(NexmarkSource, BidsAreKeyedByAuctionAndInstancesPartitionTheStream) {
  const Params p{{"events", "20000"}, {"seed", "3"}};
  NexmarkSource whole(p, {0, 1});
  const Generator& gen = whole.generator();
  ASSERT_EQ(whole.size(), 18'400u);
  EXPECT_EQ(NexmarkSource::total_items(p), 18'400u);
  std::vector<Item> all(whole.size());
  ASSERT_EQ(whole.read(0, all.data(), all.size()), all.size());
  for (std::uint64_t b = 0; b < all.size(); ++b) {
    const Bid bid = gen.bid_at(gen.bid_index(b));
    ASSERT_EQ(all[b], (Item{bid.auction, 1, bid.time, 0})) << b;
  }
  std::vector<Item> joined;
  for (int i = 0; i < 3; ++i) {
    NexmarkSource part(p, {i, 3});
    std::vector<Item> chunk(977);
    for (std::uint64_t off = 0;;) {
      const auto got = part.read(off, chunk.data(), chunk.size());
      if (got == 0) break;
      joined.insert(joined.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
      off += got;
    }
  }
  EXPECT_EQ(joined, all);

  Params priced = p;
  priced.set("value", "price");
  NexmarkSource prices(priced, {0, 1});
  Item it;
  ASSERT_EQ(prices.read(123, &it, 1), 1u);
  EXPECT_EQ(it.value, gen.bid_at(gen.bid_index(123)).price);
  EXPECT_EQ(it.key, all[123].key);
}

TEST(NexmarkSource, AllKindsCarryTheKindAndPayload) {
  Params p{{"events", "1000"}, {"seed", "2"}, {"kinds", "all"}};
  NexmarkSource src(p, {0, 1});
  const Generator& gen = src.generator();
  ASSERT_EQ(src.size(), 1000u);
  std::vector<Item> items(1000);
  ASSERT_EQ(src.read(0, items.data(), items.size()), 1000u);
  for (std::uint64_t n = 0; n < items.size(); ++n) {
    const Event e = gen.event_at(n);
    ASSERT_EQ(item_kind(items[n]), e.kind()) << n;
    ASSERT_EQ(items[n].time, e.time);
    if (const auto* person = std::get_if<Person>(&e.body)) {
      EXPECT_EQ(items[n].key, person->id);
      EXPECT_EQ(item_payload(items[n]), 0);
    } else if (const auto* auction = std::get_if<Auction>(&e.body)) {
      EXPECT_EQ(items[n].key, auction->id);
      EXPECT_EQ(item_payload(items[n]), static_cast<std::int64_t>(auction->seller));
    } else {
      EXPECT_EQ(items[n].key, std::get<Bid>(e.body).auction);
      EXPECT_EQ(item_payload(items[n]), 1);
    }
  }
  p.set("kinds", "persons");
  expect_throw_mentioning<ConfigError>([&] { NexmarkSource(p, {0, 1}); }, "kinds: expected bids or all");
  p.set("kinds", "bids").set("value", "weight");
  expect_throw_mentioning<ConfigError>([&] { NexmarkSource(p, {0, 1}); }, "value: expected count or price");
}

TEST(NexmarkSource, IsRegisteredAsNexmark) {
  Registry r;
  register_nexmark(r);
  auto src = r.make_source("nexmark", Params{{"events", "500"}}, {0, 1});
  EXPECT_EQ(src->size(), 460u);
}

}  // namespace
}  // namespace afs::nexmark
