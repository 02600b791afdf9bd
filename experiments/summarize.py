#!/usr/bin/env python3
"""Medians per configuration from a summary.csv, as a Markdown table.

    python3 experiments/summarize.py SUMMARY_CSV

From an experiment script's summary.csv (hh_table.sh, nexmark_table.sh: the columns config and round before
afstream's), throughput ratios are taken per round (each round runs every mode back to back) and then the median of
the ratios is reported, which is robust to a noisy shared machine. From a plain `afstream run --out DIR` summary.csv
(the runs one after another into one DIR, as demo.sh makes, without config and round), the configuration is the mode
(with Theta, L and Gamma for approx) and "vs none" is the ratio of the medians. Precision, recall and ARE are the
heavy-hitter jobs' scores ("-" where a job has none)."""
import csv
import statistics
import sys
from collections import defaultdict

from repo_paths import arguments, shown  # experiments/repo_paths.py, beside this script


def config_of(r):
    """The configuration of a plain afstream run's row: its mode, with the thresholds where they apply."""
    if r["mode"] == "approx":
        return f"approx T{r['theta']} L{r['l']} G{r['gamma']}"
    return r["mode"]


def main(path):
    rows = list(csv.DictReader(open(path)))
    if not rows:
        sys.exit(f"summarize.py: no rows in {path}")
    scripted = "config" in rows[0] and "round" in rows[0]
    if not scripted:
        for r in rows:
            r["config"] = config_of(r)
    by = defaultdict(list)
    for r in rows:
        by[(r["config"], int(r["failures"]))].append(r)

    def med(rs, col):
        vals = [float(r[col]) for r in rs if r.get(col) not in (None, "")]
        return statistics.median(vals) if vals else float("nan")

    def pct(v):
        return "-" if v != v else f"{100 * v:.1f}%"

    if scripted:
        none = {r["round"]: float(r["items_per_s"]) for r in rows if r["config"] == "none"}
    else:
        none_rows = [r for r in rows if r["config"] == "none" and r["failures"] == "0"]
        none_median = med(none_rows, "items_per_s") if none_rows else None

    vs_none = "vs none (median of per-round ratios)" if scripted else "vs none (ratio of medians)"
    print(f"| config | failures | items/s (median) | {vs_none} | state backups | "
          "backup MB | recovery ms (median) | precision | recall | ARE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    order = list(dict.fromkeys(r["config"] for r in rows))
    for (config, fails), rs in sorted(by.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
        if scripted:
            ratios = [float(r["items_per_s"]) / none[r["round"]] for r in rs if r["round"] in none]
            ratio = f"{100 * statistics.median(ratios):.0f}%" if ratios else "-"
        else:
            ratio = f"{100 * med(rs, 'items_per_s') / none_median:.0f}%" if none_median else "-"
        are = med(rs, "are")
        print(f"| {config} | {fails} | {med(rs, 'items_per_s'):.3g} | {ratio} | {med(rs, 'state_backups'):.0f} | "
              f"{med(rs, 'backup_bytes') / 1e6:.0f} | {med(rs, 'recovery_ms_median'):.1f} | "
              f"{pct(med(rs, 'precision'))} | {pct(med(rs, 'recall'))} | {'-' if are != are else f'{are:.4f}'} |")
    print()
    if scripted:
        print(f"{len(rows)} runs from `{shown(path)}`; medians over rounds.")
    else:
        print(f"{len(rows)} runs from `{shown(path)}` (no config and round columns: configurations by mode and "
              "thresholds, medians over their runs, \"vs none\" against mode none's without failures).")


if __name__ == "__main__":
    main(*arguments(__doc__, "summarize.py SUMMARY_CSV", 1, 1))
