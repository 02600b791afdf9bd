#!/usr/bin/env python3
"""Reads callgrind profiles for experiments/instructions.sh.

  instructions_summary.py row PROFILE RUN_SUMMARY_CSV JOB LABEL CONFIG SETTING   one summary.csv row
  instructions_summary.py diff NONE_PROFILE APPROX_PROFILE                      functions whose counts differ most
  instructions_summary.py table SUMMARY_CSV                                     the Markdown table

The job's instructions are the inclusive counts of the thread bodies that run the job (Worker::run: a worker's
receive, compute and send; BackupWriter::run: its backup thread; Compactor::loop: a store's compactor), summed."""
import csv
import re
import subprocess
import sys

THREAD_BODIES = ["afs::Worker::run()", "afs::BackupWriter::run()", "afs::Compactor::loop()"]
LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$")


def annotate(profile, inclusive):
    args = ["callgrind_annotate", "--threshold=100", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}",
            profile]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            yield int(m.group(1).replace(",", "")), m.group(2)


def function_name(where):
    """'file:function [object]' -> function (without the object and a call count)."""
    where = re.sub(r" \[[^\]]*\]$", "", where)
    where = re.sub(r" \([\d,]+x\)$", "", where)
    if where.startswith("???:"):  # no debug information: the object's symbol alone
        return where[4:]
    return where.split(":", 1)[1] if ":" in where else where


def totals(profile):
    program, job = 0, 0
    seen = {}
    for count, where in annotate(profile, True):
        if "PROGRAM TOTALS" in where:
            program = count
            continue
        name = function_name(where)
        if name in THREAD_BODIES:  # a body listed under several files (inlined parts): its largest line is the whole
            seen[name] = max(seen.get(name, 0), count)
    job = sum(seen.values())
    if "afs::Worker::run()" not in seen:
        raise SystemExit(f"{profile}: no afs::Worker::run() in the profile (was the binary built with symbols?)")
    return program, job


def row(profile, run_summary, job, label, config, setting):
    program, job_ir = totals(profile)
    with open(run_summary) as f:
        r = list(csv.DictReader(f))[-1]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow([job, label, config, setting, r["items"], program, job_ir, r["items_per_s"]])


def diff(none_profile, approx_profile, shown=25):
    def exclusive(p):
        d = {}
        for count, where in annotate(p, False):
            if "PROGRAM TOTALS" not in where:
                name = function_name(where)
                d[name] = d.get(name, 0) + count
        return d

    a, b = exclusive(none_profile), exclusive(approx_profile)
    _, job_a = totals(none_profile)
    _, job_b = totals(approx_profile)
    print(f"job instructions: none {job_a:,}, approx A {job_b:,} ({100 * (job_b / job_a - 1):+.2f}%)")
    print("functions (exclusive counts, whole program) whose counts differ most, approx A - none:")
    d = sorted(((b.get(k, 0) - a.get(k, 0), k) for k in set(a) | set(b)), reverse=True)
    for x, k in d[:shown]:
        print(f"{x:>+15,}  {k[:140]}")
    print("...")
    for x, k in d[-5:]:
        print(f"{x:>+15,}  {k[:140]}")


def table(summary):
    with open(summary) as f:
        rows = list(csv.DictReader(f))
    print("| job | config | items | job instructions | per item | vs none |")
    print("|---|---|---|---|---|---|")
    none = {r["job"]: int(r["job_ir"]) for r in rows if r["config"] == "none"}
    for r in rows:
        ir, items = int(r["job_ir"]), float(r["items"])
        base = none.get(r["job"])
        vs = f"{100 * ir / base:.1f}%" if base else "-"
        config = r["config"] if r["config"] in ("none", "exact") else f"{r['config']}: {r['setting']}"
        print(f"| {r['label']} | {config} | {items:.3g} | {ir:.4g} | {ir / items:.0f} | {vs} |")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "row" and len(sys.argv) == 8:
        row(*sys.argv[2:])
    elif cmd == "diff" and len(sys.argv) == 4:
        diff(*sys.argv[2:])
    elif cmd == "table" and len(sys.argv) == 3:
        table(sys.argv[2])
    else:
        raise SystemExit(__doc__)
