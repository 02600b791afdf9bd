#!/bin/bash
# none / approx / approx with the backup server at nice 10, alternating, worker processes.
B=${B:-/tmp/afs_nice}  # a build with the scratch patch below
for r in $(seq 1 ${ROUNDS:-6}); do
  for job in heavy-hitters nexmark-hot-items; do
    for c in none approx approx-nice; do
      m=${c%-nice}; env=""; [ "$c" = approx-nice ] && env="AFS_SERVER_NICE=10"
      env $env timeout 300 $B run --job $job --items 30000000 --seed $r --ft.mode $m --runtime processes --quiet --out /tmp/nice/$job-$c-$r >/dev/null 2>&1 || echo "failed $job $c $r"
    done
  done
done
