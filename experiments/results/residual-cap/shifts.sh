#!/usr/bin/env bash
# Count-Min's residual cap (kResidualCapShift): precision after 10 failures and backup bytes, for binaries built with
# different shifts. Each binary is run on the heavy-hitter job at setting A (threads), 1e6, 3e6 and 1e7 items, seeds
# 1-5, with 0 and 10 failures of all workers; one row per run in OUT (default shifts.csv here).
#
#   SHIFTS="3:/tmp/afs_shift3 6:/tmp/afs_shift6 9:build/afstream/cli/afstream" \
#     experiments/results/residual-cap/shifts.sh
set -euo pipefail
OUT=${OUT:-$(dirname "$0")/shifts.csv}
RUNS=$(mktemp -d /tmp/afs-residual-cap.XXXXXX)
trap 'rm -rf "$RUNS"' EXIT
echo "shift,items,seed,fails,precision,recall,are,backup_bytes,seconds,state_backups" >"$OUT"
for n in 1000000 3000000 10000000; do
  for seed in 1 2 3 4 5; do
    for pair in $SHIFTS; do
      shift_=${pair%%:*} bin=${pair#*:}
      for f in 0 10; do
        d=$RUNS/$shift_-$n-$seed-$f
        timeout 300 "$bin" run --job heavy-hitters --items "$n" --seed "$seed" --ft.mode approx --ft.theta 1e5 \
          --ft.l 1e3 --ft.gamma 1e3 --runtime threads --fail.count "$f" --quiet --out "$d" >/dev/null
        python3 - "$d/summary.csv" "$shift_,$n,$seed,$f" >>"$OUT" <<'PY'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
print(sys.argv[2], *(r[k] for k in ("precision", "recall", "are", "backup_bytes", "seconds", "state_backups")), sep=",")
PY
      done
    done
  done
done
