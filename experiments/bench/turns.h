// TurnTimer: two workloads (mode none's and approx's operator) timed in turns in one benchmark, each turn on its own,
// so that a shared host's noise (a 2-core VM whose neighbours move separate runs by 30%) falls on both alike. The
// counters it reports: none_ns and approx_ns per item, and approx_over_none, the ratio of their total times.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

namespace afs::bench {

class TurnTimer {
 public:
  // One turn each: none() then approx(), both over the same items.
  template <typename None, typename Approx>
  void turn(None&& none, Approx&& approx) {
    const auto t0 = Clock::now();
    none();
    const auto t1 = Clock::now();
    approx();
    const auto t2 = Clock::now();
    none_s_ += std::chrono::duration<double>(t1 - t0).count();
    approx_s_ += std::chrono::duration<double>(t2 - t1).count();
  }
  // The counters, for items_per_turn items in each of the state's iterations (one turn per iteration).
  void report(benchmark::State& state, std::int64_t items_per_turn) const {
    const double n = static_cast<double>(state.iterations() * items_per_turn);
    state.counters["none_ns"] = none_s_ / n * 1e9;
    state.counters["approx_ns"] = approx_s_ / n * 1e9;
    state.counters["approx_over_none"] = approx_s_ / none_s_;
    state.SetItemsProcessed(state.iterations() * 2 * items_per_turn);
  }

 private:
  using Clock = std::chrono::steady_clock;
  double none_s_ = 0, approx_s_ = 0;
};

}  // namespace afs::bench
