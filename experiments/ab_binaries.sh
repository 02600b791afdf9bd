#!/bin/bash
# A/B of two afstream binaries (say, before and after a change) on the jobs of job_specs.sh: in every round each job
# runs under each binary in mode none and at approx setting A, one after the other, so that the host's drift falls on
# all four alike (compare medians of per-round ratios, experiments/README.md). Writes one line per run to OUT:
#   job round before|after none|approx seconds,state_backups,backup_bytes,cpu_s,score
# The columns are taken from the run's summary.csv by name. score: the job's first score, the same column since the
# first A/B files: holdout_accuracy for the learners, precision for hh, ss and nexmark, estimate for join and
# distinct, distinct_words for wordcount, matches for grep. experiments/ab_summary.py DIR makes the table of
# DIR/jobs_ab.txt.
# Usage: BEFORE=/path/afstream AFTER=/path/afstream [ROUNDS=10] [JOBS="hh nexmark"] [ITEMS=3e7] \
#          [BEFORE_ARGS=...] [AFTER_ARGS=...] [APPEND=1] experiments/ab_binaries.sh OUT
# OUT's folder is created. An OUT that exists and is not empty is refused (two series mixed in one file would give
# medians of neither) unless APPEND=1, which adds rounds to it numbered after its last (seeds too: new rounds, not
# repeats; for the same BEFORE, AFTER, JOBS and settings).
# BEFORE_ARGS / AFTER_ARGS: more arguments for that side's approx runs, so that one binary can be compared with
# itself under two settings (BEFORE=AFTER, AFTER_ARGS="--ft.replay-items-max 0 --ft.replay-overhead-max 0").
# (the learners run 1e6 examples whatever ITEMS says). Each run: afstream run --runtime RUNTIME --seed ROUND --quiet,
# RUNTIME=threads unless set (processes: one process per worker and a backup server). A run that fails stops the
# script with the end of its output.
set -euo pipefail
AFS_ARG=none . "$(dirname "$0")/script_start.sh"  # -h; the argument is OUT, not a binary
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=experiments/job_specs.sh
source "$here/job_specs.sh"
OUT=${1:?usage: BEFORE=... AFTER=... ab_binaries.sh OUT}
: "${BEFORE:?set BEFORE to the first afstream binary}" "${AFTER:?set AFTER to the second afstream binary}"
for bin in "$BEFORE" "$AFTER"; do
  if [ -d "$bin" ] || [ ! -x "$bin" ]; then
    echo "ab_binaries.sh: '$bin' is not an executable afstream binary" >&2
    exit 2
  fi
done
ROUNDS=${ROUNDS:-10}
RUNTIME=${RUNTIME:-threads}
JOBS=${JOBS:-"hh nexmark"}
APPEND=${APPEND:-0}
require_rounds ROUNDS
[ -z "${ITEMS:-}" ] || require_counts ITEMS

# The score column of each job in summary.csv (by name, so that new columns cannot shift it).
score_of() {
  case "$1" in
    learn-*) echo holdout_accuracy ;;
    hh | ss | nexmark) echo precision ;;
    join | distinct) echo estimate ;;
    wordcount) echo distinct_words ;;
    grep) echo matches ;;
    *) echo "ab_binaries.sh: no score column known for job '$1'" >&2; return 2 ;;
  esac
}
# Unknown jobs and a used OUT fail before anything runs.
for job in $JOBS; do
  job_spec "$job" >/dev/null || exit 2
  score_of "$job" >/dev/null || exit 2
done
first=1
if [ -s "$OUT" ]; then
  if [ "$APPEND" != 1 ]; then
    echo "ab_binaries.sh: $OUT exists and is not empty; name a new file, or set APPEND=1 to add rounds to it" >&2
    exit 2
  fi
  first=$(($(awk '$2 ~ /^[0-9]+$/ && $2 > m { m = $2 } END { print m + 0 }' "$OUT") + 1))
  echo "ab_binaries.sh: appending to $OUT from round $first" >&2
fi
mkdir -p "$(dirname "$OUT")"
touch "$OUT"
last=$((first + ROUNDS - 1))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$first" "$last"); do
  for job in $JOBS; do
    IFS='|' read -r _ args approx_a _ <<<"$(job_spec "$job")"
    items=${ITEMS:-30000000}
    score=$(score_of "$job")
    case "$job" in learn-*) items=1000000 ;; esac
    for bin in before after; do
      exe=$BEFORE side_args=${BEFORE_ARGS:-}
      [ "$bin" = after ] && exe=$AFTER side_args=${AFTER_ARGS:-}
      for mode in none approx; do
        extra=""
        [ "$mode" = approx ] && extra="$approx_a --ft.gamma 1e3 $side_args"
        rm -rf "$tmp/run"
        # shellcheck disable=SC2086  # job arguments are words
        if ! "$exe" run $args --items "$items" --seed "$r" --ft.mode "$mode" $extra --runtime "$RUNTIME" --quiet \
          --out "$tmp/run" >"$tmp/run.log" 2>&1; then
          echo "ab_binaries.sh: $job round $r, $bin ($exe), $mode failed:" >&2
          tail -n 5 "$tmp/run.log" >&2
          exit 1
        fi
        vals=$(/usr/bin/python3 - "$tmp/run/summary.csv" "$score" <<'PY'
import csv, sys
with open(sys.argv[1]) as f:
    row = list(csv.DictReader(f))[-1]
cols = ["seconds", "state_backups", "backup_bytes", "cpu_s", sys.argv[2]]
missing = [c for c in cols if c not in row]
if missing:
    sys.exit(f"ab_binaries.sh: no column {', '.join(missing)} in {sys.argv[1]}")
print(",".join(row[c] for c in cols))
PY
)
        echo "$job $r $bin $mode $vals" >>"$OUT"
      done
    done
  done
  echo "ab_binaries: round $r of $last done" >&2
done
