#!/usr/bin/env bash
# The experiment scripts refuse bad settings before they remove anything: each is run with a setting it must refuse
# (ROUNDS=0, a runtime, job or option afstream does not know) and OUT pointing at a folder of sentinel results, which
# must come out unchanged and the script must exit 2 without running a job.
#   experiments/script_args_test.sh [afstream-binary]      (default: the build's)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
AFS=${1:-$HERE/../build/afstream/cli/afstream}
[ -x "$AFS" ] || { echo "script_args_test.sh: no afstream binary at $AFS" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
# case NAME SCRIPT [VAR=VALUE...]: the script must exit 2 and leave OUT's sentinel files as they were.
case_() {
  local name=$1 script=$2
  shift 2
  local out="$tmp/$name"
  mkdir -p "$out"
  for f in summary.csv table.md failures.csv rates.csv samples.csv sizes.csv summary-wordcount.csv cpu.csv; do
    echo "sentinel" >"$out/$f"
  done
  env "$@" OUT="$out" timeout 60 bash "$HERE/$script" "$AFS" >"$tmp/$name.log" 2>&1
  local rc=$?
  local changed
  changed=$(grep -L '^sentinel$' "$out"/*.csv "$out"/*.md 2>/dev/null; for f in summary.csv table.md; do [ -f "$out/$f" ] || echo "$f removed"; done)
  if [ "$rc" = 2 ] && [ -z "$changed" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: $script exited $rc (expected 2); changed: ${changed:-none}; $(tail -n 1 "$tmp/$name.log")"
  fi
}
for s in hh_table nexmark_table throughput_table sink_throughput text_table ps_table recovery_table modes_table \
  jobs_table hh_cpu; do
  case_ "$s-rounds0" "$s.sh" ROUNDS=0
done
case_ modes-rounds-word modes_table.sh ROUNDS=abc
case_ modes-items-word modes_table.sh HH_ITEMS=abc
case_ hh-runtime hh_table.sh ROUNDS=1 RUNTIME=thread
case_ nexmark-runtime nexmark_table.sh ROUNDS=1 RUNTIME=thread
case_ throughput-job throughput_table.sh ROUNDS=1 JOB=heavy-hitter
case_ throughput-job-args throughput_table.sh ROUNDS=1 JOB_ARGS=--ft.thta
case_ recovery-extra recovery_table.sh ROUNDS=1 EXTRA_ARGS=--process.standbys
case_ ps-extra ps_table.sh ROUNDS=1 EXTRA=--learn.wrkers
case_ instructions-items instructions.sh ITEMS=abc JOBS=hh
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
