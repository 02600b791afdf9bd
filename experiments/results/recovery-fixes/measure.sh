#!/usr/bin/env bash
# Two recovery fixes of 2026-12-06, before and after, in alternating rounds (threads runtime):
#  - copy: a stateless relay behind the replayable source, both relays killed 5 times (approx): duplicates and seconds;
#  - wordcount: ack mode, the source killed at 90% of the input: the trees (chunks) a restarted source produced again.
# Usage: ROUNDS=3 experiments/results/recovery-fixes/measure.sh BEFORE_BINARY AFTER_BINARY > rows.csv
set -euo pipefail
before=${1:?before binary}; after=${2:?after binary}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "round,binary,job,seconds,duplicates,gaps,trees_replayed"
for r in $(seq 1 "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    rm -rf "$tmp/db" "$tmp/c"
    out=$("$bin" run --job copy --items 2e6 --copy.sink count --copy.db "$tmp/db" --seed "$r" --runtime threads \
      --ft.mode approx --fail.count 5 --fail.target 1,2 --quiet --out "$tmp/c" 2>&1)
    dup=$(sed -n 's/.*delivery: \([0-9]*\) duplicates dropped, \([0-9]*\) items never.*/\1,\2/p' <<<"$out")
    secs=$(tail -1 "$tmp/c/summary.csv" | cut -d, -f8)
    echo "$r,$name,copy,$secs,$dup,"
    rm -rf "$tmp/w"
    "$bin" run --job wordcount --text.synthetic-bytes 20000000 --seed "$r" --runtime threads --ft.mode ack \
      --fail.at 0.9 --fail.target 0 --quiet --out "$tmp/w" >/dev/null 2>&1
    row=$(tail -1 "$tmp/w/summary.csv")
    echo "$r,$name,wordcount,$(cut -d, -f8 <<<"$row"),,,$(cut -d, -f14 <<<"$row")"
  done
done
