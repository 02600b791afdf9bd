#!/usr/bin/env bash
# Instructions each fault-tolerance mode costs, per job, counted by valgrind's callgrind: a deterministic measure of
# the work a mode adds, beside the wall-time and CPU-time ratios of jobs_table.sh, which on a shared 2-core machine
# move by 10-30 points between rounds of the same command (the same binary's pure computation, such as the Zipf
# generator, runs up to 1.3 times slower in one round than in the next). Counted: the job's threads (every worker's
# thread, its backup thread, ZeroMQ's I/O threads: every thread but the main one, which parses options, builds the
# workers and their sources, runs the controller's loop and evaluates the result), not the set-up and evaluation the
# modes share. Instructions are not time (a checksum retires many bytes per instruction, a cache miss costs hundreds
# of cycles and no instruction; valgrind counts each byte a rep-prefixed memcpy or memset moves as an instruction,
# so the table also gives the counts without glibc's string functions), so this says where a mode's extra work is,
# not what it costs in seconds; diff-JOB.txt lists the functions whose counts differ most, approx A against none.
#
#   experiments/instructions.sh [afstream-binary]
#     JOBS="hh ss nexmark join distinct wordcount grep learn-higgs learn-kdd" ITEMS=2000000 LEARN_ITEMS=200000
#     TEXT_BYTES=20000000 by default (OUT=DIR writes elsewhere than experiments/results/instructions)
#
# Threads runtime, no failures, seed 1. Under callgrind a run takes 20 to 60 times as long (the threads take turns):
# about 13 minutes for the default list here. Writes OUT/summary.csv, OUT/table.md and OUT/diff-JOB.txt.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
JOBS=${JOBS:-"hh ss nexmark join distinct wordcount grep learn-higgs learn-kdd"}
ITEMS=${ITEMS:-2000000}
LEARN_ITEMS=${LEARN_ITEMS:-200000}
TEXT_BYTES=${TEXT_BYTES:-20000000}
OUT=${OUT:-$ROOT/experiments/results/instructions}
HERE=$ROOT/experiments
# shellcheck source=experiments/job_specs.sh
source "$HERE/job_specs.sh"

require_counts ITEMS LEARN_ITEMS TEXT_BYTES
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  bash "$HERE/../.ci/install-deps" valgrind
fi
[ -x "$AFS" ] || { echo "instructions.sh: no afstream binary at $AFS (build first: make build)" >&2; exit 2; }
for job in $JOBS; do job_spec "$job" >/dev/null || exit 2; done  # unknown names fail before anything runs

REVISION=$(binary_revision)
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS"
mkdir -p "$RUNS"
echo "job,label,config,setting,items,job_ir,job_ir_without_strings,items_per_s_under_valgrind" >"$OUT/summary.csv"
for job in $JOBS; do
  IFS='|' read -r label jobargs setting_a setting_b <<<"$(job_spec "$job")"
  items=$ITEMS
  case "$job" in learn-*) items=$LEARN_ITEMS ;; esac
  mapfile -t configs < <(job_configs "$setting_a" "$setting_b")
  for c in "${configs[@]}"; do
    name=${c%%|*}
    args=${c#*|}
    tag="$job-${name// /-}"
    echo "$label, $name ($args): under callgrind" >&2
    start=$(date +%s)
    # shellcheck disable=SC2086
    if ! timeout 3600 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$RUNS/$tag.cg" \
      "$AFS" run --runtime threads $jobargs --items "$items" --seed 1 --quiet $args --out "$RUNS/$tag" \
      >"$RUNS/$tag.log" 2>&1; then
      echo "  FAILED (see $RUNS/$tag.log): $(tail -n 1 "$RUNS/$tag.log")" >&2
      continue
    fi
    python3 "$HERE/instructions_summary.py" row "$RUNS/$tag.cg" "$RUNS/$tag/summary.csv" \
      "$job" "$label" "$name" "$args" >>"$OUT/summary.csv"
    echo "  $(($(date +%s) - start)) s" >&2
  done
  if [ -f "$RUNS/$job-none.cg-01" ] && [ -f "$RUNS/$job-approx-A.cg-01" ]; then
    python3 "$HERE/instructions_summary.py" diff "$RUNS/$job-none.cg" "$RUNS/$job-approx-A.cg" \
      >"$OUT/diff-$job.txt"
  fi
done
{
  echo "Made by \`JOBS=\"$JOBS\" ITEMS=$ITEMS LEARN_ITEMS=$LEARN_ITEMS TEXT_BYTES=$TEXT_BYTES experiments/instructions.sh\`" \
    "($(date +%F), revision $REVISION, $(valgrind --version))."
  echo
  python3 "$HERE/instructions_summary.py" table "$OUT/summary.csv"
} >"$OUT/table.md"
rm -f "$RUNS"/*.cg "$RUNS"/*.cg-*  # large; the diffs and the table keep what they showed
cat "$OUT/table.md"
