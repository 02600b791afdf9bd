// Shared helpers for the state-layer unit tests: serialize a container, fingerprint its whole observable state,
// and check that corrupt or truncated payloads are rejected without touching the container (DESIGN.md sections 3, 8).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "afstream/core/bytes.h"
#include "afstream/core/errors.h"

namespace afs::testing_state {

template <typename C>
std::vector<std::uint8_t> full_bytes(const C& c) {
  ByteWriter w;
  c.write_full(w);
  return w.take();
}

template <typename C>
std::vector<std::uint8_t> delta_bytes(const C& c) {
  ByteWriter w;
  c.write_delta(w);
  return w.take();
}

// Everything observable about a container: its full and delta payloads (values, dirty set and its order),
// divergence and dirty count.
struct Fingerprint {
  std::vector<std::uint8_t> full;
  std::vector<std::uint8_t> delta;
  double divergence;
  std::size_t dirty;
  bool operator==(const Fingerprint&) const = default;
};

template <typename C>
Fingerprint fingerprint(const C& c) {
  return Fingerprint{full_bytes(c), delta_bytes(c), c.divergence(), c.dirty_count()};
}

// apply(c, reader) must throw FormatError for every strict prefix of payload and leave a copy of target unchanged.
template <typename C, typename Apply>
void expect_prefixes_rejected(const C& target, const std::vector<std::uint8_t>& payload, Apply apply) {
  const Fingerprint before = fingerprint(target);
  for (std::size_t len = 0; len < payload.size(); ++len) {
    C c = target;
    ByteReader r(std::span<const std::uint8_t>(payload.data(), len));
    EXPECT_THROW(apply(c, r), FormatError) << "prefix of " << len << " of " << payload.size() << " bytes";
    EXPECT_TRUE(fingerprint(c) == before) << "container changed by a rejected prefix of " << len << " bytes";
  }
}

// apply(c, reader) on the whole payload must throw FormatError and leave a copy of target unchanged.
template <typename C, typename Apply>
void expect_rejected(const C& target, const std::vector<std::uint8_t>& payload, Apply apply) {
  const Fingerprint before = fingerprint(target);
  C c = target;
  ByteReader r(payload);
  EXPECT_THROW(apply(c, r), FormatError);
  EXPECT_TRUE(fingerprint(c) == before) << "container changed by a rejected payload";
}

inline void apply_delta_to(auto& c, ByteReader& r) { c.apply_delta(r); }
inline void read_full_to(auto& c, ByteReader& r) { c.read_full(r); }

}  // namespace afs::testing_state
