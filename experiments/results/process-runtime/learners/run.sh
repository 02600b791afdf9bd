#!/bin/bash
# The learn job on worker processes: none, approx at setting A with the job's defaults (ft.replay-items-max 4096,
# ft.replay-overhead-max 0.01), and approx with the cap lifted (--ft.replay-items-max 0: the cost rule alone), for
# both data sets, interleaved in every round. Appends "data round config seconds,state_backups,backup_bytes,cpu_s,
# holdout_accuracy" lines to OUT.   Usage: AFS=build/afstream/cli/afstream ROUNDS=5 run.sh OUT
set -euo pipefail
AFS=${AFS:-build/afstream/cli/afstream}
OUT=${1:?usage: run.sh OUT}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "${ROUNDS:-5}"); do
  for data in higgs kdd; do
    for config in none approx approx-uncapped; do
      case $config in
        none) args="--ft.mode none" ;;
        approx) args="--ft.mode approx --ft.theta 10 --ft.l 1e3 --ft.gamma 1e3" ;;
        approx-uncapped) args="--ft.mode approx --ft.theta 10 --ft.l 1e3 --ft.gamma 1e3 --ft.replay-items-max 0" ;;
      esac
      rm -rf "$tmp/run"
      # shellcheck disable=SC2086
      "$AFS" run --runtime processes --job learn --learn.data "$data" --items 1000000 --seed "$r" $args --quiet \
        --out "$tmp/run" >/dev/null 2>&1
      vals=$(/usr/bin/python3 -c '
import csv, sys
row = next(csv.DictReader(open(sys.argv[1])))
print(",".join(row[k] for k in ["seconds", "state_backups", "backup_bytes", "cpu_s", "holdout_accuracy"]))' \
        "$tmp/run/summary.csv")
      echo "$data $r $config $vals" >>"$OUT"
    done
  done
  echo "round $r done" >&2
done
