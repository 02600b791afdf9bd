# Sourced first by every experiment script (`. "$(dirname "$0")/script_start.sh"`), before it removes or writes
# anything: -h / --help prints the script's header comment (its usage) and exits; any other option, or more than one
# argument, is refused. Sets ROOT (the repository: helper scripts, default binary and OUT) and AFS, the afstream
# binary: the script's argument, else the build's, which must be an executable file. A script whose argument is not
# the binary (ab_binaries.sh: OUT) sets AFS_ARG=none before sourcing this.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script_name=$(basename "$0")
case "${1:-}" in
  -h | --help)
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
    ;;
  -*)
    echo "$script_name: unknown option '$1' (-h for usage)" >&2
    exit 2
    ;;
esac
if [ $# -gt 1 ]; then
  echo "$script_name: expected at most one argument, got $# (-h for usage)" >&2
  exit 2
fi
# require_counts VAR...: each named setting (ROUNDS, ITEMS, ...) must be a count (1000000, 1e6, 2.5e6); called by a
# script before it removes anything, so that a mistyped setting leaves the committed results alone.
require_counts() {
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[0-9]+([.][0-9]+)?([eE][0-9]+)?$ ]] ||
      { echo "$script_name: $v='${!v}' is not a count (-h for usage)" >&2; exit 2; }
  done
}
# require_rounds VAR...: each named setting must be a whole number of at least 1 (ROUNDS=0 ran nothing, then replaced
# the committed summary with an empty one before the table failed).
require_rounds() {
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] ||
      { echo "$script_name: $v='${!v}' must be a whole number of at least 1 (-h for usage)" >&2; exit 2; }
  done
}
# preflight ARGS...: afstream run ARGS --help must accept them (known job, options and runtime), so that a mistyped
# RUNTIME, JOB or extra option is refused before the script removes anything, not by its first run.
preflight() {
  local err status=0
  err=$("$AFS" run "$@" --help 2>&1 >/dev/null) || status=$?
  [ "$status" -eq 0 ] && return 0
  # A refusal is afstream's last line (exit status 2); a crash prints nothing of its own: say how it ended.
  [ -n "$err" ] && [ "$status" -lt 128 ] || err="$AFS ended with status $status${err:+: ${err##*$'\n'}}"
  echo "$script_name: afstream refuses these settings: ${err##*$'\n'}" >&2
  exit 2
}
# binary_revision [RUNS]: the source revision of the binary that made a table: the git_revision of a meta.json under
# the run directory RUNS if there is one, else what the binary AFS says (afstream --version), else the repository's
# HEAD, said so. Read when the table is written, after the runs: the tree may have moved meanwhile, the binary not.
binary_revision() {
  local meta="" rev=""
  if [ -n "${1:-}" ] && [ -d "$1" ]; then meta=$(find "$1" -name meta.json | head -n 1 || true); fi
  if [ -n "$meta" ]; then
    rev=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("git_revision", ""))' "$meta" || true)
  fi
  if [ -z "$rev" ] && [ -n "${AFS:-}" ] && [ -x "$AFS" ]; then
    rev=$("$AFS" --version 2>/dev/null | sed -n 's/^afstream //p' || true)
  fi
  if [ -z "$rev" ]; then
    rev="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (the repository's; not the binary's)"
  fi
  echo "$rev"
}
# made_by "SETTINGS" [RUNS]: a table's first line: the command with its settings, the date, the cores and the
# binary's revision (binary_revision RUNS).
made_by() {
  echo "Made by \`${1:+$1 }experiments/$script_name\` ($(date +%F), $(nproc) cores, revision $(binary_revision "${2:-}"))."
  echo
}
if [ "${AFS_ARG:-binary}" = binary ]; then
  AFS=${1:-$ROOT/build/afstream/cli/afstream}
  if [ -d "$AFS" ] || [ ! -x "$AFS" ]; then
    echo "$script_name: '$AFS' is not an executable afstream binary (build one with 'make build', or give its path)" >&2
    exit 2
  fi
fi
