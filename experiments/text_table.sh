#!/usr/bin/env bash
# Word count and grep throughput: ft.mode none vs approx (Theta 1e4, L 1e3, Gamma 1e3) vs exact, on a generated
# corpus (TEXT_BYTES, default 150 MB, in 32 files written once to TEXT_DIR and reused), ROUNDS rounds (default 3)
# with every mode in every round, medians; "vs none" is the median of the per-round ratios of bytes/s, "exact" says
# whether every run's counts or matches were right (words_wrong, missing, extra all 0).
#
#   experiments/text_table.sh [afstream-binary]
#     ROUNDS=3 RUNTIME=threads TEXT_BYTES=150000000 TEXT_DIR=$TMPDIR/afstream-text-bench-TEXT_BYTES by default
#     (OUT=DIR writes elsewhere than experiments/results/text)
#
# Writes OUT/summary-{wordcount,grep}.csv (one row per run, the round first) and OUT/table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-threads}
TEXT_BYTES=${TEXT_BYTES:-150000000}
TEXT_DIR=${TEXT_DIR:-${TMPDIR:-/tmp}/afstream-text-bench-$TEXT_BYTES}
OUT=${OUT:-$ROOT/experiments/results/text}
require_counts ROUNDS TEXT_BYTES
require_rounds ROUNDS
preflight --job wordcount --runtime "$RUNTIME"
mkdir -p "$OUT"
rm -f "$OUT"/rows-*.csv
COMMON="--runtime $RUNTIME --text.synthetic-bytes $TEXT_BYTES --text.synthetic-files 32 --text.synthetic-dir $TEXT_DIR --quiet"
for round in $(seq 1 "$ROUNDS"); do
  for job in wordcount grep; do
    for mode in none approx exact; do
      case $mode in
        approx) FT="--ft.mode approx --ft.theta 1e4 --ft.l 1e3 --ft.gamma 1e3" ;;
        *) FT="--ft.mode $mode" ;;
      esac
      echo "round $round: $job $mode" >&2
      # shellcheck disable=SC2086  # options are words
      "$AFS" run --job "$job" $COMMON $FT --out "$OUT/runs/$job-$mode" >/dev/null 2>"$OUT/last-stderr.txt" ||
        { echo "text_table.sh: run failed (see $OUT/last-stderr.txt): $(tail -n 1 "$OUT/last-stderr.txt")" >&2; exit 1; }
      # summary.csv of that run: one header + rows; append its last row with the round.
      tail -n 1 "$OUT/runs/$job-$mode/summary.csv" | sed "s/^/$round,/" >>"$OUT/rows-$job.csv"
      head -n 1 "$OUT/runs/$job-$mode/summary.csv" | sed "s/^/round,/" >"$OUT/header-$job.csv"
    done
  done
done
for job in wordcount grep; do
  cat "$OUT/header-$job.csv" "$OUT/rows-$job.csv" >"$OUT/summary-$job.csv"
  rm -f "$OUT/header-$job.csv" "$OUT/rows-$job.csv"
done
rm -rf "$OUT/runs" "$OUT/last-stderr.txt"
{
  made_by "ROUNDS=$ROUNDS RUNTIME=$RUNTIME TEXT_BYTES=$TEXT_BYTES"
  /usr/bin/python3 - "$OUT" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
lines = ["| job | mode | bytes/s (median) | vs none (median of per-round ratios) | lines/s | words/s | state backups | backup MB | exact |",
         "|---|---|---|---|---|---|---|---|---|"]
for job in ("wordcount", "grep"):
    rows = list(csv.DictReader(open(f"{out}/summary-{job}.csv")))
    by = {}
    for r in rows:
        by.setdefault(r["mode"], []).append(r)
    none = {r["round"]: float(r["bytes_per_s"]) for r in by.get("none", [])}
    for mode in ("none", "approx", "exact"):
        rs = by.get(mode, [])
        if not rs:
            continue
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        ratio = statistics.median(float(r["bytes_per_s"]) / none[r["round"]] for r in rs)
        ok = all((r.get("words_wrong", "0") == "0" and r.get("missing", "0") == "0" and r.get("extra", "0") == "0") for r in rs)
        lines.append(f"| {job} | {mode} | {med('bytes_per_s')/1e6:.1f} MB/s | {100*ratio:.0f}% | {med('lines_per_s'):.3g} | "
                     f"{med('words_per_s'):.3g} | {med('state_backups'):.0f} | {med('backup_bytes')/1e6:.1f} | {'yes' if ok else 'NO'} |")
print("\n".join(lines))
PY
} >"$OUT/table.md"
cat "$OUT/table.md"
