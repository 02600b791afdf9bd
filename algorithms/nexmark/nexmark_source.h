// The `nexmark` source: the NEXMark event stream (nexmark.h) as afstream Items, replayable at any offset.
//
// Parameters (all optional): events, seed, person-proportion, auction-proportion, bid-proportion,
// hot-auction-ratio, hot-auction-span, in-flight-auctions, hot-seller-ratio, hot-bidder-ratio, active-persons,
// rate (events per second), and
//   kinds=bids  (default) only the bids, as {key = auction id, value = 1 or the price, time = event time}: the input
//               of the hot-items query (NEXMark query 5);
//   kinds=all   every event, as {key = the person id / the auction id / the bid's auction id, value = payload * 4 +
//               kind, time = event time}, kind 0 person, 1 auction, 2 bid (decode with item_kind / item_payload);
//               the payload is 0 for a person, the seller for an auction, and 1 or the price for a bid;
//   value=count (default) or price: what a bid carries.
// Parallel instances split the source's items into contiguous ranges, like the zipf source.
#pragma once

#include <cstdint>

#include "afstream/core/item.h"
#include "afstream/core/operator.h"
#include "afstream/core/params.h"
#include "afstream/core/registry.h"
#include "algorithms/nexmark/nexmark.h"

namespace afs::nexmark {

// The generator parameters from source parameters (defaults as NexmarkParams; events defaults to 1e6).
NexmarkParams nexmark_params(const Params& p);

enum class SourceKinds { Bids, All };
enum class BidValue { Count, Price };
SourceKinds parse_kinds(const std::string& s);   // ConfigError naming `kinds` and the choices
BidValue parse_bid_value(const std::string& s);  // ConfigError naming `value` and the choices

// kinds=all items: the event kind and the payload packed into Item::value.
inline EventKind item_kind(const Item& item) { return static_cast<EventKind>(item.value & 3); }
inline std::int64_t item_payload(const Item& item) { return item.value >> 2; }

class NexmarkSource final : public Source {
 public:
  NexmarkSource(const Params& p, const InstanceInfo& at);
  std::uint64_t size() const override { return end_ - begin_; }
  std::size_t read(std::uint64_t offset, Item* out, std::size_t n) override;

  // Items of the whole source (all instances together) for these parameters.
  static std::uint64_t total_items(const Params& p);
  const Generator& generator() const { return gen_; }

 private:
  Generator gen_;
  SourceKinds kinds_;
  BidValue value_;
  std::uint64_t begin_ = 0;
  std::uint64_t end_ = 0;
};

// Registers the `nexmark` source.
void register_nexmark(Registry& registry);

}  // namespace afs::nexmark
