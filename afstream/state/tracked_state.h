// The TrackedState concept: the vocabulary shared by every tracked container (TrackedArray, TrackedMap,
// TrackedVector), so operators and generic runtime code can take any of them without virtual calls.
//
// DESIGN.md section 3: divergence() is compared with theta after each update; when exceeded the state (or its delta
// since the last backup) is backed up and mark_backed_up() makes the divergence 0. Restore is read_full() of the
// last full backup followed by apply_delta() of each later delta; both validate before mutating and leave the
// container backed up.
#pragma once

#include <concepts>
#include <cstddef>

#include "afstream/core/bytes.h"
#include "afstream/state/divergence.h"

namespace afs {

template <typename C>
concept TrackedState = std::copyable<C> && requires(C& c, const C& cc, ByteWriter& w, ByteReader& r) {
  { cc.divergence() } -> std::convertible_to<double>;  // O(1), in cc.metric()
  { cc.metric() } -> std::same_as<Metric>;
  { cc.dirty_count() } -> std::convertible_to<std::size_t>;
  {c.mark_backed_up()};
  {cc.write_full(w)};
  {cc.write_delta(w)};
  {c.read_full(r)};
  {c.apply_delta(r)};
  { cc.distance(cc) } -> std::convertible_to<double>;  // brute force, same metric as divergence()
};

}  // namespace afs
