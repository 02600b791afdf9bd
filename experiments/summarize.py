#!/usr/bin/env python3
"""Medians per configuration from a summary.csv made by an experiment script, as a Markdown table.

Throughput ratios are taken per round (each round runs every mode back to back) and then the median of the ratios
is reported, which is robust to a noisy shared machine."""
import csv
import statistics
import sys
from collections import defaultdict


def main(path):
    rows = list(csv.DictReader(open(path)))
    by = defaultdict(list)
    for r in rows:
        by[(r["config"], int(r["failures"]))].append(r)
    none = {r["round"]: float(r["items_per_s"]) for r in rows if r["config"] == "none"}

    def med(rs, col):
        vals = [float(r[col]) for r in rs if r.get(col) not in (None, "")]
        return statistics.median(vals) if vals else float("nan")

    print("| config | failures | items/s (median) | vs none (median of per-round ratios) | state backups | "
          "backup MB | recovery ms (median) | precision | recall | ARE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (config, fails), rs in sorted(by.items(), key=lambda kv: (list(dict.fromkeys(r["config"] for r in rows)).index(kv[0][0]), kv[0][1])):
        ratios = [float(r["items_per_s"]) / none[r["round"]] for r in rs if r["round"] in none]
        ratio = f"{100 * statistics.median(ratios):.0f}%" if ratios else "-"
        print(f"| {config} | {fails} | {med(rs, 'items_per_s'):.3g} | {ratio} | {med(rs, 'state_backups'):.0f} | "
              f"{med(rs, 'backup_bytes') / 1e6:.0f} | {med(rs, 'recovery_ms_median'):.1f} | "
              f"{100 * med(rs, 'precision'):.1f}% | {100 * med(rs, 'recall'):.1f}% | {med(rs, 'are'):.4f} |")
    print()
    print(f"{len(rows)} runs from `{path}`; medians over rounds.")


if __name__ == "__main__":
    main(sys.argv[1])
