#!/usr/bin/env bash
# What the exactly-once sink costs (issue 6, item 6): items/s of the copy job (Zipf source -> 2 pass-through relays
# -> sink) in exact mode with the exactly-once sink (RocksDB effects table) against the count sink (same state, no
# database), no failures, every (runtime, sink) in every round, interleaved so machine noise hits them alike. Ratios
# are taken within a round, then the median over rounds. Each run's table is checked: the script fails unless
# exactly_once is 1 in every run.
#
#   experiments/sink_throughput.sh [afstream-binary]      (ROUNDS=3 ITEMS=2000000 by default)
#
# Writes experiments/results/sink/summary.csv (one row per run) and table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
ITEMS=${ITEMS:-2000000}
OUT=${OUT:-$ROOT/experiments/results/sink}
require_counts ROUNDS ITEMS
require_rounds ROUNDS
mkdir -p "$OUT"
RUNS=$(mktemp -d /tmp/afs-sink-bench.XXXXXX)
trap 'rm -rf "$RUNS"' EXIT
rm -f "$OUT/summary.csv"
first=1
for round in $(seq 1 "$ROUNDS"); do
  for runtime in threads processes; do
    for sink in count exactly-once; do
      dir="$RUNS/$round-$runtime-$sink"
      echo "round $round: $runtime, $sink" >&2
      "$AFS" run --job copy --items "$ITEMS" --seed "$round" --quiet --ft.mode exact --runtime "$runtime" \
        --copy.sink "$sink" --copy.db "$dir/db" --out "$dir" >"$dir.log" 2>&1 ||
        { echo "  FAILED: $(grep -m1 error "$dir.log")" >&2; exit 1; }
      echo "  $(grep -m1 " items in " "$dir.log")" >&2
      if [ "$first" = 1 ]; then
        head -n 1 "$dir/summary.csv" | sed 's/^/runtime,sink,round,/' >"$OUT/summary.csv"
        first=0
      fi
      tail -n 1 "$dir/summary.csv" | sed "s/^/$runtime,$sink,$round,/" >>"$OUT/summary.csv"
    done
  done
done
{
  made_by "ROUNDS=$ROUNDS ITEMS=$ITEMS" "$RUNS"
  /usr/bin/python3 - "$OUT/summary.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| runtime | count sink items/s (median) | exactly-once sink items/s (median) | ratio (median of per-round) | exactly_once |")
print("|---|---|---|---|---|")
for rt in ("threads", "processes"):
    by = {}
    for r in rows:
        if r["runtime"] == rt:
            by.setdefault(r["round"], {})[r["sink"]] = r
    ratios = [float(v["exactly-once"]["items_per_s"]) / float(v["count"]["items_per_s"]) for v in by.values()]
    c = statistics.median(float(v["count"]["items_per_s"]) for v in by.values())
    e = statistics.median(float(v["exactly-once"]["items_per_s"]) for v in by.values())
    ok = all(v["exactly-once"]["exactly_once"] == "1" for v in by.values())
    print(f"| {rt} | {c:.3g} | {e:.3g} | {100 * statistics.median(ratios):.0f}% | {'all runs' if ok else 'NOT ALL'} |")
PY
} >"$OUT/table.md"
cat "$OUT/table.md"
if grep -q "NOT ALL" "$OUT/table.md"; then
  echo "sink_throughput.sh: a run's table did not hold every effect exactly once (exactly_once 0 in $OUT/summary.csv)" >&2
  exit 1
fi
