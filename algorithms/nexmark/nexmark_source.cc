// The `nexmark` source: NEXMark events as Items (bids only, or every event with its kind packed into the value).
#include "algorithms/nexmark/nexmark_source.h"

#include <algorithm>
#include <memory>
#include <string>

#include "afstream/core/errors.h"

namespace afs::nexmark {

NexmarkParams nexmark_params(const Params& p) {
  NexmarkParams n;
  n.events = p.get_uint("events", 1'000'000);
  n.seed = p.get_uint("seed", 1);
  n.person_proportion = p.get_uint("person-proportion", n.person_proportion);
  n.auction_proportion = p.get_uint("auction-proportion", n.auction_proportion);
  n.bid_proportion = p.get_uint("bid-proportion", n.bid_proportion);
  n.hot_auction_ratio = p.get_uint("hot-auction-ratio", n.hot_auction_ratio);
  n.hot_auction_span = p.get_uint("hot-auction-span", n.hot_auction_span);
  n.in_flight_auctions = p.get_uint("in-flight-auctions", n.in_flight_auctions);
  n.hot_seller_ratio = p.get_uint("hot-seller-ratio", n.hot_seller_ratio);
  n.hot_bidder_ratio = p.get_uint("hot-bidder-ratio", n.hot_bidder_ratio);
  n.active_persons = p.get_uint("active-persons", n.active_persons);
  n.events_per_second = p.get_uint("rate", n.events_per_second);
  return n;
}

SourceKinds parse_kinds(const std::string& s) {
  if (s == "bids") return SourceKinds::Bids;
  if (s == "all") return SourceKinds::All;
  throw ConfigError("nexmark source: kinds: expected bids or all, got '" + s + "'");
}

BidValue parse_bid_value(const std::string& s) {
  if (s == "count") return BidValue::Count;
  if (s == "price") return BidValue::Price;
  throw ConfigError("nexmark source: value: expected count or price, got '" + s + "'");
}

std::uint64_t NexmarkSource::total_items(const Params& p) {
  const Generator gen(nexmark_params(p));
  return parse_kinds(p.get_string("kinds", "bids")) == SourceKinds::Bids ? gen.bids_before(gen.events()) : gen.events();
}

NexmarkSource::NexmarkSource(const Params& p, const InstanceInfo& at)
    : gen_(nexmark_params(p)),
      kinds_(parse_kinds(p.get_string("kinds", "bids"))),
      value_(parse_bid_value(p.get_string("value", "count"))) {
  const std::uint64_t n = kinds_ == SourceKinds::Bids ? gen_.bids_before(gen_.events()) : gen_.events();
  const auto index = static_cast<unsigned __int128>(at.index);
  const auto parallelism = static_cast<unsigned __int128>(at.parallelism);
  begin_ = static_cast<std::uint64_t>(n * index / parallelism);
  end_ = static_cast<std::uint64_t>(n * (index + 1) / parallelism);
}

std::size_t NexmarkSource::read(std::uint64_t offset, Item* out, std::size_t n) {
  if (offset >= size()) return 0;
  n = static_cast<std::size_t>(std::min<std::uint64_t>(n, size() - offset));
  const std::uint64_t first = begin_ + offset;
  if (kinds_ == SourceKinds::Bids) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t e = gen_.bid_index(first + i);
      if (value_ == BidValue::Count) {
        out[i] = Item{gen_.bid_auction_at(e), 1, gen_.time_at(e), 0};
      } else {
        const Bid b = gen_.bid_at(e);
        out[i] = Item{b.auction, b.price, b.time, 0};
      }
    }
    return n;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t e = first + i;
    const auto kind = gen_.kind_at(e);
    std::uint64_t key = 0;
    std::int64_t payload = 0;
    switch (kind) {
      case EventKind::Person:
        key = gen_.persons_before(e);  // the person's own id
        break;
      case EventKind::Auction: {
        const Auction a = gen_.auction_at(e);
        key = a.id;
        payload = static_cast<std::int64_t>(a.seller);
        break;
      }
      case EventKind::Bid:
        if (value_ == BidValue::Count) {
          key = gen_.bid_auction_at(e);
          payload = 1;
        } else {
          const Bid b = gen_.bid_at(e);
          key = b.auction;
          payload = b.price;
        }
        break;
    }
    out[i] = Item{key, payload * 4 + static_cast<std::int64_t>(kind), gen_.time_at(e), 0};
  }
  return n;
}

void register_nexmark(Registry& registry) {
  registry.add_source("nexmark", "NEXMark auction events (persons, auctions, bids); kinds=bids|all, value=count|price",
                      [](const Params& p, const InstanceInfo& at) { return std::make_unique<NexmarkSource>(p, at); });
}

}  // namespace afs::nexmark
