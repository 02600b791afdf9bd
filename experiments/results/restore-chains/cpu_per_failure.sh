#!/usr/bin/env bash
# CPU per failure of the KDD-like learn job (1e6 examples, approx at Theta 10 / L 1e3), with 0 and with 8 failures of
# all workers at the convergence harness's points, for each of the given binaries in turn (interleaved per round).
# One line per run: binary, round, failures, seconds, cpu_s, converged_seconds, and the learners' (workers 2 and 3)
# median restore_ms and caught_up_ms from failures.csv.
#   RUNTIME=threads|processes ROUNDS=5 experiments/results/restore-chains/cpu_per_failure.sh BIN... > OUT.txt
# CPU per failure of a round: (cpu_s with 8 - cpu_s with 0) / 8, same binary and round.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: cpu_per_failure.sh AFSTREAM-BINARY..." >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
RUNTIME=${RUNTIME:-threads}
points=0.1,0.2143,0.3286,0.4429,0.5571,0.6714,0.7857,0.9
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    for fails in 0 8; do
      fail_args=()
      [ "$fails" = 8 ] && fail_args=(--fail.at "$points" --fail.target all)
      rm -rf "$out/run"
      "$bin" run --job learn --learn.data kdd --items 1000000 --runtime "$RUNTIME" --seed "$r" --quiet \
        --ft.mode approx --ft.theta 10 --ft.l 1000 "${fail_args[@]}" --out "$out/run" >/dev/null 2>&1
      /usr/bin/python3 - "$out/run" "$bin" "$r" "$fails" <<'PY'
import csv, statistics, sys
run, name, r, fails = sys.argv[1:]
s = list(csv.DictReader(open(run + "/summary.csv")))[-1]
f = list(csv.DictReader(open(run + "/failures.csv")))
learners = [x for x in f if x["worker"] in ("2", "3")]
def med(key):
    v = [float(x[key]) for x in learners if float(x[key]) >= 0]
    return "%.1f" % statistics.median(v) if v else "-"
print(name, r, fails, s["seconds"], s["cpu_s"], s["converged_seconds"], "restore_ms", med("restore_ms"),
      "caught_up_ms", med("caught_up_ms"))
PY
    done
  done
  echo "cpu_per_failure: round $r of $ROUNDS done" >&2
done
