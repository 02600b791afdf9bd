#!/usr/bin/env python3
"""Reads the callgrind profiles of experiments/instructions.sh (one file per thread: --separate-threads=yes).

  instructions_summary.py row PROFILE RUN_SUMMARY_CSV JOB LABEL CONFIG SETTING   one summary.csv row
  instructions_summary.py diff NONE_PROFILE APPROX_PROFILE                      functions whose counts differ most
  instructions_summary.py table SUMMARY_CSV                                     the Markdown table

PROFILE is the --callgrind-out-file given to valgrind; its threads' files are PROFILE-01, PROFILE-02, ... The job's
instructions are those of every thread but the first (the main thread: option parsing, building the workers and
their sources, the controller's loop, the evaluation after the run): the workers' threads, their backup threads,
ZeroMQ's I/O threads. Valgrind counts every byte (or word) a rep-prefixed string instruction moves as one
instruction, so glibc's large memcpy / memset (the *_erms variants) weigh far more than their time; the second
measure leaves the string functions out."""
import csv
import glob
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$")
STRING_FUNCTION = re.compile(r"^__(memcpy|memmove|memset|mempcpy)_")


def thread_files(profile):
    files = sorted(glob.glob(glob.escape(profile) + "-[0-9]*"))
    if len(files) < 2:
        raise SystemExit(f"{profile}: expected one file per thread ({profile}-01, -02, ...), found {len(files)}")
    return files[1:]  # -01 is the main thread


def function_name(where):
    """'file:function [object]' -> function (without the object and a call count)."""
    where = re.sub(r" \[[^\]]*\]$", "", where)
    where = re.sub(r" \([\d,]+x\)$", "", where)
    if where.startswith("???:"):  # no debug information: the object's symbol alone
        return where[4:]
    return where.split(":", 1)[1] if ":" in where else where


def exclusive(profile):
    """Exclusive instruction counts per function over the job's threads, and their total."""
    counts, total = {}, 0
    for f in thread_files(profile):
        out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", f], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            m = LINE.match(line)
            if not m:
                continue
            n = int(m.group(1).replace(",", ""))
            if "PROGRAM TOTALS" in m.group(2):
                total += n
            else:
                name = function_name(m.group(2))
                counts[name] = counts.get(name, 0) + n
    return counts, total


def totals(profile):
    counts, total = exclusive(profile)
    strings = sum(n for name, n in counts.items() if STRING_FUNCTION.match(name))
    return total, total - strings


def row(profile, run_summary, job, label, config, setting):
    job_ir, without_strings = totals(profile)
    with open(run_summary) as f:
        r = list(csv.DictReader(f))[-1]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow([job, label, config, setting, r["items"], job_ir, without_strings, r["items_per_s"]])


def diff(none_profile, approx_profile, shown=25):
    (a, ta), (b, tb) = exclusive(none_profile), exclusive(approx_profile)
    print(f"job instructions: none {ta:,}, approx A {tb:,} ({100 * (tb / ta - 1):+.2f}%)")
    print("functions (exclusive counts in the job's threads) whose counts differ most, approx A - none:")
    d = sorted(((b.get(k, 0) - a.get(k, 0), k) for k in set(a) | set(b)), reverse=True)
    for x, k in d[:shown]:
        print(f"{x:>+15,}  {k[:140]}")
    print("...")
    for x, k in d[-5:]:
        print(f"{x:>+15,}  {k[:140]}")


def table(summary):
    with open(summary) as f:
        rows = list(csv.DictReader(f))
    print("| job | config | items | job instructions | per item | vs none | without memcpy / memset: vs none |")
    print("|---|---|---|---|---|---|---|")
    none = {r["job"]: r for r in rows if r["config"] == "none"}
    for r in rows:
        ir, lean, items = int(r["job_ir"]), int(r["job_ir_without_strings"]), float(r["items"])
        base = none.get(r["job"])
        vs = f"{100 * ir / int(base['job_ir']):.1f}%" if base else "-"
        vs_lean = f"{100 * lean / int(base['job_ir_without_strings']):.1f}%" if base else "-"
        config = r["config"] if r["config"] in ("none", "exact") else f"{r['config']}: {r['setting']}"
        print(f"| {r['label']} | {config} | {items:.3g} | {ir:.4g} | {ir / items:.0f} | {vs} | {vs_lean} |")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if cmd == "row" and len(sys.argv) == 8:
        row(*sys.argv[2:])
    elif cmd == "diff" and len(sys.argv) == 4:
        diff(*sys.argv[2:])
    elif cmd == "table" and len(sys.argv) == 3:
        table(sys.argv[2])
    else:
        raise SystemExit(__doc__)
