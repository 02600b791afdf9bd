#!/usr/bin/env bash
# The demo: heavy hitters over a Zipf packet stream on the embedded local cluster, without failures and with 10
# failures of all workers (as in the paper), under approximate fault tolerance; then the exact baseline with the
# same failures. Prints accuracy and throughput side by side; run directories go to experiments/results/runs/demo.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
OUT=${OUT:-$ROOT/experiments/results/runs/demo}
ITEMS=${ITEMS:-10000000}
mkdir -p "$OUT"
# Only the files a run writes: OUT may be a folder of other results.
rm -f "$OUT"/{summary.csv,config.ini,meta.json,metrics.jsonl,failures.csv,heavy_hitters.csv}
common=(--job heavy-hitters --items "$ITEMS" --seed 1 --out "$OUT" --quiet)
echo "== heavy hitters, $ITEMS packets, Theta=1e5 L=1e3 Gamma=1e3 =="
"$AFS" run "${common[@]}" --ft.mode none
"$AFS" run "${common[@]}" --ft.mode approx
"$AFS" run "${common[@]}" --ft.mode approx --fail.count 10 --fail.target all
"$AFS" run "${common[@]}" --ft.mode exact --fail.count 10 --fail.target all
echo
echo "summary ($OUT/summary.csv, chosen columns):"
# The columns by name (the file has about 30: a cut of its width hid the accuracy).
awk -F, -v want="mode failures failures_fired items_per_s state_backups recovery_ms_median precision recall are" '
  NR == 1 { n = split(want, w, " "); for (i = 1; i <= NF; i++) col[$i] = i }
  { line = ""; for (j = 1; j <= n; j++) line = line (j > 1 ? "," : "") (w[j] in col ? $(col[w[j]]) : "?"); print line }
' "$OUT/summary.csv" | column -s, -t
