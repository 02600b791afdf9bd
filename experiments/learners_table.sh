#!/usr/bin/env bash
# Every online learner through the engine (issue 5's first measurement): updates per second of none / approx /
# exact on the in-process runtime and on worker processes (memory and RocksDB backup server), for each task on the
# data it fits, dense (28 features) and sparse (2^18 hashed weights). Each (task, data) pair is one run of
# throughput_table.sh (modes and runtimes interleaved within a round, ratios per round, medians over rounds);
# learners_summary.py puts them side by side with the held-out accuracy (or loss, for linear regression).
#
#   experiments/learners_table.sh [afstream-binary]      (ROUNDS=3 ITEMS=1000000, Theta 10 / L 1e3 by default)
#     PAIRS="logistic:higgs logistic:kdd hinge:higgs hinge:kdd linear:linear linear:kdd softmax:multiclass" by default:
#       the TASK:DATA pairs run (--learn.task TASK --learn.data DATA), e.g. PAIRS="logistic:higgs hinge:kdd"
#     FT="--ft.theta 10 --ft.l 1000" by default: the approx runs' thresholds (added to every run's arguments;
#       mode none and exact ignore them)
#     OUT=DIR writes elsewhere than experiments/results/learners
#
# Writes OUT/TASK-DATA/{summary.csv,table.md} and OUT/table.md.
set -euo pipefail
. "$(dirname "$0")/script_start.sh"  # -h; ROOT; AFS, the binary (the argument, else the build's)
export ROUNDS=${ROUNDS:-3}
export ITEMS=${ITEMS:-1000000}
FT=${FT:-"--ft.theta 10 --ft.l 1000"}
OUT=${OUT:-$ROOT/experiments/results/learners}
PAIRS_SET=${PAIRS:+1}
PAIRS=${PAIRS:-"logistic:higgs logistic:kdd hinge:higgs hinge:kdd linear:linear linear:kdd softmax:multiclass"}
for pair in $PAIRS; do
  case "$pair" in *?:?*) ;; *) echo "learners_table.sh: '$pair' in PAIRS is not TASK:DATA" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
for pair in $PAIRS; do
  task=${pair%%:*}
  data=${pair#*:}
  echo "== $task on $data" >&2
  JOB=learn JOB_ARGS="--learn.task $task --learn.data $data $FT" OUT="$OUT/$task-$data" \
    bash "$ROOT/experiments/throughput_table.sh" "$AFS" >/dev/null
done
{
  echo "Made by \`ROUNDS=$ROUNDS ITEMS=$ITEMS FT=\"$FT\"${PAIRS_SET:+ PAIRS=\"$PAIRS\"} experiments/learners_table.sh\`" \
    "($(date -u +%F), $(nproc) cores, revision $(binary_revision)); each (task, data) pair is a throughput_table.sh run" \
    "(\`${OUT#"$ROOT"/}/TASK-DATA/table.md\`)."
  echo
  # shellcheck disable=SC2086  # the pairs are words
  python3 "$ROOT/experiments/learners_summary.py" "$OUT" $PAIRS
} >"$OUT/table.md"
cat "$OUT/table.md"
