// The item: one record on a stream (DESIGN section 2). A plain 32-byte value type so that batches are flat arrays.
#pragma once

#include <cstdint>

namespace afs {

struct Item {
  std::uint64_t key = 0;   // partitioning key (e.g. a hashed flow id or word)
  std::int64_t value = 0;  // small typed payload (a count, a weight, a label)
  std::int64_t time = 0;   // event time (or source offset for generated streams)
  std::uint64_t seq = 0;   // sequence number, unique and increasing per channel; set by the runtime

  friend bool operator==(const Item&, const Item&) = default;
};

}  // namespace afs
