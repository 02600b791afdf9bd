// NEXMark-style auction events (Tucker et al., "NEXMark -- a benchmark for queries over data streams"; the generator
// of Apache Beam's NEXMark suite), as a seeded, seekable stream: the event at index n depends only on (params, n), so
// any range can be produced or replayed on its own, like the Zipf generator (algorithms/heavy_hitters/zipf.h). Used
// by the `nexmark` source and the hot-items job (issue 4, item 5: a heavy-hitter job over the bids, PAPER Theorem 2).
//
// The stream is cut into epochs of P + A + B events (the proportions, by default 1 : 3 : 46 per 50 events): in each
// epoch come P persons, then A auctions, then B bids. Person and auction ids are 0-based and grow with the stream
// (the k-th person has id k), so the ids of an epoch follow from the event index alone. A bid goes with probability
// 1 - 1/hot_auction_ratio to the *hot* auction (the newest auction id rounded down to a multiple of
// hot_auction_span), otherwise to an auction drawn uniformly from the newest in_flight_auctions + 1; bidders and
// sellers are chosen the same way among persons (hot_bidder_ratio, hot_seller_ratio; span 100). Unlike Beam, a bid
// never names an auction (or a person) that does not exist yet: Beam lets ids run up to 10 ahead.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <variant>

namespace afs::nexmark {

// Parameters of a NEXMark stream; use designated initializers:
//   Generator gen({.events = 1'000'000, .seed = 7});
struct NexmarkParams {
  std::uint64_t events = 0;                 // N: event indices 0 .. N-1 (N <= INT64_MAX)
  std::uint64_t seed = 0;                   // selects the random choices; the ids and kinds do not depend on it
  std::uint64_t person_proportion = 1;      // P >= 1 persons per epoch
  std::uint64_t auction_proportion = 3;     // A >= 1 auctions per epoch
  std::uint64_t bid_proportion = 46;        // B >= 0 bids per epoch; P + A + B <= Generator::kMaxEpoch
  std::uint64_t hot_auction_ratio = 2;      // >= 1: P(bid on the hot auction) = 1 - 1/ratio (1: no hot auction)
  std::uint64_t hot_auction_span = 100;     // >= 1: the hot auction is the newest id rounded down to a multiple
  std::uint64_t in_flight_auctions = 100;   // other bids pick one of the newest in_flight_auctions + 1 auctions
  std::uint64_t hot_seller_ratio = 4;       // >= 1: P(auction by a hot seller) = 1 - 1/ratio
  std::uint64_t hot_bidder_ratio = 4;       // >= 1: P(bid by a hot bidder) = 1 - 1/ratio
  std::uint64_t active_persons = 1000;      // non-hot sellers and bidders are one of the newest active_persons
  std::uint64_t events_per_second = 10000;  // >= 1: event n happens at n / rate seconds (Beam's default rate)
};

enum class EventKind : std::uint8_t { Person = 0, Auction = 1, Bid = 2 };
std::string_view to_string(EventKind kind);

// A person registers. Names, city and state come from small fixed tables (static storage).
struct Person {
  std::uint64_t id = 0;
  std::string_view first_name, last_name, city, state;
  std::int64_t time = 0;  // microseconds since the start of the stream
  friend bool operator==(const Person&, const Person&) = default;
};

// A person opens an auction on an item.
struct Auction {
  std::uint64_t id = 0;
  std::uint64_t seller = 0;      // a person id that exists when the auction opens
  std::uint64_t category = 0;    // 0 .. 4
  std::int64_t initial_bid = 0;  // cents
  std::int64_t reserve = 0;      // cents, > initial_bid
  std::int64_t time = 0;         // microseconds since the start of the stream
  std::int64_t expires = 0;      // > time
  friend bool operator==(const Auction&, const Auction&) = default;
};

// A person bids on an auction.
struct Bid {
  std::uint64_t auction = 0;  // an auction id that exists when the bid is made
  std::uint64_t bidder = 0;   // a person id that exists when the bid is made
  std::int64_t price = 0;     // cents, 100 .. 100'000'000 (log-uniform, as Beam's price generator)
  std::int64_t time = 0;      // microseconds since the start of the stream
  friend bool operator==(const Bid&, const Bid&) = default;
};

// One event of the stream: its index, its time and one of the three bodies (kind() says which).
struct Event {
  std::uint64_t index = 0;
  std::int64_t time = 0;
  std::variant<Person, Auction, Bid> body;
  EventKind kind() const { return static_cast<EventKind>(body.index()); }
  friend bool operator==(const Event&, const Event&) = default;
};

// The NEXMark event stream. Every per-event accessor is O(1) and const: event_at(n) draws its random choices from a
// counter-based generator keyed by (seed, n), so random access equals sequential generation and parallel source
// instances need no coordination.
class Generator {
 public:
  static constexpr std::uint64_t kMaxEpoch = 1'000'000;  // P + A + B

  // Throws ConfigError naming the parameter if a proportion or ratio is out of range or events exceeds INT64_MAX.
  explicit Generator(const NexmarkParams& params);

  std::uint64_t events() const { return params_.events; }
  const NexmarkParams& params() const { return params_; }
  std::uint64_t epoch_size() const { return epoch_; }

  // The event at index n < events() (no range check: any n is valid, events() only bounds what the stream holds).
  Event event_at(std::uint64_t n) const;
  EventKind kind_at(std::uint64_t n) const;
  // The bid at event index n; n must be a bid (kind_at(n) == Bid).
  Bid bid_at(std::uint64_t n) const;
  // bid_at(n).auction without drawing the rest of the bid (the hot path of the hot-items source).
  std::uint64_t bid_auction_at(std::uint64_t n) const;
  Person person_at(std::uint64_t n) const;
  Auction auction_at(std::uint64_t n) const;
  std::int64_t time_at(std::uint64_t n) const;  // microseconds: n * 1e6 / events_per_second

  // Counts and ids in the prefix of n events (indices 0 .. n-1).
  std::uint64_t persons_before(std::uint64_t n) const;
  std::uint64_t auctions_before(std::uint64_t n) const;
  std::uint64_t bids_before(std::uint64_t n) const;
  // The event index of the b-th bid (0-based): kind_at(bid_index(b)) == Bid and bids_before(bid_index(b)) == b.
  // Needs bid_proportion >= 1.
  std::uint64_t bid_index(std::uint64_t b) const;

  // Ground truth: the exact number of bids on each auction among events [0, n) (n <= events(); else ConfigError).
  std::unordered_map<std::uint64_t, std::int64_t> exact_bid_counts(std::uint64_t n) const;

 private:
  NexmarkParams params_;
  std::uint64_t epoch_ = 0;        // P + A + B
  std::uint64_t stream_base_ = 0;  // mixed seed
};

}  // namespace afs::nexmark
