#!/bin/bash
# The ps job's ft.replay-items-max (its run default 1000 since 2026-12-06) against none (0, the general default):
# throughput without failures, and the progressive loss after 5 failures of all workers against mode none's.
#   experiments/results/ps-replay-interval/run.sh [afstream-binary] > experiments/results/ps-replay-interval/rows.txt
set -u
AFS=${1:-$(cd "$(dirname "$0")/../../.." && pwd)/build/afstream/cli/afstream}
echo "# throughput: round|replay-items-max|mode|seconds items/s state_backups item_backups backup_MB (4e5 examples)"
for r in 1 2 3 4 5 6; do
  for cfg in "none|0" "approx|0" "approx|1000"; do
    mode=${cfg%%|*} every=${cfg#*|}
    [ "$mode" = none ] && every=1000  # unused in mode none
    printf "%s|%s|%s|" "$r" "$every" "$mode"
    timeout 300 "$AFS" run --job ps --items 400000 --seed "$r" --ft.mode "$mode" --ft.replay-items-max "$every" \
      --runtime threads --quiet 2>/dev/null | grep "items/s" | sed 's/^ *//' | awk '{print $4, $7, $10, $12, $14}'
  done
done
echo "# after 5 failures of all workers: seed config progressive_loss progressive_accuracy holdout_accuracy (1e5 examples)"
for r in 1 2 3; do
  for cfg in "none||" "approx-r0|--fail.count 5 --fail.target all|0" "approx-r1000|--fail.count 5 --fail.target all|1000"; do
    IFS='|' read -r name fails every <<<"$cfg"
    mode=approx; [ "$name" = none ] && mode=none && every=1000
    printf "%s %s " "$r" "$name"
    # shellcheck disable=SC2086  # $fails: several options or none
    timeout 300 "$AFS" run --job ps --items 100000 --seed "$r" --ft.mode "$mode" --ft.replay-items-max "$every" $fails \
      --runtime threads --quiet 2>/dev/null | grep progressive_loss | awk '{print $2, $4, $6}'
  done
done
