#!/usr/bin/env bash
# The convergence harness (issue 5, item 5): online logistic regression (`afstream run --job learn`, SGD) on the
# HIGGS-like (dense 28) and KDD-like (11 hashed fields, 2^18 weights) data with 0, 4, 8 (and FAILS_EXTRA) failures
# of all workers, under none (0 failures only), approx at the paper's two LR settings (Theta 10, L 1e3 and Theta 1,
# L 100) with the learn job's run defaults (--ft.replay-overhead-max 0.01 --ft.replay-items-max 4096
# --net.in-flight-max 16384 --ft.delta-residual 0), approx A-R (Theta 10, L 1e3 with the defaults but
# --ft.replay-items-max 0: the defaults until the eleventh session), approx A0 (Theta 10, L 1e3 without any: the
# general defaults) and exact. Failures are injected with --fail.at at points spread evenly from 10% to 90% of the
# input (the paper fails all workers after 10% of the input). Every run writes trace.csv (a point per 1% of the
# input: items, seconds, L1 model change, progressive loss and accuracy), kept under traces/.
#
#   experiments/convergence.sh [afstream-binary]
#     ROUNDS=3 HIGGS_ITEMS=2000000 KDD_ITEMS=1000000 FAILS="4 8" FAILS_EXTRA=10 RUNTIME=threads
#     DATASETS="higgs kdd" by default, or data files of your own among them (DATASETS="higgs my.csv": --learn.data
#     file --learn.file my.csv, every example of the file, as dataset file-my; give its format and task in EXTRA_ARGS,
#     e.g. EXTRA_ARGS="--learn.format libsvm") (OUT=DIR writes elsewhere than experiments/results/convergence; FAILS_EXTRA=""
#     runs no extra count; CONFIGS="none,approx A" runs only the configurations named, comma-separated;
#     EXTRA_ARGS="--process.standby 5" adds options to every run)
#
# Writes OUT/summary.csv (one row per run: dataset, config, setting, round, fail_points, then afstream's summary
# columns, among them holdout_accuracy, progressive_accuracy, converged_items, converged_seconds), OUT/traces/
# (trace and failures CSV per run), OUT/table.md (convergence_summary.py: medians, and the convergence delay as the
# median over rounds of converged(k failures) / converged(0 failures) of the same config) and OUT/convergence-*.png
# / .pdf (plots by /usr/bin/python3 with matplotlib). About 6 minutes with the defaults on the shared 2-core VM
# (126 runs of 1 to 4 s; HIGGS-like 2e6 and KDD-like 1e6 examples keep the whole run well under 15 minutes).
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
ROUNDS=${ROUNDS:-3}
HIGGS_ITEMS=${HIGGS_ITEMS:-2000000}
KDD_ITEMS=${KDD_ITEMS:-1000000}
FAILS=${FAILS-"4 8"}  # FAILS="" (and FAILS_EXTRA=""): the failure-free runs alone
FAILS_EXTRA=${FAILS_EXTRA-10}
RUNTIME=${RUNTIME:-threads}
DATASETS=${DATASETS:-"higgs kdd"}
OUT=${OUT:-$ROOT/experiments/results/convergence}
PY=${PY:-/usr/bin/python3}

require_counts ROUNDS HIGGS_ITEMS KDD_ITEMS
# ROUNDS=0 ran nothing and then removed the previous results before the summary failed on the missing summary.csv;
# a failure count that is no whole number (FAILS="x") ran as 0 failures under its own tag, a second failure-free run.
awk -v r="$ROUNDS" 'BEGIN { exit !(r + 0 >= 1) }' || { echo "convergence.sh: ROUNDS='$ROUNDS' must be at least 1 (-h for usage)" >&2; exit 2; }
for f in $FAILS $FAILS_EXTRA; do
  [[ $f =~ ^[0-9]+$ ]] || { echo "convergence.sh: failure count '$f' in FAILS / FAILS_EXTRA is not a whole number" >&2; exit 2; }
done
# Failure points for k failures: k fractions evenly spread over [0.1, 0.9].
points() {
  awk -v k="$1" 'BEGIN { for (i = 0; i < k; i++) printf "%s%.4f", (i ? "," : ""), (k == 1 ? 0.1 : 0.1 + 0.8 * i / (k - 1)) }'
}

# data_args DATASET: the learn job's data options for a dataset of DATASETS (higgs, kdd or a file), in `data`; its
# name in the table in `label`.
data_args() {
  case "$1" in
    higgs) data=(--learn.data higgs --items "$HIGGS_ITEMS") label=higgs ;;
    kdd) data=(--learn.data kdd --items "$KDD_ITEMS") label=kdd ;;
    *)
      [ -f "$1" ] || { echo "convergence.sh: unknown dataset '$1' (expected higgs, kdd or a data file)" >&2; exit 2; }
      data=(--learn.data file --learn.file "$1")
      label="file-$(basename "${1%.*}")"
      ;;
  esac
}
for d in $DATASETS; do
  data_args "$d"
  # shellcheck disable=SC2086
  preflight --job learn "${data[@]}" --runtime "$RUNTIME" ${EXTRA_ARGS:-}
done

configs=(
  "none|--ft.mode none"
  "approx A|--ft.mode approx --ft.theta 10 --ft.l 1000"
  "approx B|--ft.mode approx --ft.theta 1 --ft.l 100"
  "approx A-R|--ft.mode approx --ft.theta 10 --ft.l 1000 --ft.replay-items-max 0"
  "approx A0|--ft.mode approx --ft.theta 10 --ft.l 1000 --ft.replay-overhead-max 0 --ft.replay-items-max 0 --net.in-flight-max 0"
  "exact|--ft.mode exact"
)
if [ -n "${CONFIGS:-}" ]; then
  chosen=()
  IFS=',' read -r -a wanted <<<"$CONFIGS"
  for w in "${wanted[@]}"; do
    found=0
    for c in "${configs[@]}"; do [ "${c%%|*}" = "$w" ] && chosen+=("$c") && found=1; done
    if [ "$found" = 0 ]; then
      echo "convergence.sh: unknown configuration '$w' in CONFIGS (expected some of: none, approx A, approx B," \
        "approx A-R, approx A0, exact)" >&2
      exit 2
    fi
  done
  configs=("${chosen[@]}")
fi
# Unknown names (above) fail before anything is removed.
mkdir -p "$OUT"
RUNS="$OUT/runs"
rm -rf "$RUNS" "$OUT/traces" "$OUT/summary.csv" "$OUT/failed"
mkdir -p "$RUNS" "$OUT/traces"
failed=0
header_done=0
for round in $(seq 1 "$ROUNDS"); do
  for d in $DATASETS; do
    data_args "$d"
    for c in "${configs[@]}"; do
      name=${c%%|*}
      args=${c#*|}
      for fails in 0 $FAILS $FAILS_EXTRA; do
        [ "$name" = none ] && [ "$fails" -gt 0 ] && continue
        fail_args=()
        at=""
        if [ "$fails" -gt 0 ]; then
          at=$(points "$fails")
          fail_args=(--fail.at "$at" --fail.target all)
        fi
        tag="$label-${name// /}-$fails-r$round"
        dir="$RUNS/$tag"
        echo "round $round: $label, $name ($args), $fails failures" >&2
        start=$(date +%s.%N)
        # shellcheck disable=SC2086
        if ! timeout 900 "$AFS" run --job learn "${data[@]}" --runtime "$RUNTIME" \
          --seed "$round" --quiet $args ${EXTRA_ARGS:-} "${fail_args[@]}" --out "$dir" >"$dir.log" 2>&1; then
          mkdir -p "$OUT/failed"
          cp "$dir.log" "$OUT/failed/$tag.log"
          echo "  FAILED (kept in $OUT/failed/$tag.log): $(tail -n 1 "$dir.log")" >&2
          failed=$((failed + 1))
          continue
        fi
        echo "  $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s" >&2
        if [ "$header_done" = 0 ]; then
          head -n 1 "$dir/summary.csv" | sed 's/^/dataset,config,setting,round,fail_points,/' >"$OUT/summary.csv"
          header_done=1
        fi
        tail -n 1 "$dir/summary.csv" | sed "s|^|$label,$name,$args,$round,\"$at\",|" >>"$OUT/summary.csv"
        cp "$dir/trace.csv" "$OUT/traces/$tag.trace.csv"
        cp "$dir/failures.csv" "$OUT/traces/$tag.failures.csv"
      done
    done
  done
done
rm -rf "$RUNS"
if [ "$header_done" = 0 ]; then
  echo "convergence.sh: none of the $failed runs succeeded (their logs: $OUT/failed/); no table written" >&2
  exit 1
fi
[ "$failed" = 0 ] || echo "convergence.sh: $failed runs failed (their logs: $OUT/failed/); the table leaves them out" >&2
{
  echo "Made by \`ROUNDS=$ROUNDS HIGGS_ITEMS=$HIGGS_ITEMS KDD_ITEMS=$KDD_ITEMS FAILS=\"$FAILS\" FAILS_EXTRA=\"$FAILS_EXTRA\"" \
    "RUNTIME=$RUNTIME DATASETS=\"$DATASETS\"${CONFIGS:+ CONFIGS=\"$CONFIGS\"}${EXTRA_ARGS:+ EXTRA_ARGS=\"$EXTRA_ARGS\"}" \
    "experiments/convergence.sh\`" \
    "($(date +%F), $(nproc) cores, shared machine, revision $(binary_revision))."
  echo
  "$PY" "$ROOT/experiments/convergence_summary.py" "$OUT"
} >"$OUT/table.md"
cat "$OUT/table.md"
