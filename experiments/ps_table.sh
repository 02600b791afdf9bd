#!/usr/bin/env bash
# Parameter-server training side by side (`afstream run --job ps`, issue 5): BSP, SSP (s = 5) and ASP, each under
# mode none and approximate fault tolerance at the ml README's two settings (Theta 10, L 1e3: the paper's LR
# setting; Theta 1e5, L 1e3), no failures. Modes are interleaved within each round (none, approx, approx-1e5 in
# turn, same seed) so machine noise hits all alike. Per cell: median updates/s (training examples per second), the
# median of the per-round approx/none ratios, the held-out prediction rate and the staleness observed.
#
#   experiments/ps_table.sh [afstream-binary]
#     ROUNDS=3 ITEMS=1000000 CONSISTENCIES="bsp ssp asp" MODES="none approx approx-1e5" RUNTIME=threads
#     STALENESS=5 (SSP's s: --learn.staleness of the ssp runs)
#     EXTRA="" (more options for every run, e.g. "--learn.data kdd" or "--learn.workers 4"; not --learn.staleness)
#     OUT=DIR writes elsewhere than experiments/results/ps
#
# Writes OUT/summary.csv (one row per run) and table.md (ps_summary.py).
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-1000000}
CONSISTENCIES=${CONSISTENCIES:-"bsp ssp asp"}
MODES=${MODES:-"none approx approx-1e5"}
RUNTIME=${RUNTIME:-threads}
STALENESS=${STALENESS:-5}
EXTRA=${EXTRA:-}
OUT=${OUT:-$ROOT/experiments/results/ps}

mode_args() {
  case "$1" in
    none) echo "--ft.mode none" ;;
    approx) echo "--ft.mode approx --ft.theta 10 --ft.l 1000" ;;
    approx-1e5) echo "--ft.mode approx --ft.theta 100000 --ft.l 1000" ;;
    exact) echo "--ft.mode exact" ;;
    *) echo "ps_table.sh: unknown mode '$1' (expected none, approx, approx-1e5 or exact)" >&2; exit 2 ;;
  esac
}
for m in $MODES; do mode_args "$m" >/dev/null; done
require_counts ROUNDS ITEMS STALENESS
require_rounds ROUNDS
# shellcheck disable=SC2086
preflight --job ps --items "$ITEMS" --runtime "$RUNTIME" $EXTRA
case " $EXTRA " in *" --learn.staleness"*)
  echo "ps_table.sh: set STALENESS=N instead of --learn.staleness in EXTRA (the table labels SSP with it)" >&2; exit 2 ;;
esac
for c in $CONSISTENCIES; do
  case "$c" in bsp | ssp | asp) ;; *) echo "ps_table.sh: unknown consistency '$c' (bsp, ssp, asp)" >&2; exit 2 ;; esac
done
[ -x "$AFS" ] || { echo "ps_table.sh: no afstream binary at $AFS (build it first)" >&2; exit 1; }

mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/rows.tmp"
mkdir -p "$RUNS"
for round in $(seq 1 "$ROUNDS"); do
  for c in $CONSISTENCIES; do
    for mode in $MODES; do
      echo "round $round: $c, $mode" >&2
      dir="$RUNS/$c-$mode-$round"
      # shellcheck disable=SC2046,SC2086
      stale=()
      [ "$c" = ssp ] && stale=(--learn.staleness "$STALENESS")
      "$AFS" run --job ps --items "$ITEMS" --runtime "$RUNTIME" --learn.consistency "$c" "${stale[@]}" $(mode_args "$mode") \
        --seed "$round" --quiet --out "$dir" $EXTRA >"$dir.log" 2>&1 ||
        { echo "ps_table.sh: run failed, see $dir.log" >&2; exit 1; }
      python3 - "$dir/summary.csv" "$c" "$mode" "$round" "$(cut -d' ' -f1 /proc/loadavg)" "$STALENESS" >>"$OUT/rows.tmp" <<'PY'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
print(",".join(sys.argv[2:6] +
               [r[k] for k in ("items", "seconds", "items_per_s", "holdout_accuracy", "progressive_accuracy",
                               "max_staleness", "server_max_gap", "state_backups", "item_backups",
                               "backup_bytes")] + [sys.argv[6]]))
PY
    done
  done
done
{
  echo "consistency,mode,round,load1,items,seconds,items_per_s,holdout_accuracy,progressive_accuracy,max_staleness,server_max_gap,state_backups,item_backups,backup_bytes,staleness_bound"
  cat "$OUT/rows.tmp"
} >"$OUT/summary.csv"
rm -f "$OUT/rows.tmp"
{
  made_by "ROUNDS=$ROUNDS ITEMS=$ITEMS CONSISTENCIES=\"$CONSISTENCIES\" MODES=\"$MODES\" RUNTIME=$RUNTIME STALENESS=$STALENESS${EXTRA:+ EXTRA=\"$EXTRA\"}" "$RUNS"
  python3 "$ROOT/experiments/ps_summary.py" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
