#!/bin/bash
# The backup server's compactions of the learners' chains on worker processes (KDD-like, 5e6 examples, RocksDB):
# per round, mode none, approx at setting A with the server compacting at 4x the snapshot (the learn job's default
# before 2026-12-04) and approx with no compaction in the server (0, the default since). One line per run:
#   round config seconds cpu_s state_backups backup_bytes holdout_accuracy compactions_applied compactions_superseded
# Usage: [ROUNDS=5] [ITEMS=5000000] [DATA=kdd] experiments/results/process-runtime/learners/compaction/run.sh OUT
set -euo pipefail
OUT=${1:?usage: run.sh OUT}
AFS=${AFS:-build/afstream/cli/afstream}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "${ROUNDS:-5}"); do
  for cfg in "none|--ft.mode none" \
             "approx4|--ft.mode approx --ft.theta 10 --ft.l 1000 --process.store-compact-ratio 4" \
             "approx0|--ft.mode approx --ft.theta 10 --ft.l 1000 --process.store-compact-ratio 0"; do
    name=${cfg%%|*} args=${cfg#*|}
    rm -rf "$tmp/run"
    # shellcheck disable=SC2086  # the config's arguments are words
    "$AFS" run --job learn --learn.data "${DATA:-kdd}" --items "${ITEMS:-5000000}" --runtime processes --seed "$r" \
      --quiet $args --out "$tmp/run" >"$tmp/log" 2>&1
    # The server's stop line: "N chain compactions (...), M superseded, ..."
    comp=$(sed -n 's/.*backup-server: \([0-9]*\) chain compactions.*, \([0-9]*\) superseded.*/\1 \2/p' "$tmp/log")
    vals=$(/usr/bin/python3 -c "
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
print(r['seconds'], r['cpu_s'], r['state_backups'], r['backup_bytes'], r['holdout_accuracy'])" "$tmp/run/summary.csv")
    echo "$r $name $vals ${comp:-0 0}" >>"$OUT"
  done
  echo "compaction: round $r done" >&2
done
