#!/usr/bin/env bash
# The backup server under load (issue 3): sustained backup bytes per second into each backend (memory, RocksDB),
# and the size on disk of the durable RocksDB store over a long run, which must stay bounded (a full state backup
# drops the chain before it, a state backup drops the item records it covers). Process runtime, heavy-hitters job,
# no failures; the sizes come from the run's metrics.jsonl (per second: backup_bytes written so far, store_bytes on
# disk in the backup server's directory).
#
#   experiments/store_table.sh [afstream-binary]
#     ROUNDS=3 ITEMS=20000000 (rate runs), LONG_ITEMS=100000000 (the long RocksDB runs) by default;
#     LONG_WORKLOAD="approx 4x8000" runs only the long runs whose name contains it (ROUNDS=0: no rate runs)
#
# Writes experiments/results/store/rates.csv (one row per rate run), samples.csv (their metrics samples), sizes.csv
# (every metrics sample of the long runs) and table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-20000000}
LONG_ITEMS=${LONG_ITEMS:-100000000}
LONG_WORKLOAD=${LONG_WORKLOAD:-}
OUT=${OUT:-$ROOT/experiments/results/store}
require_counts ROUNDS ITEMS LONG_ITEMS
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/rates.csv" "$OUT/samples.csv" "$OUT/sizes.csv"
mkdir -p "$RUNS"

workloads=(
  "approx 4x8000|--ft.mode approx"
  "approx 4x250000|--ft.mode approx --hh.width 250000"
  "exact 4x8000|--ft.mode exact"
)

run() {  # name store items dir args...
  local name=$1 store=$2 items=$3 dir=$4
  shift 4
  local start
  start=$(date +%s)
  "$AFS" run --job heavy-hitters --runtime processes --process.store "$store" --items "$items" --quiet "$@" \
    --out "$dir" >"$dir.log" 2>&1 || { echo "  FAILED: $(grep -m1 error "$dir.log")" >&2; exit 1; }
  echo "  $(($(date +%s) - start)) s: $(grep -m1 " items in " "$dir.log")" >&2
}

samples() {  # prefix metrics.jsonl: its samples as CSV rows, after the prefix
  python3 -c '
import json, sys
for line in open(sys.argv[2]):
    m = json.loads(line)
    print("%s,%.3f,%d,%d,%d" % (sys.argv[1], m["t"], m["source_items"], m["backup_bytes"], m["store_bytes"]))
' "$1" "$2"
}

echo "workload,store,round,seconds,items,backup_bytes" >"$OUT/rates.csv"
echo "workload,store,round,t,source_items,backup_bytes,store_bytes" >"$OUT/samples.csv"
for round in $(seq 1 "$ROUNDS"); do
  for w in "${workloads[@]}"; do
    name=${w%%|*}
    args=${w#*|}
    for store in memory rocksdb; do
      dir="$RUNS/rate-${name// /-}-$store-$round"
      echo "round $round: $name, store $store, $ITEMS items" >&2
      # shellcheck disable=SC2086
      run "$name" "$store" "$ITEMS" "$dir" --seed "$round" $args
      row=$(python3 -c '
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
print(",".join(r[k] for k in ("seconds", "items", "backup_bytes")))
' "$dir/summary.csv")
      echo "$name,$store,$round,$row" >>"$OUT/rates.csv"
      samples "$name,$store,$round" "$dir/metrics.jsonl" >>"$OUT/samples.csv"
    done
  done
done

echo "workload,t,source_items,backup_bytes,store_bytes" >"$OUT/sizes.csv"
for w in "${workloads[@]}"; do
  name=${w%%|*}
  args=${w#*|}
  [[ "$name" == *"$LONG_WORKLOAD"* ]] || continue
  dir="$RUNS/long-${name// /-}"
  echo "long run: $name, store rocksdb, $LONG_ITEMS items" >&2
  # shellcheck disable=SC2086
  run "$name" rocksdb "$LONG_ITEMS" "$dir" --seed 1 $args
  samples "$name" "$dir/metrics.jsonl" >>"$OUT/sizes.csv"
done
{
  echo "Made by \`ROUNDS=$ROUNDS ITEMS=$ITEMS LONG_ITEMS=$LONG_ITEMS LONG_WORKLOAD=\"$LONG_WORKLOAD\"" \
    "experiments/store_table.sh\` ($(date -u +%F), $(nproc) cores, revision $(binary_revision)); each run:" \
    "\`afstream run --job heavy-hitters --runtime processes --process.store STORE --items N --quiet --seed ROUND" \
    "WORKLOAD --out DIR\` with WORKLOAD \`--ft.mode approx\` (approx 4x8000), \`--ft.mode approx --hh.width 250000\`" \
    "(approx 4x250000) or \`--ft.mode exact\` (exact 4x8000); the long runs on RocksDB with seed 1."
  echo
  python3 "$ROOT/experiments/store_summary.py" "$OUT/rates.csv" "$OUT/samples.csv" "$OUT/sizes.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
