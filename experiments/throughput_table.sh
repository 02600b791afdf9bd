#!/usr/bin/env bash
# Throughput of the process runtime against the in-process one, and of approx / exact against none (issue 3): the
# heavy-hitters job (Count-Min 4 x 8000 in 2 workers, 1e6 Zipf keys, no failures) on the same items with every
# (runtime, store, mode) in every round, modes and runtimes interleaved so that machine noise hits them alike.
# Ratios are taken within a round, then the median over rounds.
#
#   experiments/throughput_table.sh [afstream-binary]      (ROUNDS=5 ITEMS=10000000 by default)
#
# JOB (default heavy-hitters) and JOB_ARGS run another job the same way, e.g. the online learners (issue 5):
#   JOB=learn JOB_ARGS="--learn.data kdd --ft.theta 10 --ft.l 1000" ITEMS=1000000 OUT=experiments/results/learn-kdd
#
# Writes experiments/results/throughput/summary.csv (one row per run) and table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-5}
ITEMS=${ITEMS:-10000000}
JOB=${JOB:-heavy-hitters}
JOB_ARGS=${JOB_ARGS:-}
OUT=${OUT:-$ROOT/experiments/results/throughput}
require_counts ROUNDS ITEMS
require_rounds ROUNDS
# shellcheck disable=SC2086
preflight --job "$JOB" $JOB_ARGS --items "$ITEMS"
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/summary.csv"
mkdir -p "$RUNS"

runtimes=(
  "threads|--runtime threads"
  "processes memory|--runtime processes --process.store memory"
  "processes rocksdb|--runtime processes --process.store rocksdb"
)
modes=(none approx exact)
first=1
for round in $(seq 1 "$ROUNDS"); do
  for rt in "${runtimes[@]}"; do
    name=${rt%%|*}
    args=${rt#*|}
    for mode in "${modes[@]}"; do
      dir="$RUNS/$round"
      echo "round $round: $name, $mode" >&2
      # shellcheck disable=SC2086
      "$AFS" run --job "$JOB" $JOB_ARGS --items "$ITEMS" --seed "$round" --quiet --ft.mode "$mode" $args \
        --out "$dir" >"$dir.log" 2>&1 || { echo "  FAILED: $(grep -m1 error "$dir.log")" >&2; exit 1; }
      echo "  $(grep -m1 " items in " "$dir.log")" >&2
      if [ "$first" = 1 ]; then
        head -n 1 "$dir/summary.csv" | sed 's/^/runtime,round,/' >"$OUT/summary.csv"
        first=0
      fi
      tail -n 1 "$dir/summary.csv" | sed "s/^/$name,$round,/" >>"$OUT/summary.csv"
    done
  done
done
{
  echo "Made by \`ROUNDS=$ROUNDS ITEMS=$ITEMS JOB=$JOB JOB_ARGS=\"$JOB_ARGS\" experiments/throughput_table.sh\`" \
    "($(date -u +%F), $(nproc) cores, revision $(binary_revision)); each run: \`afstream run --job $JOB $JOB_ARGS" \
    "--items $ITEMS --seed ROUND --quiet" \
    "--ft.mode MODE --runtime threads | --runtime processes --process.store memory|rocksdb --out DIR\`."
  echo
  python3 "$ROOT/experiments/throughput_summary.py" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
