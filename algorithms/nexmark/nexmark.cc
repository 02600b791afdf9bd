// NEXMark-style event generator: the epoch layout, the id arithmetic and the counter-based random choices.
#include "algorithms/nexmark/nexmark.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "afstream/core/errors.h"
#include "algorithms/heavy_hitters/count_min.h"  // internal::mix64, internal::mul_high

namespace afs::nexmark {

namespace {

using hh::internal::mix64;
using hh::internal::mul_high;

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // splitmix64 increment
constexpr std::uint64_t kStreamSalt = 0x6a09e667f3bcc909ULL;
constexpr std::uint64_t kHotPersonSpan = 100;  // Beam's HOT_SELLER_RATIO / HOT_BIDDER_RATIO
constexpr std::uint64_t kCategories = 5;

// The fixed tables of Beam's person generator.
constexpr std::array<std::string_view, 11> kFirstNames = {"Peter", "Paul",  "Luke",  "John",   "Saul",  "Vicky",
                                                          "Kate",  "Julie", "Sarah", "Deiter", "Walter"};
constexpr std::array<std::string_view, 9> kLastNames = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
                                                        "Walton", "Smith",  "Jones",   "Noris"};
constexpr std::array<std::string_view, 10> kCities = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
                                                      "Bend",    "Redmond",     "Seattle",       "Kent",  "Cheyenne"};
constexpr std::array<std::string_view, 6> kStates = {"AZ", "CA", "ID", "OR", "WA", "WY"};

// The random words of one event: a splitmix64 sequence started from a word keyed by (seed, event index). Every event
// kind draws its words in a fixed order, so an event does not depend on how its neighbours were generated.
class EventRandom {
 public:
  EventRandom(std::uint64_t base, std::uint64_t n) : state_(mix64(base + (n + 1) * kGolden)) {}
  std::uint64_t next() {
    state_ += kGolden;
    return mix64(state_);
  }
  std::uint64_t below(std::uint64_t m) { return mul_high(next(), m); }     // uniform in [0, m) for m >= 1
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // uniform in [0, 1)

 private:
  std::uint64_t state_;
};

// Beam's price generator: 10^(6u) dollars in cents, 100 .. 100'000'000, log-uniform.
std::int64_t next_price(EventRandom& r) { return std::llround(std::pow(10.0, r.unit() * 6.0) * 100.0); }

// A person id among the `count` existing ones (count >= 1): with P = 1 - 1/hot_ratio the hot one (the newest id
// rounded down to a multiple of 100, plus `hot_offset` so hot sellers and hot bidders differ, capped at the newest),
// otherwise one of the newest `active`.
std::uint64_t pick_person(EventRandom& r, std::uint64_t count, std::uint64_t hot_ratio, std::uint64_t hot_offset,
                          std::uint64_t active) {
  const std::uint64_t newest = count - 1;
  const bool hot = r.below(hot_ratio) > 0;
  const std::uint64_t other = newest - r.below(std::min(active, count));
  if (hot) return std::min(newest / kHotPersonSpan * kHotPersonSpan + hot_offset, newest);
  return other;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError("nexmark: " + message);
}

}  // namespace

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::Person:
      return "person";
    case EventKind::Auction:
      return "auction";
    case EventKind::Bid:
      return "bid";
  }
  return "unknown";
}

Generator::Generator(const NexmarkParams& params) : params_(params) {
  const auto& p = params;
  require(p.person_proportion >= 1, "person proportion must be >= 1 (auctions need a seller), got 0");
  require(p.auction_proportion >= 1, "auction proportion must be >= 1 (bids need an auction), got 0");
  require(p.person_proportion <= kMaxEpoch && p.auction_proportion <= kMaxEpoch && p.bid_proportion <= kMaxEpoch &&
              p.person_proportion + p.auction_proportion + p.bid_proportion <= kMaxEpoch,
          "person + auction + bid proportions must be at most " + std::to_string(kMaxEpoch));
  require(p.hot_auction_ratio >= 1, "hot auction ratio must be >= 1 (1: no hot auction), got 0");
  require(p.hot_auction_span >= 1, "hot auction span must be >= 1, got 0");
  require(p.hot_seller_ratio >= 1, "hot seller ratio must be >= 1, got 0");
  require(p.hot_bidder_ratio >= 1, "hot bidder ratio must be >= 1, got 0");
  require(p.active_persons >= 1, "active persons must be >= 1, got 0");
  require(p.in_flight_auctions < std::numeric_limits<std::uint64_t>::max(), "in-flight auctions is too large");
  require(p.events_per_second >= 1, "events per second must be >= 1, got 0");
  require(p.events <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
          "events " + std::to_string(p.events) + " exceeds INT64_MAX");
  epoch_ = p.person_proportion + p.auction_proportion + p.bid_proportion;
  stream_base_ = mix64(p.seed ^ kStreamSalt);
}

EventKind Generator::kind_at(std::uint64_t n) const {
  const std::uint64_t offset = n % epoch_;
  if (offset < params_.person_proportion) return EventKind::Person;
  if (offset < params_.person_proportion + params_.auction_proportion) return EventKind::Auction;
  return EventKind::Bid;
}

std::int64_t Generator::time_at(std::uint64_t n) const {
  // 64-bit arithmetic while n * 1e6 fits (n < 1.8e13), 128-bit beyond.
  if (n < std::numeric_limits<std::uint64_t>::max() / 1'000'000u) {
    return static_cast<std::int64_t>(n * 1'000'000u / params_.events_per_second);
  }
  const unsigned __int128 us = static_cast<unsigned __int128>(n) * 1'000'000u / params_.events_per_second;
  return us > static_cast<unsigned __int128>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(us);
}

std::uint64_t Generator::persons_before(std::uint64_t n) const {
  return n / epoch_ * params_.person_proportion + std::min(n % epoch_, params_.person_proportion);
}

std::uint64_t Generator::auctions_before(std::uint64_t n) const {
  const std::uint64_t offset = n % epoch_;
  const std::uint64_t in_epoch = offset <= params_.person_proportion
                                     ? 0
                                     : std::min(offset - params_.person_proportion, params_.auction_proportion);
  return n / epoch_ * params_.auction_proportion + in_epoch;
}

std::uint64_t Generator::bids_before(std::uint64_t n) const {
  const std::uint64_t offset = n % epoch_;
  const std::uint64_t first_bid = params_.person_proportion + params_.auction_proportion;
  return n / epoch_ * params_.bid_proportion + (offset > first_bid ? offset - first_bid : 0);
}

std::uint64_t Generator::bid_index(std::uint64_t b) const {
  const std::uint64_t bids = params_.bid_proportion;
  if (bids == 0) throw ConfigError("nexmark: bid_index needs bid proportion >= 1");
  return b / bids * epoch_ + params_.person_proportion + params_.auction_proportion + b % bids;
}

Person Generator::person_at(std::uint64_t n) const {
  EventRandom r(stream_base_, n);
  Person p;
  p.id = persons_before(n);
  p.first_name = kFirstNames[r.below(kFirstNames.size())];
  p.last_name = kLastNames[r.below(kLastNames.size())];
  p.city = kCities[r.below(kCities.size())];
  p.state = kStates[r.below(kStates.size())];
  p.time = time_at(n);
  return p;
}

Auction Generator::auction_at(std::uint64_t n) const {
  EventRandom r(stream_base_, n);
  Auction a;
  a.id = auctions_before(n);
  a.seller = pick_person(r, persons_before(n), params_.hot_seller_ratio, 0, params_.active_persons);
  a.category = r.below(kCategories);
  a.initial_bid = next_price(r);
  a.reserve = a.initial_bid + next_price(r);
  a.time = time_at(n);
  // Open about as long as it takes in_flight_auctions more auctions to open (times 0.5 .. 1.5), at least 1 us.
  const double events_open = static_cast<double>(params_.in_flight_auctions + 1) * static_cast<double>(epoch_) /
                             static_cast<double>(params_.auction_proportion);
  const double us_open = events_open * 1e6 / static_cast<double>(params_.events_per_second) * (0.5 + r.unit());
  a.expires = a.time + std::max<std::int64_t>(1, static_cast<std::int64_t>(std::min(us_open, 1e18)));
  return a;
}

namespace {
// The auction of the bid at n: the first two words of the bid's random sequence.
std::uint64_t draw_bid_auction(EventRandom& r, std::uint64_t auctions, const NexmarkParams& p) {
  const std::uint64_t newest = auctions - 1;  // auctions >= 1: every epoch's bids follow its auctions
  const bool hot = r.below(p.hot_auction_ratio) > 0;
  const std::uint64_t other = newest - r.below(std::min(p.in_flight_auctions + 1, auctions));
  return hot ? newest / p.hot_auction_span * p.hot_auction_span : other;
}
}  // namespace

std::uint64_t Generator::bid_auction_at(std::uint64_t n) const {
  EventRandom r(stream_base_, n);
  return draw_bid_auction(r, auctions_before(n), params_);
}

Bid Generator::bid_at(std::uint64_t n) const {
  EventRandom r(stream_base_, n);
  Bid b;
  b.auction = draw_bid_auction(r, auctions_before(n), params_);
  b.bidder = pick_person(r, persons_before(n), params_.hot_bidder_ratio, 1, params_.active_persons);
  b.price = next_price(r);
  b.time = time_at(n);
  return b;
}

Event Generator::event_at(std::uint64_t n) const {
  Event e;
  e.index = n;
  e.time = time_at(n);
  switch (kind_at(n)) {
    case EventKind::Person:
      e.body = person_at(n);
      break;
    case EventKind::Auction:
      e.body = auction_at(n);
      break;
    case EventKind::Bid:
      e.body = bid_at(n);
      break;
  }
  return e;
}

std::unordered_map<std::uint64_t, std::int64_t> Generator::exact_bid_counts(std::uint64_t n) const {
  if (n > params_.events) {
    throw ConfigError("nexmark: exact_bid_counts: prefix " + std::to_string(n) + " exceeds the stream's " +
                      std::to_string(params_.events) + " events");
  }
  std::unordered_map<std::uint64_t, std::int64_t> counts;
  const std::uint64_t bids = bids_before(n);
  for (std::uint64_t b = 0; b < bids; ++b) ++counts[bid_auction_at(bid_index(b))];
  return counts;
}

}  // namespace afs::nexmark
