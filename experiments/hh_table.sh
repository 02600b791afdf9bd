#!/usr/bin/env bash
# Heavy hitters side by side (issue 2's whole-job benchmark): throughput of none / approx / exact measured in the
# same rounds (modes interleaved, so machine noise hits all of them alike), and accuracy without failures and with
# 10 failures of all workers, at the paper's two threshold settings. Medians over ROUNDS.
#
#   experiments/hh_table.sh [afstream-binary]      (ROUNDS=5 ITEMS=10000000 SKEW=0.9 RUNTIME=threads by default)
#   ALGORITHM=space-saving experiments/hh_table.sh   (the space-saving-hh operator; default count-min)
#
# Writes experiments/results/hh/summary.csv (one row per run) and experiments/results/hh/table.md
# (ALGORITHM=space-saving: experiments/results/hh-space-saving/).
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-5}
ITEMS=${ITEMS:-10000000}
SKEW=${SKEW:-0.9}
RUNTIME=${RUNTIME:-threads}  # the engine without process hand-offs; experiments/ has the process runtime's tables
ALGORITHM=${ALGORITHM:-count-min}
if [ "$ALGORITHM" = count-min ]; then
  OUT=${OUT:-$ROOT/experiments/results/hh}
else
  OUT=${OUT:-$ROOT/experiments/results/hh-$ALGORITHM}
fi
require_counts ROUNDS ITEMS
require_rounds ROUNDS
case "$ALGORITHM" in count-min | space-saving) ;; *) echo "hh_table.sh: ALGORITHM='$ALGORITHM' (count-min or space-saving)" >&2; exit 2 ;; esac
preflight --runtime "$RUNTIME" --job heavy-hitters --hh.algorithm "$ALGORITHM" --items "$ITEMS" --hh.skew "$SKEW"
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/summary.csv" "$OUT/rows.tmp"  # rows.tmp: an interrupted run's rows
mkdir -p "$RUNS"

configs=(
  "none|--ft.mode none"
  "approx T1e5 L1e3|--ft.mode approx --ft.theta 1e5 --ft.l 1e3 --ft.gamma 1e3"
  "approx T1e4 L100|--ft.mode approx --ft.theta 1e4 --ft.l 100 --ft.gamma 1e3"
  "exact|--ft.mode exact"
)
for round in $(seq 1 "$ROUNDS"); do
  for c in "${configs[@]}"; do
    name=${c%%|*}
    args=${c#*|}
    for fails in 0 10; do
      [ "$name" = none ] && [ "$fails" -gt 0 ] && continue
      echo "round $round: $name, $fails failures" >&2
      # shellcheck disable=SC2086
      "$AFS" run --runtime "$RUNTIME" --job heavy-hitters --hh.algorithm "$ALGORITHM" --items "$ITEMS" --hh.skew "$SKEW" --seed "$round" --quiet $args \
        --fail.count "$fails" --fail.target all --out "$RUNS/$round" >/dev/null
      tail -n 1 "$RUNS/$round/summary.csv" | sed "s/^/$name,$round,/" >>"$OUT/rows.tmp"
    done
  done
done
head -n 1 "$RUNS/1/summary.csv" | sed 's/^/config,round,/' >"$OUT/summary.csv"
cat "$OUT/rows.tmp" >>"$OUT/summary.csv"
rm -f "$OUT/rows.tmp"
{
  made_by "ROUNDS=$ROUNDS ITEMS=$ITEMS SKEW=$SKEW RUNTIME=$RUNTIME ALGORITHM=$ALGORITHM" "$RUNS"
  python3 "$ROOT/experiments/summarize.py" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
