#!/bin/bash
# A/B of two afstream binaries (say, before and after a change) on the jobs of job_specs.sh: in every round each job
# runs under each binary in mode none and at approx setting A, one after the other, so that the host's drift falls on
# all four alike (compare medians of per-round ratios, experiments/README.md). Appends one line per run to OUT:
#   job round before|after none|approx seconds,state_backups,backup_bytes,cpu_s,score
# score: holdout_accuracy for the learners, else the job's first score column (precision for heavy hitters).
# Usage: BEFORE=/path/afstream AFTER=/path/afstream [ROUNDS=10] [JOBS="hh nexmark"] [ITEMS=3e7] \
#          [BEFORE_ARGS=...] [AFTER_ARGS=...] experiments/ab_binaries.sh OUT
# BEFORE_ARGS / AFTER_ARGS: more arguments for that side's approx runs, so that one binary can be compared with
# itself under two settings (BEFORE=AFTER, AFTER_ARGS="--ft.replay-items-max 0 --ft.replay-overhead-max 0").
# (the learners run 1e6 examples whatever ITEMS says). Each run: afstream run --runtime RUNTIME --seed ROUND --quiet,
# RUNTIME=threads unless set (processes: one process per worker and a backup server).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/job_specs.sh"
OUT=${1:?usage: BEFORE=... AFTER=... ab_binaries.sh OUT}
: "${BEFORE:?set BEFORE to the first afstream binary}" "${AFTER:?set AFTER to the second afstream binary}"
ROUNDS=${ROUNDS:-10}
RUNTIME=${RUNTIME:-threads}
JOBS=${JOBS:-"hh nexmark"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
  for job in $JOBS; do
    IFS='|' read -r _ args approx_a _ <<<"$(job_spec "$job")"
    items=${ITEMS:-30000000}
    score=""
    case "$job" in learn-*) items=1000000 score=holdout_accuracy ;; esac
    for bin in before after; do
      exe=$BEFORE side_args=${BEFORE_ARGS:-}
      [ "$bin" = after ] && exe=$AFTER side_args=${AFTER_ARGS:-}
      for mode in none approx; do
        extra=""
        [ "$mode" = approx ] && extra="$approx_a --ft.gamma 1e3 $side_args"
        rm -rf "$tmp/run"
        # shellcheck disable=SC2086  # job arguments are words
        "$exe" run $args --items "$items" --seed "$r" --ft.mode "$mode" $extra --runtime "$RUNTIME" --quiet \
          --out "$tmp/run" >/dev/null 2>&1
        vals=$(/usr/bin/python3 - "$tmp/run/summary.csv" "$score" <<'PY'
import csv, sys
with open(sys.argv[1]) as f:
    header = next(csv.reader(f))
    f.seek(0)
    row = next(csv.DictReader(f))
score = sys.argv[2] or header[header.index("cpu_s") + 1]
print(",".join(row[k] for k in ["seconds", "state_backups", "backup_bytes", "cpu_s", score]))
PY
)
        echo "$job $r $bin $mode $vals" >>"$OUT"
      done
    done
  done
  echo "ab_binaries: round $r of $ROUNDS done" >&2
done
