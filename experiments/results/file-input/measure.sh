#!/bin/bash
# Heavy hitters on a file of items (--hh.input) with and without failures of all workers, on threads and on worker
# processes, for one or more afstream binaries in turns: the run's seconds, CPU seconds and the median recovery time
# (kill to the new incarnation's hello). The file: `afstream gen` of ITEMS Zipf items with packet weights.
# Usage: [ROUNDS=3] [ITEMS=5e6] measure.sh BINARY [BINARY ...] > rows.csv
set -euo pipefail
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-5e6}
[ $# -ge 1 ] || { echo "usage: [ROUNDS=3] [ITEMS=5e6] measure.sh BINARY [BINARY ...]" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$1" gen --job heavy-hitters --items "$ITEMS" --quiet --out "$tmp/items.csv" 2>/dev/null
field() {  # field NAME: the named column of the run's summary.csv
  /usr/bin/python3 -c "import csv,sys; print(next(csv.DictReader(open('$tmp/run/summary.csv')))[sys.argv[1]])" "$1"
}
echo "round,binary,runtime,failures,seconds,cpu_s,recovery_ms_median,precision"
for r in $(seq "$ROUNDS"); do
  for runtime in threads processes; do
    for f in 0 2; do
      for bin in "$@"; do
        echo "round $r: $bin, $runtime, $f failures" >&2
        rm -rf "$tmp/run"
        "$bin" run --job heavy-hitters --hh.input "$tmp/items.csv" --hh.phi 1e8 --seed "$r" --runtime "$runtime" \
          --fail.count "$f" --quiet --out "$tmp/run" >/dev/null 2>&1
        echo "$r,$bin,$runtime,$f,$(field seconds),$(field cpu_s),$(field recovery_ms_median),$(field precision)"
      done
    done
  done
done
