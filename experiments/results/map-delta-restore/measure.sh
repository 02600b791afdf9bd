#!/usr/bin/env bash
# Restores of map-based operators, before and after they applied their deltas in place (TrackedMap::read_delta), in
# alternating rounds on the process runtime, 5 failures of all workers (approx):
#  - join: 4e6 tuples over 1e6 keys (two ripple-join workers, four maps each, and the merge);
#  - wordcount: a 30 MB synthetic corpus (the count workers' word maps).
# One row per binary, job and round: the run's seconds, and over all its failures the sum and the largest of the
# workers' restore times (failures.csv: fetching and applying the backup chain).
# Usage: ROUNDS=3 experiments/results/map-delta-restore/measure.sh BEFORE_BINARY AFTER_BINARY > rows.csv
set -euo pipefail
before=${1:?before binary}; after=${2:?after binary}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
restores() { awk -F, 'NR > 1 { s += $15; if ($15 > m) m = $15 } END { printf "%.1f,%.1f", s, m }' "$1"; }
echo "round,binary,job,seconds,restore_ms_sum,restore_ms_max"
for r in $(seq 1 "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    rm -rf "$tmp/j"
    "$bin" run --job join --items 4e6 --join.keys 1e6 --seed "$r" --runtime processes --ft.mode approx \
      --fail.count 5 --quiet --out "$tmp/j" >/dev/null 2>&1
    echo "$r,$name,join,$(tail -1 "$tmp/j/summary.csv" | cut -d, -f8),$(restores "$tmp/j/failures.csv")"
    rm -rf "$tmp/w"
    "$bin" run --job wordcount --text.synthetic-bytes 30000000 --seed "$r" --runtime processes --ft.mode approx \
      --fail.count 5 --quiet --out "$tmp/w" >/dev/null 2>&1
    echo "$r,$name,wordcount,$(tail -1 "$tmp/w/summary.csv" | cut -d, -f8),$(restores "$tmp/w/failures.csv")"
  done
done
