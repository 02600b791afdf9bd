#!/usr/bin/env bash
# Runs every Google Benchmark binary the build made (experiments/bench/*_benchmark.cc: tracked counters, Count-Min,
# Space-Saving, a Count-Min state backup piece by piece, HyperLogLog, ripple join, NEXMark, word count and grep, the
# learners, wire codec, backup stores, recovery, the exactly-once sink's effect database, parameter-server clocks)
# with repetitions and writes their median tables to experiments/results/bench/<name>.txt.
#   experiments/bench/run_all.sh [build-dir]      (BENCHMARKS="hh_benchmark ml_benchmark" for some of them)
set -euo pipefail
BUILD=${1:-build}
OUT=${OUT:-experiments/results/bench}
mkdir -p "$OUT"
if [ -z "${BENCHMARKS:-}" ]; then
  BENCHMARKS=$(cd experiments/bench && ls ./*_benchmark.cc | sed 's|^\./||; s|\.cc$||')
fi
for b in $BENCHMARKS; do
  bin="$BUILD/experiments/bench/$b"
  [ -x "$bin" ] || { echo "missing $bin (build first)" >&2; exit 1; }
  echo "== $b" >&2
  "$bin" --benchmark_min_time=0.2 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-" >"$OUT/$b.txt"
  cat "$OUT/$b.txt"
done
