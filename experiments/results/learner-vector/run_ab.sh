#!/bin/bash
# Alternating runs of two afstream binaries (BEFORE, AFTER), modes none and approx A, per job; appends one line per
# run to jobs_ab.txt: job round binary mode seconds,state_backups,backup_bytes,cpu_s,holdout_accuracy.
# Usage: BEFORE=/path/afstream AFTER=/path/afstream ROUNDS=10 JOBS="learn-kdd learn-higgs" run_ab.sh [OUTDIR]
set -euo pipefail
OUT=${1:-$(dirname "$0")}
ROUNDS=${ROUNDS:-10}
JOBS=${JOBS:-"learn-kdd learn-higgs"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
  for job in $JOBS; do
    data=${job#learn-}
    for bin in before after; do
      exe=$BEFORE; [ "$bin" = after ] && exe=$AFTER
      for mode in none approx; do
        rm -rf "$tmp/run"
        "$exe" run --job learn --learn.data "$data" --items 1000000 --seed "$r" --ft.mode "$mode" \
          --ft.theta 10 --ft.l 1e3 --ft.gamma 1e3 --runtime threads --quiet --out "$tmp/run" >/dev/null 2>&1
        vals=$(/usr/bin/python3 -c "import csv,sys; row=next(csv.DictReader(open(sys.argv[1]))); \
print(','.join(row[k] for k in ['seconds','state_backups','backup_bytes','cpu_s','holdout_accuracy']))" \
          "$tmp/run/summary.csv")
        echo "$job $r $bin $mode $vals" | tee -a "$OUT/jobs_ab.txt"
      done
    done
  done
  echo "round $r of $ROUNDS done" >&2
done
