// The copy job (`afstream run --job copy`): a Zipf stream copied through pass-through relays into the
// exactly-once sink's RocksDB effects table, then read back and checked: every source item's effect exactly once.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::sinks {

std::unique_ptr<Job> make_copy_job();

}  // namespace afs::sinks
