// The NEXMark hot-items job (`afstream run --job nexmark-hot-items`): NEXMark query 5 ("the auctions with the most
// bids") over the whole bid stream, run as a Count-Min heavy-hitter job so that it inherits Theorem 2's bound after
// failures (PAPER.md; proofs/theorem2-count-min.md): nexmark source (bids keyed by auction) -> count-min-hh (parallel,
// keyed) -> hh-merge sink, scored by precision, recall and average relative error against the exact bid counts.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::nexmark {

std::unique_ptr<Job> make_hot_items_job();

}  // namespace afs::nexmark
