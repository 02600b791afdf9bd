#!/bin/bash
# A/B: the fork server with and without prebuilt sources; heavy hitters on worker processes, failures of all workers.
for r in 1 2 3 4 5; do
  for b in before after; do
    timeout 300 ${AFS_DIR:-/tmp}/afs_$b run --job heavy-hitters --items 5000000 --seed $r --ft.mode approx --fail.count 4 --fail.target all --quiet --runtime processes --out ${OUT:-/tmp/fsab}/$b-$r >/dev/null 2>&1 || echo "run $b $r failed"
  done
done
