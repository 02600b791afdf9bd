#!/usr/bin/env bash
# NEXMark hot items (query 5 as Count-Min heavy hitters, algorithms/nexmark/): throughput of none / approx / exact
# measured in the same rounds (modes interleaved), and accuracy without failures and with 10 failures of all
# workers at Theta 1e5, L 1e3 -- with the default partial deltas (--ft.delta-residual 0.5) and with whole deltas
# (--ft.delta-residual 0), and at Theta 400, L 100 (thresholds in bids, scaled to the hot-item threshold phi ~ 383).
# Medians over ROUNDS.
#
#   experiments/nexmark_table.sh [afstream-binary]      (ROUNDS=3 EVENTS=10000000 RUNTIME=threads by default;
#     OUT=DIR writes elsewhere than experiments/results/nexmark)
#
# Writes OUT/summary.csv (one row per run) and OUT/table.md (summarize.py).
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
EVENTS=${EVENTS:-10000000}
RUNTIME=${RUNTIME:-threads}
OUT=${OUT:-$ROOT/experiments/results/nexmark}
require_counts ROUNDS EVENTS
require_rounds ROUNDS
preflight --runtime "$RUNTIME" --job nexmark-hot-items --items "$EVENTS"
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/summary.csv" "$OUT/rows.tmp"
mkdir -p "$RUNS"

configs=(
  "none|--ft.mode none"
  "approx T1e5 L1e3|--ft.mode approx --ft.theta 1e5 --ft.l 1e3 --ft.gamma 1e3"
  "approx T1e5 L1e3 r0|--ft.mode approx --ft.theta 1e5 --ft.l 1e3 --ft.gamma 1e3 --ft.delta-residual 0"
  "approx T400 L100|--ft.mode approx --ft.theta 400 --ft.l 100 --ft.gamma 1e3"
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
      "$AFS" run --runtime "$RUNTIME" --job nexmark-hot-items --items "$EVENTS" --seed "$round" --quiet $args \
        --fail.count "$fails" --fail.target all --out "$RUNS/$round" >/dev/null
      tail -n 1 "$RUNS/$round/summary.csv" | sed "s/^/$name,$round,/" >>"$OUT/rows.tmp"
    done
  done
done
head -n 1 "$RUNS/1/summary.csv" | sed 's/^/config,round,/' >"$OUT/summary.csv"
cat "$OUT/rows.tmp" >>"$OUT/summary.csv"
rm -f "$OUT/rows.tmp"
{
  made_by "ROUNDS=$ROUNDS EVENTS=$EVENTS RUNTIME=$RUNTIME" "$RUNS"
  python3 "$ROOT/experiments/summarize.py" "$OUT/summary.csv"
} >"$OUT/table.md"
rm -rf "$RUNS"
cat "$OUT/table.md"
