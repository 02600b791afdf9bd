#!/usr/bin/env bash
# Every algorithm job side by side (issue 4's per-job measurement): for each job, throughput of none / approx (two
# threshold settings) / exact measured in the same rounds (modes interleaved, so machine noise hits all alike), and
# accuracy without failures and, for the approx settings, with FAILS failures of all workers (none and exact run
# without). Medians over ROUNDS; throughput ratios are the median of per-round ratios against none.
#
#   experiments/jobs_table.sh [afstream-binary]
#     ROUNDS=3 ITEMS=10000000 FAILS=10 RUNTIME=threads JOBS="hh ss nexmark join distinct" TEXT_BYTES=100000000 by default
#     (JOBS may also name wordcount, grep, learn-higgs and learn-kdd; OUT=DIR writes elsewhere than experiments/results/jobs;
#     CONFIGS="none,approx A" runs only the configurations named, FAILS=0 no runs with failures)
#
# The jobs and their two approx settings are listed in experiments/job_specs.sh.
#
# Writes OUT/summary.csv (one row per run, with the job label first) and OUT/table.md; every run's directory and log
# stay in OUT/runs/JOB-CONFIG-FAILURES-rROUND{,.log} until the next call.
#
# The join job's approx settings bound Theta + L + Gamma below half its expected samples (10% of ITEMS) when it runs
# with failures: setting A (102000) needs ITEMS of at least about 2.1e6, setting B (11100) about 2.3e5.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-10000000}
FAILS=${FAILS:-10}
RUNTIME=${RUNTIME:-threads}
JOBS=${JOBS:-"hh ss nexmark join distinct"}
OUT=${OUT:-$ROOT/experiments/results/jobs}
# Word count and grep read a corpus, not --items: a generated one of this size (written once under TMPDIR, reused).
TEXT_BYTES=${TEXT_BYTES:-100000000}

# shellcheck source=experiments/job_specs.sh
source "$ROOT/experiments/job_specs.sh"

# Unknown job or configuration names, and settings that are not counts, fail before anything runs or is removed.
require_counts ROUNDS ITEMS FAILS TEXT_BYTES
require_rounds ROUNDS
preflight --runtime "$RUNTIME" --job heavy-hitters
for job in $JOBS; do
  spec=$(job_spec "$job") || exit 2
  case "${spec%%|*}" in *,*) echo "jobs_table.sh: the label of '$job' has a comma (it is a CSV field)" >&2; exit 2 ;; esac
done
if [ -n "${CONFIGS:-}" ]; then
  IFS=',' read -r -a wanted <<<"$CONFIGS"
  for w in "${wanted[@]}"; do
    case "$w" in "none" | "approx A" | "approx B" | "exact") ;;
    *) echo "jobs_table.sh: unknown configuration '$w' in CONFIGS (expected none, approx A, approx B, exact)" >&2; exit 2 ;;
    esac
  done
fi
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/summary.csv" "$OUT"/rows-*.tmp
mkdir -p "$RUNS"

failed=0
for round in $(seq 1 "$ROUNDS"); do
  for job in $JOBS; do
    IFS='|' read -r label jobargs setting_a setting_b <<<"$(job_spec "$job")"
    mapfile -t configs < <(job_configs "$setting_a" "$setting_b")
    for c in "${configs[@]}"; do
      name=${c%%|*}
      args=${c#*|}
      if [ -n "${CONFIGS:-}" ] && [[ ",$CONFIGS," != *",$name,"* ]]; then continue; fi
      fail_counts=(0)
      [ "$FAILS" -gt 0 ] && fail_counts+=("$FAILS")
      for fails in "${fail_counts[@]}"; do
        [ "$name" = none ] && [ "$fails" -gt 0 ] && continue
        [ "$name" = exact ] && [ "$fails" -gt 0 ] && continue
        dir="$RUNS/$job-${name// /}-$fails-r$round"  # one per run: its log stays for a failure's "see"
        echo "round $round: $label, $name ($args), $fails failures" >&2
        start=$(date +%s)
        # shellcheck disable=SC2086
        if ! timeout 1800 "$AFS" run --runtime "$RUNTIME" $jobargs --items "$ITEMS" --seed "$round" --quiet $args \
          --fail.count "$fails" --fail.target all --out "$dir" >"$dir.log" 2>&1; then
          echo "  FAILED (see $dir.log): $(tail -n 1 "$dir.log")" >&2
          failed=$((failed + 1))
          continue
        fi
        echo "  $(($(date +%s) - start)) s" >&2
        [ -f "$OUT/rows-$job.tmp" ] || head -n 1 "$dir/summary.csv" | sed 's/^/label,config,setting,round,/' >"$OUT/rows-$job.tmp"
        setting=$args
        tail -n 1 "$dir/summary.csv" | sed "s|^|$label,$name,$setting,$round,|" >>"$OUT/rows-$job.tmp"
      done
    done
  done
done
: >"$OUT/summary.csv"
for job in $JOBS; do
  [ -f "$OUT/rows-$job.tmp" ] && cat "$OUT/rows-$job.tmp" >>"$OUT/summary.csv" && echo >>"$OUT/summary.csv"
done
rm -f "$OUT"/rows-*.tmp
{
  made_by "ROUNDS=$ROUNDS ITEMS=$ITEMS FAILS=$FAILS RUNTIME=$RUNTIME JOBS=\"$JOBS\" TEXT_BYTES=$TEXT_BYTES${CONFIGS:+ CONFIGS=\"$CONFIGS\"}" "$RUNS"
  python3 "$ROOT/experiments/jobs_summary.py" "$OUT/summary.csv"
} >"$OUT/table.md"
cat "$OUT/table.md"
if [ "$failed" -gt 0 ]; then
  echo "jobs_table.sh: $failed runs failed (their logs are in $RUNS); the table leaves them out" >&2
  exit 1
fi
