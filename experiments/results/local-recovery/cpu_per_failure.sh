#!/usr/bin/env bash
# CPU and wall time of the KDD-like learn job on worker processes (1e6 examples, approx at Theta 10 / L 1e3) with
# local recovery on and off (--process.local-recovery), with 0 and with 8 failures of all workers; the four runs of
# a round interleaved. One line per run (seconds, cpu_s and the median recovery from the run's summary.csv).
#   experiments/results/local-recovery/cpu_per_failure.sh [afstream-binary] > OUT.txt      (ROUNDS=5 by default)
set -euo pipefail
AFS=${1:-build/afstream/cli/afstream}
ROUNDS=${ROUNDS:-5}
ITEMS=${ITEMS:-1000000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for cfg in "0 true" "0 false" "8 false" "8 true"; do
    set -- $cfg
    rm -rf "$out/run"
    "$AFS" run --job learn --learn.data kdd --items "$ITEMS" --runtime processes --seed "$r" --quiet \
      --ft.mode approx --ft.theta 10 --ft.l 1000 --fail.count "$1" --process.local-recovery="$2" --out "$out/run" \
      >/dev/null 2>&1
    /usr/bin/python3 -c "
import csv
r = list(csv.DictReader(open('$out/run/summary.csv')))[-1]
print('round $r failures $1 local-recovery $2: seconds %.3f cpu_s %.3f recovery_ms_median %s holdout %s' % (
    float(r['seconds']), float(r['cpu_s']), r.get('recovery_ms_median'), r.get('holdout_accuracy')))"
  done
done
