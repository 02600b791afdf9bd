#!/bin/bash
# Every job in every exact mode and approx, on both runtimes, with 4 failures at random points (--fail.random 4);
# one line per run: seed, job, mode, runtime, exit status, seconds, the last line of its output (its scores).
#   experiments/results/modes-random-failures/run.sh [afstream-binary] > results.txt
AFS=${1:-$(cd "$(dirname "$0")/../../.." && pwd)/build/afstream/cli/afstream}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for seed in 1 2; do
for job in heavy-hitters distinct join nexmark-hot-items wordcount learn ps; do
for mode in approx exact ack checkpoint microbatch ask; do
for rt in processes threads; do
  [ "$job" = ps ] && [ "$mode" = checkpoint ] && continue
  items=2000000; [ "$job" = learn ] && items=200000; [ "$job" = ps ] && items=50000
  extra=""; [ "$job" = join ] && extra="--ft.theta 1000"  # Theorem 3's interval needs Theta + L + Gamma below n / 2
  out="$TMP"/o-$job-$mode-$rt-$seed
  rm -rf "$out"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # $extra: an option or none
  timeout 180 "$AFS" run --job "$job" --items "$items" --ft.mode "$mode" --runtime "$rt" --seed "$seed" --fail.random 4 $extra --quiet --out "$out" >"$out.log" 2>&1
  rc=$?
  el=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
  echo "$seed $job $mode $rt rc=$rc ${el}s $(tail -1 "$out.log" | cut -c1-160)"
done; done; done; done
