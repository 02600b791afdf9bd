#!/usr/bin/env python3
"""Throughput per runtime and mode from the summary.csv made by throughput_table.sh, as a Markdown table.

Ratios are computed within each round (every runtime and mode ran back to back on the same items) and the median
of the per-round ratios is reported: vs none is against mode none on the same runtime, vs threads is against the
same mode on the in-process runtime. Where the rows carry cpu_s (the run's CPU seconds, this process and its reaped
worker processes; since the fourteenth session), "CPU vs none" is the median of the per-round ratios of CPU time to
none's on the same runtime: what a mode costs in work, steadier than wall time on a shared machine."""
import csv
import statistics
from collections import defaultdict

from repo_paths import arguments, shown  # experiments/repo_paths.py, beside this script


def main(path):
    rows = list(csv.DictReader(open(path)))
    ips = {(r["runtime"], r["mode"], r["round"]): float(r["items_per_s"]) for r in rows}
    by = defaultdict(list)
    for r in rows:
        by[(r["runtime"], r["mode"])].append(r)
    order = list(dict.fromkeys((r["runtime"], r["mode"]) for r in rows))
    med = lambda v: statistics.median(v) if v else float("nan")

    cpu = {(r["runtime"], r["mode"], r["round"]): float(r["cpu_s"]) for r in rows if r.get("cpu_s")}

    def ratio(rs, other, of=ips):
        vals = [of[(r["runtime"], r["mode"], r["round"])] / of[other(r) + (r["round"],)] for r in rs
                if (r["runtime"], r["mode"], r["round"]) in of and other(r) + (r["round"],) in of]
        return f"{100 * med(vals):.0f}%" if vals else "-"

    print("| runtime | mode | items/s (median) | vs none, same runtime | vs threads, same mode | CPU vs none | "
          "state backups | item backups | backup MB | backup MB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in order:
        rs = by[key]
        col = lambda c: med([float(r[c]) for r in rs])
        mbps = med([float(r["backup_bytes"]) / 1e6 / float(r["seconds"]) for r in rs])
        print(f"| {key[0]} | {key[1]} | {col('items_per_s'):.3g} | {ratio(rs, lambda r: (r['runtime'], 'none'))} | "
              f"{ratio(rs, lambda r: ('threads', r['mode']))} | {ratio(rs, lambda r: (r['runtime'], 'none'), cpu)} | "
              f"{col('state_backups'):.0f} | "
              f"{col('item_backups'):.0f} | {col('backup_bytes') / 1e6:.0f} | {mbps:.0f} |")
    rounds = len({r["round"] for r in rows})
    print()
    print(f"{len(rows)} runs ({rounds} rounds) from `{shown(path)}`; medians over rounds, ratios per round.")


if __name__ == "__main__":
    main(*arguments(__doc__, "throughput_summary.py SUMMARY_CSV", 1, 1))
