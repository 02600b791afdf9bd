#!/usr/bin/env bash
# Runs every Google Benchmark binary the build made (experiments/bench/*_benchmark.cc: tracked counters, Count-Min,
# Space-Saving, a Count-Min state backup piece by piece, HyperLogLog, ripple join, NEXMark, word count and grep, the
# learners, wire codec, backup stores, recovery, the exactly-once sink's effect database, parameter-server clocks)
# with repetitions and writes their median tables to OUT/<name>.txt.
usage() {
  cat <<'EOF'
usage: experiments/bench/run_all.sh [-h|--help] [build-dir]

Runs the Google Benchmark binaries of build-dir/experiments/bench/ (build-dir: the repository's build/ by default)
with 5 repetitions of at least 0.2 s and writes each one's median table to OUT/NAME.txt (replacing it).

  BENCHMARKS="hh_benchmark ml_benchmark"   only these binaries (default: every experiments/bench/*_benchmark.cc)
  FILTER=REGEX                             only the benchmarks matching it, passed to each binary as
                                           --benchmark_filter (default: all); a binary with none matching is skipped
  OUT=DIR                                  where the tables go (default: the repository's experiments/results/bench;
                                           with FILTER, name another: a filtered table replaces the whole one)
EOF
}
set -euo pipefail
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "run_all.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[ "$#" -le 1 ] || { usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)  # the repository: the benchmark list, default build folder and OUT
BUILD=${1:-$ROOT/build}
OUT=${OUT:-$ROOT/experiments/results/bench}
FILTER=${FILTER:-}
[ -d "$BUILD" ] || { echo "run_all.sh: no build folder $BUILD" >&2; exit 2; }
if [ -z "${BENCHMARKS:-}" ]; then
  BENCHMARKS=$(cd "$ROOT/experiments/bench" && ls ./*_benchmark.cc | sed 's|^\./||; s|\.cc$||')
fi
mkdir -p "$OUT"
for b in $BENCHMARKS; do
  bin="$BUILD/experiments/bench/$b"
  [ -x "$bin" ] || { echo "missing $bin (build first)" >&2; exit 1; }
  filter=()
  if [ -n "$FILTER" ]; then
    filter=(--benchmark_filter="$FILTER")
    # A filter that matches none of a binary's benchmarks would leave an empty table: skip the binary.
    if ! "$bin" "${filter[@]}" --benchmark_list_tests=true 2>/dev/null | grep -q .; then
      echo "== $b: nothing matches FILTER=$FILTER" >&2
      continue
    fi
  fi
  echo "== $b" >&2
  "$bin" "${filter[@]}" --benchmark_min_time=0.2 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_display_aggregates_only=true 2>/dev/null | grep -E "median|^Benchmark|^-" >"$OUT/$b.txt"
  cat "$OUT/$b.txt"
done
