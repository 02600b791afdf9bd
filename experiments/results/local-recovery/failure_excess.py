#!/usr/bin/env python3
"""What each failure of all workers added to a learn run's trace (a point per 1% of the input): for every failure
in the run's failures.csv (its least at_items over the workers), the four intervals of trace.csv ending within two
points of it (the trace counts the learners' examples, which trail the sources'), their time beyond four times the
run's median interval; one line per run with the failures' excesses and their median, in ms.
Finer than the convergence delay, which compares runs whose failure-free times differ by up to 30% on this host.

    failure_excess.py TRACES_DIR...      (reads every *-{4,8}-r*.trace.csv with its .failures.csv)"""
import csv
import glob
import os
import statistics
import sys

all_excess = {}
for d in sys.argv[1:]:
    for trace in sorted(glob.glob(os.path.join(d, "*-[48]-r*.trace.csv"))):
        rows = list(csv.DictReader(open(trace)))
        items = [int(float(r["items"])) for r in rows]
        secs = [float(r["seconds"]) for r in rows]
        iv = [secs[i] - secs[i - 1] for i in range(1, len(rows))]
        med = statistics.median(iv)
        first = {}
        for r in csv.DictReader(open(trace.replace(".trace.csv", ".failures.csv"))):
            k = int(r["failure_count"])
            first[k] = min(first.get(k, 1 << 62), int(float(r["at_items"])))
        step = items[1] - items[0]
        excess = []
        for at in sorted(first.values()):
            near = [iv[k - 1] for k in range(1, len(items)) if at - 2 * step < items[k] <= at + 2 * step]
            if near:
                excess.append((sum(near) - len(near) * med) * 1e3)
        key = d.rstrip("/")
        all_excess.setdefault(key, []).extend(excess)
        print(f"{trace}: median interval {med * 1e3:.1f} ms; excess per failure "
              f"{' '.join(f'{e:.0f}' for e in excess)} ms (median {statistics.median(excess):.0f})")
for key, ex in all_excess.items():
    print(f"{key}: {len(ex)} failures, excess median {statistics.median(ex):.0f} ms, mean {statistics.mean(ex):.0f} ms")
