#!/usr/bin/env python3
"""Time a run's failures added to its trace: for each trace.csv given (a point per 1% of the input), the intervals
between points that took over 3 times the run's median interval (the failures': a failure of all workers stops
the learners for about 100 ms against intervals of 10-20 ms), their count and their excess over the median, in ms.

    trace_excess.py TRACE.csv..."""
import csv
import statistics
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    iv = [float(rows[i]["seconds"]) - float(rows[i - 1]["seconds"]) for i in range(1, len(rows))]
    med = statistics.median(iv)
    slow = [v - med for v in iv if v > 3 * med]
    print(f"{path}: median interval {med * 1e3:.1f} ms; {len(slow)} slow intervals, excess "
          f"{' '.join(f'{v * 1e3:.0f}' for v in slow)} ms (median {statistics.median(slow) * 1e3 if slow else 0:.0f})")
