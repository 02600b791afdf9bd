#!/usr/bin/env bash
# CPU and wall time a failure of all workers costs the KDD-like learn job on worker processes, with restarts that
# start the program anew and with the fork server: per round, 0 failures, then 8 with each (interleaved). Prints one
# line per run (cpu_s and seconds from the run's summary.csv).
#   experiments/results/fork-server/cpu_per_failure.sh [afstream-binary] > OUT.txt      (ROUNDS=5 by default)
set -euo pipefail
AFS=${1:-build/afstream/cli/afstream}
ROUNDS=${ROUNDS:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for cfg in "0 true" "8 false" "8 true"; do
    set -- $cfg
    rm -rf "$out/run"
    "$AFS" run --job learn --learn.data kdd --items 1000000 --runtime processes --seed "$r" --quiet \
      --ft.mode approx --ft.theta 10 --ft.l 1000 --fail.count "$1" --process.fork-server="$2" --out "$out/run" \
      >/dev/null 2>&1
    /usr/bin/python3 -c "
import csv, sys
r = list(csv.DictReader(open('$out/run/summary.csv')))[-1]
print('round $r failures $1 fork-server $2: seconds %.2f cpu_s %.2f recovery_ms_median %s' % (
    float(r['seconds']), float(r['cpu_s']), r.get('recovery_ms_median')))"
  done
done
