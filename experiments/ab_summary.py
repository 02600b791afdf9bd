#!/usr/bin/python3
"""Medians of per-round ratios from DIR/jobs_ab.txt, as experiments/ab_binaries.sh writes it (lines: job round
before|after none|approx seconds,backups,bytes,cpu,score; a round twice is refused), and medians per benchmark from
DIR/bench.txt if there is one (lines: round binary name value). Usage: /usr/bin/python3 experiments/ab_summary.py DIR"""
import os
import statistics as st
import sys
from collections import defaultdict

from repo_paths import arguments  # experiments/repo_paths.py, beside this script

args = arguments(__doc__, "ab_summary.py [DIR]", 0, 1)
d = args[0] if args else "."
runs = defaultdict(dict)
for line in open(f"{d}/jobs_ab.txt"):
    if not line.strip():
        continue
    job, rnd, binary, mode, vals = line.split()
    run = runs[(job, f"{binary} {mode}")]
    if int(rnd) in run:  # two series in one file (ab_binaries.sh numbers appended rounds after the last)
        sys.exit(f"ab_summary.py: {d}/jobs_ab.txt has round {rnd} of {job} {binary} {mode} twice")
    run[int(rnd)] = list(map(float, vals.split(",")))
print("| job | run | throughput vs same binary's none | vs before's none | CPU vs same none | backups | MB | score |")
print("|---|---|---|---|---|---|---|---|")
for job in sorted({j for j, _ in runs}):
    for run in ["before none", "after none", "before approx", "after approx"]:
        r = runs[(job, run)]
        own = runs[(job, run.split()[0] + " none")]
        ref = runs[(job, "before none")]
        w_own = st.median(own[k][0] / r[k][0] for k in r)
        w_ref = st.median(ref[k][0] / r[k][0] for k in r)
        c_own = st.median(r[k][3] / own[k][3] for k in r)
        print(f"| {job} | {run} | {w_own:.0%} | {w_ref:.0%} | {c_own:.0%} | {st.median(v[1] for v in r.values()):.0f} "
              f"| {st.median(v[2] for v in r.values()) / 1e6:.1f} | {st.median(v[4] for v in r.values()):.3f} |")
bench = defaultdict(list)
for line in open(f"{d}/bench.txt") if os.path.exists(f"{d}/bench.txt") else []:
    f = line.split()
    bench[(f[1], f[2].replace("_median", ""))].append(float(f[3]))
if bench:
    print()
    print("| binary | benchmark | ns an item (median of rounds) |")
    print("|---|---|---|")
for (binary, name), v in sorted(bench.items()):
    print(f"| {binary} | {name} | {st.median(v):.1f} |")
