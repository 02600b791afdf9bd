#!/bin/bash
B=${B:-/tmp/afs_src}  # a build with the scratch patch below
for r in $(seq 1 ${ROUNDS:-6}); do
  for c in none approx approx-rare; do
    m=${c%-*}; env=""; [ "$c" = approx-rare ] && env="AFS_SRC_RARE=1"
    env $env timeout 300 $B run --job learn --learn.data kdd --items 1000000 --seed $r --ft.mode $m --ft.theta 10 --ft.l 1e3 --runtime processes --quiet --out /tmp/srcx/$c-$r >/dev/null 2>&1 || echo "failed $c $r"
  done
done
