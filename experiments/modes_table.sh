#!/usr/bin/env bash
# Every fault-tolerance mode side by side (issue 6; the paper's Table 4): the same job and input per row, modes
# interleaved within each round so machine noise hits all alike. Per row: throughput (and its ratio to none's in
# the same round), item latency p50 / p99 (emission of a batch's oldest item to the receiver having processed it;
# afstream/runtime/metrics.h), backup bytes, from a failure-free run; and the median recovery time from a second run
# with FAILS failures of all workers. Medians over ROUNDS.
#
#   experiments/modes_table.sh [afstream-binary]
#     ROUNDS=3 JOBS="hh wordcount" HH_ITEMS=20000000 TEXT_BYTES=200000000 FAILS=2 RUNTIME=threads by default
#     MODES="none approx exact mb1 mb2 mb5 mb10 ckpt100ms ckpt1s ckpt5s ack ask" (the committed table's; without
#     none, "vs none" is "-")
#
# Writes experiments/results/modes/summary.csv (one row per run) and table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-"hh wordcount"}
HH_ITEMS=${HH_ITEMS:-20000000}
TEXT_BYTES=${TEXT_BYTES:-200000000}
FAILS=${FAILS:-2}
RUNTIME=${RUNTIME:-threads}
MODES=${MODES:-"none approx exact mb1 mb2 mb5 mb10 ckpt100ms ckpt1s ckpt5s ack ask"}
OUT=${OUT:-$ROOT/experiments/results/modes}

job_args() {
  case "$1" in
    hh) echo "--job heavy-hitters --items $HH_ITEMS" ;;
    wordcount) echo "--job wordcount --text.synthetic-bytes $TEXT_BYTES" ;;
    *) echo "modes_table.sh: unknown job '$1' (expected hh or wordcount)" >&2; exit 2 ;;
  esac
}
mode_args() {
  case "$1" in
    none) echo "--ft.mode none" ;;
    approx) echo "--ft.mode approx --ft.theta 1e5 --ft.l 1e3 --ft.gamma 1e3" ;;
    exact) echo "--ft.mode exact" ;;
    mb1) echo "--ft.mode microbatch --ft.microbatch-interval 1s" ;;
    mb2) echo "--ft.mode microbatch --ft.microbatch-interval 2s" ;;
    mb5) echo "--ft.mode microbatch --ft.microbatch-interval 5s" ;;
    mb10) echo "--ft.mode microbatch --ft.microbatch-interval 10s" ;;
    ckpt100ms) echo "--ft.mode checkpoint --ft.checkpoint-interval 100ms" ;;
    ckpt1s) echo "--ft.mode checkpoint --ft.checkpoint-interval 1s" ;;
    ckpt5s) echo "--ft.mode checkpoint --ft.checkpoint-interval 5s" ;;
    ack) echo "--ft.mode ack" ;;
    ask) echo "--ft.mode ask" ;;
    *) echo "modes_table.sh: unknown mode '$1'" >&2; exit 2 ;;
  esac
}
require_counts ROUNDS HH_ITEMS TEXT_BYTES FAILS
require_rounds ROUNDS
preflight --job heavy-hitters --runtime "$RUNTIME"
for j in $JOBS; do job_args "$j" >/dev/null; done
for m in $MODES; do mode_args "$m" >/dev/null; done

mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/rows.tmp"
mkdir -p "$RUNS"
for round in $(seq 1 "$ROUNDS"); do
  for job in $JOBS; do
    for mode in $MODES; do
      for fails in $(if [ "$FAILS" = 0 ]; then echo 0; else echo 0 "$FAILS"; fi); do
        [ "$mode" = none ] && [ "$fails" != 0 ] && continue
        echo "round $round: $job, $mode, $fails failures" >&2
        dir="$RUNS/$job-$mode-$fails-$round"
        # shellcheck disable=SC2046
        "$AFS" run --runtime "$RUNTIME" $(job_args "$job") $(mode_args "$mode") --seed "$round" --quiet \
          --fail.count "$fails" --fail.target all --out "$dir" >"$dir.log" 2>&1 ||
          { echo "modes_table.sh: run failed, see $dir.log" >&2; exit 1; }
        python3 - "$dir/summary.csv" "$job" "$mode" "$fails" "$round" >>"$OUT/rows.tmp" <<'PY'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
print(",".join([sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]] +
               [r[k] for k in ("items_per_s", "latency_p50_ms", "latency_p99_ms", "backup_bytes",
                               "recovery_ms_median", "trees_replayed", "state_backups", "item_backups")]))
PY
      done
    done
  done
done
{
  echo "job,mode,failures,round,items_per_s,latency_p50_ms,latency_p99_ms,backup_bytes,recovery_ms_median,trees_replayed,state_backups,item_backups"
  cat "$OUT/rows.tmp"
} >"$OUT/summary.csv"
rm -f "$OUT/rows.tmp"
{
  made_by "ROUNDS=$ROUNDS JOBS=\"$JOBS\" HH_ITEMS=$HH_ITEMS TEXT_BYTES=$TEXT_BYTES FAILS=$FAILS RUNTIME=$RUNTIME MODES=\"$MODES\"" "$RUNS"
  python3 "$ROOT/experiments/modes_summary.py" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
