#!/usr/bin/env bash
# The experiment scripts refuse bad settings before they remove anything: each is run with a setting it must refuse
# (ROUNDS=0, a runtime, job or option afstream does not know) and OUT pointing at a folder of sentinel results, which
# must come out unchanged and the script must exit 2 without running a job. Also that modes_summary.py makes a table
# from rows without mode none (a setting modes_table.sh accepts).
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
# A table from settings it accepts: modes_table.sh with MODES lacking none (MODES="exact ask") ran every job and then
# failed in modes_summary.py, which divided by none's throughput in each round; "vs none" is "-" there.
cat >"$tmp/modes-no-none.csv" <<'CSV'
job,mode,failures,round,items_per_s,latency_p50_ms,latency_p99_ms,backup_bytes,recovery_ms_median,trees_replayed,state_backups,item_backups
hh,exact,0,1,1000,1,2,3000000,0,0,10,20
hh,exact,1,1,900,1,2,3000000,5,0,10,20
hh,ask,0,1,800,1,2,2000000,0,0,10,0
CSV
if python3 "$HERE/modes_summary.py" "$tmp/modes-no-none.csv" >"$tmp/modes-no-none.md" 2>&1 &&
  grep -q '^| hh | exact (upstream backup) | 1e+03 | - | 1 / 2 | 3 | 5 | - |$' "$tmp/modes-no-none.md" &&
  grep -q '^| hh | ask (backtrack) | 800 | - |' "$tmp/modes-no-none.md"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL modes-summary-without-none: $(tail -n 1 "$tmp/modes-no-none.md")"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
