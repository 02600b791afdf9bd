#!/usr/bin/env bash
# CPU seconds (user, sys) and wall seconds of whole heavy-hitter runs in none / approx (Theta 1e5, L 1e3) / exact,
# modes interleaved per round. On a loaded shared machine the CPU a run uses is steadier than its items/s.
#
#   experiments/hh_cpu.sh [afstream-binary]      (ROUNDS=5 ITEMS=10000000 ALGORITHM=count-min by default)
#   ALGORITHM=space-saving experiments/hh_cpu.sh   (the space-saving-hh operator)
#
# Writes OUT/cpu.csv (mode,round,wall_s,user_s,sys_s); OUT is experiments/results/hh (count-min) or
# experiments/results/hh-ALGORITHM unless set, the folders of hh_table.sh. A run's CPU includes the work common to
# every mode (building the Zipf tables, the exact ground truth of the evaluation).
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-5}
ITEMS=${ITEMS:-10000000}
ALGORITHM=${ALGORITHM:-count-min}
if [ "$ALGORITHM" = count-min ]; then
  OUT=${OUT:-$ROOT/experiments/results/hh}
else
  OUT=${OUT:-$ROOT/experiments/results/hh-$ALGORITHM}
fi
require_counts ROUNDS ITEMS
require_rounds ROUNDS
case "$ALGORITHM" in count-min | space-saving) ;; *) echo "hh_cpu.sh: ALGORITHM='$ALGORITHM' (count-min or space-saving)" >&2; exit 2 ;; esac
mkdir -p "$OUT/runs"
echo "mode,round,wall_s,user_s,sys_s" >"$OUT/cpu.csv"
for round in $(seq 1 "$ROUNDS"); do
  for mode in "none|--ft.mode none" "approx|--ft.mode approx --ft.theta 1e5 --ft.l 1e3 --ft.gamma 1e3" \
    "exact|--ft.mode exact"; do
    name=${mode%%|*}
    args=${mode#*|}
    echo "round $round: $name" >&2
    # shellcheck disable=SC2086
    /usr/bin/time -q -f "$name,$round,%e,%U,%S" -a -o "$OUT/cpu.csv" "$AFS" run --runtime threads --job heavy-hitters \
      --hh.algorithm "$ALGORITHM" --items "$ITEMS" --hh.skew 0.9 --seed "$round" --quiet $args \
      --out "$OUT/runs/cpu" >"$OUT/runs/cpu.log" 2>&1 || { echo "hh_cpu.sh: run failed: $(tail -n 1 "$OUT/runs/cpu.log")" >&2; exit 1; }
  done
done
cat "$OUT/cpu.csv"
