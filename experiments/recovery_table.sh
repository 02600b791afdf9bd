#!/usr/bin/env bash
# Recovery time per failure on the process runtime (issue 3), split into its phases, for Count-Min states of 1e4,
# 1e6 and 1e7 counters per worker (depth 4, width 2500 / 250000 / 2500000), with the backup server on each store.
# Each run kills both count-min workers (1 and 2) FAILS times with SIGKILL, spread from 10% to 90% of the input;
# --hh.keys 10000 keeps the restarted source's Zipf table rebuild out of the way. Medians over every recovery of
# every round.
#
#   experiments/recovery_table.sh [afstream-binary]
#     ROUNDS=3 ITEMS=2000000 FAILS=5 TARGET=1,2 SIZES="1e4 1e6 1e7" STORES="memory rocksdb" by default;
#     EXTRA_ARGS="--process.standby 2" adds options to every run
#
# Writes experiments/results/recovery/failures.csv (every recovery, with size, store and round prepended),
# summary.csv (one row per run) and table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-2000000}
FAILS=${FAILS:-5}
TARGET=${TARGET:-1,2}
SIZES=${SIZES:-"1e4 1e6 1e7"}
STORES=${STORES:-"memory rocksdb"}
OUT=${OUT:-$ROOT/experiments/results/recovery}
DEPTH=4
width_of() {
  case "$1" in
    1e4) echo 2500 ;;
    1e5) echo 25000 ;;
    1e6) echo 250000 ;;
    1e7) echo 2500000 ;;
    *) echo "recovery_table.sh: unknown size '$1' (expected 1e4, 1e5, 1e6 or 1e7)" >&2; exit 2 ;;
  esac
}
require_counts ROUNDS ITEMS FAILS
require_rounds ROUNDS
# shellcheck disable=SC2086
preflight --job heavy-hitters --runtime processes --fail.target "$TARGET" ${EXTRA_ARGS:-}
for size in $SIZES; do width_of "$size" >/dev/null; done
for store in $STORES; do
  case "$store" in memory | rocksdb) ;; *) echo "recovery_table.sh: unknown store '$store' (memory or rocksdb)" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/failures.csv" "$OUT/summary.csv"
mkdir -p "$RUNS"


first=1
for round in $(seq 1 "$ROUNDS"); do
  for size in $SIZES; do
    width=$(width_of "$size")
    for store in $STORES; do
      dir="$RUNS/$size-$store-$round"
      echo "round $round: $size counters ($DEPTH x $width), store $store, $FAILS failures of workers $TARGET" >&2
      start=$(date +%s)
      # A run that hangs (e.g. a worker that failed with an error: see README) is cut off, reported and skipped.
      # shellcheck disable=SC2086
      if ! timeout 1200 "$AFS" run --job heavy-hitters --runtime processes --process.store "$store" \
        --items "$ITEMS" --hh.keys 10000 --hh.width "$width" --hh.depth "$DEPTH" --seed "$round" --quiet \
        --fail.count "$FAILS" --fail.target "$TARGET" ${EXTRA_ARGS:-} --out "$dir" >"$dir.log" 2>&1; then
        echo "  FAILED (see $dir.log): $(grep -m1 'error' "$dir.log" || tail -n 1 "$dir.log")" >&2
        continue
      fi
      echo "  $(($(date +%s) - start)) s: $(grep -m1 " items in " "$dir.log")" >&2
      if [ "$first" = 1 ]; then
        head -n 1 "$dir/failures.csv" | sed 's/^/size,store,round,/' >"$OUT/failures.csv"
        head -n 1 "$dir/summary.csv" | sed 's/^/size,store,round,/' >"$OUT/summary.csv"
        first=0
      fi
      tail -n +2 "$dir/failures.csv" | sed "s/^/$size,$store,$round,/" >>"$OUT/failures.csv"
      tail -n 1 "$dir/summary.csv" | sed "s/^/$size,$store,$round,/" >>"$OUT/summary.csv"
    done
  done
done
{
  echo "Made by \`ROUNDS=$ROUNDS ITEMS=$ITEMS FAILS=$FAILS TARGET=$TARGET SIZES=\"$SIZES\" STORES=\"$STORES\"" \
    "${EXTRA_ARGS:+EXTRA_ARGS=\"$EXTRA_ARGS\"}" \
    "experiments/recovery_table.sh\` ($(date -u +%F), $(nproc) cores, revision $(binary_revision)); each run:" \
    "\`afstream run --job heavy-hitters --runtime processes --process.store STORE --items $ITEMS --hh.keys 10000" \
    "--hh.width W --hh.depth $DEPTH --seed ROUND --quiet --fail.count $FAILS --fail.target $TARGET${EXTRA_ARGS:+ $EXTRA_ARGS}" \
    "--out DIR\`" \
    "(W = counters / $DEPTH)."
  echo
  python3 "$ROOT/experiments/recovery_summary.py" "$OUT/failures.csv" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
