#!/bin/bash
# The KDD-like learner's backup interval behind its replayable source (--ft.replay-items-max N: a state backup at
# least every N examples, so a failure makes the learners process at most N examples again): what each N costs
# without failures (approx against none, same round) and with 8 failures of all workers (converged seconds against
# the same N's failure-free run). Threads runtime, 1e6 examples, approx at Theta 10 / L 1e3 / Gamma 1e3.
# Usage: [ROUNDS=4] [SETTINGS="2048 4096 16384 65536"] [RUNTIME=threads] frontier.sh BINARY > rows.csv
set -euo pipefail
AFS=${1:-build/afstream/cli/afstream}
ROUNDS=${ROUNDS:-4}
SETTINGS=${SETTINGS:-"2048 4096 16384 65536"}
RUNTIME=${RUNTIME:-threads}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() {  # field NAME: the named column of the run's summary.csv
  /usr/bin/python3 -c "import csv,sys; print(next(csv.DictReader(open('$tmp/run/summary.csv')))[sys.argv[1]])" "$1"
}
echo "round,setting,failures,seconds,cpu_s,converged_seconds,holdout_accuracy,state_backups,backup_bytes"
for r in $(seq "$ROUNDS"); do
  for s in none $SETTINGS; do
    for f in 0 8; do
      [ "$s" = none ] && [ "$f" = 8 ] && continue
      args=(--ft.mode none)
      [ "$s" != none ] && args=(--ft.mode approx --ft.theta 10 --ft.l 1e3 --ft.gamma 1e3 --ft.replay-items-max "$s")
      [ "$f" = 8 ] && args+=(--fail.count 8 --fail.target all)
      echo "round $r: $s, $f failures" >&2
      rm -rf "$tmp/run"
      "$AFS" run --job learn --learn.data kdd --items 1000000 --seed "$r" --runtime "$RUNTIME" --quiet \
        "${args[@]}" --out "$tmp/run" >/dev/null 2>&1
      echo "$r,$s,$f,$(field seconds),$(field cpu_s),$(field converged_seconds),$(field holdout_accuracy),$(field state_backups),$(field backup_bytes)"
    done
  done
done
