#!/usr/bin/env bash
# Runs the Google Benchmark binaries (hot paths: tracked counters, Count-Min, Zipf, wire codec, backup stores,
# parameter-server worker and server clocks) with repetitions and writes their median tables to experiments/results/bench/<name>.txt.
#   experiments/bench/run_all.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
OUT=${OUT:-experiments/results/bench}
mkdir -p "$OUT"
for b in state_benchmark hh_benchmark distinct_benchmark net_benchmark store_benchmark ps_benchmark; do
  bin="$BUILD/experiments/bench/$b"
  [ -x "$bin" ] || { echo "missing $bin (build first)" >&2; exit 1; }
  echo "== $b" >&2
  "$bin" --benchmark_min_time=0.2 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-" >"$OUT/$b.txt"
  cat "$OUT/$b.txt"
done
