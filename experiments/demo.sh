#!/usr/bin/env bash
# The demo: heavy hitters over a Zipf packet stream on the embedded local cluster, without failures and with 10
# failures of all workers (as in the paper), under approximate fault tolerance; then the exact baseline with the
# same failures. Prints accuracy and throughput side by side; run directories go to experiments/results/runs/demo.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
OUT=${OUT:-$ROOT/experiments/results/runs/demo}
ITEMS=${ITEMS:-10000000}
rm -rf "$OUT"
mkdir -p "$OUT"
common=(--job heavy-hitters --items "$ITEMS" --seed 1 --out "$OUT" --quiet)
echo "== heavy hitters, $ITEMS packets, Theta=1e5 L=1e3 Gamma=1e3 =="
"$AFS" run "${common[@]}" --ft.mode none
"$AFS" run "${common[@]}" --ft.mode approx
"$AFS" run "${common[@]}" --ft.mode approx --fail.count 10 --fail.target all
"$AFS" run "${common[@]}" --ft.mode exact --fail.count 10 --fail.target all
echo
echo "summary ($OUT/summary.csv):"
column -s, -t < "$OUT/summary.csv" | cut -c1-200
