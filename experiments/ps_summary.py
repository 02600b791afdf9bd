"""Summarizes experiments/ps_table.sh's summary.csv into a Markdown table: per consistency model and mode, the
median updates/s over the rounds (and its range), the median of the per-round ratios to mode none, the held-out
prediction rate (median and range), the largest staleness observed, and the state and item backups."""
import csv
import statistics
from collections import defaultdict

from repo_paths import arguments  # experiments/repo_paths.py, beside this script

LABELS = {"none": "none", "approx": "approx, Theta 10 / L 1e3", "approx-1e5": "approx, Theta 1e5 / L 1e3",
          "exact": "exact"}
CONSISTENCY = {"bsp": "BSP", "ssp": "SSP", "asp": "ASP"}


def consistency_label(c, rows):
    """SSP with its bound s: the runs' staleness_bound (5 in tables made before the column)."""
    if c != "ssp":
        return CONSISTENCY.get(c, c)
    bounds = sorted({r.get("staleness_bound") or "5" for r in rows})
    return f"SSP, s = {' / '.join(bounds)}"


def k(v):
    return f"{v / 1e3:.0f} k" if v < 1e6 else f"{v / 1e6:.2f} M"


def main(path):
    rows = list(csv.DictReader(open(path)))
    cells = defaultdict(list)
    none = {}
    for r in rows:
        cells[(r["consistency"], r["mode"])].append(r)
        if r["mode"] == "none":
            none[(r["consistency"], r["round"])] = float(r["items_per_s"])
    rounds = len({r["round"] for r in rows})
    items = sorted({r["items"] for r in rows})
    loads = [float(r["load1"]) for r in rows]
    print(f"{rounds} rounds, {', '.join(items)} training examples per run; load average (1 min) at the end of "
          f"the runs {min(loads):.1f} to {max(loads):.1f}.\n")
    print("| consistency | mode | updates/s (median; min to max) | vs none (median of per-round ratios) | "
          "held-out rate (median; min to max) | max staleness (clocks) | state / item backups (median) |")
    print("|---|---|---|---|---|---|---|")
    for key in dict.fromkeys((r["consistency"], r["mode"]) for r in rows):
        rs = cells[key]
        ups = [float(r["items_per_s"]) for r in rs]
        acc = [float(r["holdout_accuracy"]) for r in rs]
        ratios = [float(r["items_per_s"]) / none[(key[0], r["round"])] for r in rs if (key[0], r["round"]) in none]
        per_round = ", ".join(f"{100 * x:.0f}" for x in ratios)
        ratio = "100%" if key[1] == "none" else f"{100 * statistics.median(ratios):.0f}% ({per_round})"
        stale = [float(r["max_staleness"]) for r in rs]
        stale_txt = f"{max(stale):.0f}" if min(stale) == max(stale) else f"{min(stale):.0f} to {max(stale):.0f}"
        sb = statistics.median(float(r["state_backups"]) for r in rs)
        ib = statistics.median(float(r["item_backups"]) for r in rs)
        print(f"| {consistency_label(key[0], rs)} | {LABELS.get(key[1], key[1])} | {k(statistics.median(ups))} "
              f"({k(min(ups))} to {k(max(ups))}) | {ratio} | {100 * statistics.median(acc):.2f}% "
              f"({100 * min(acc):.2f} to {100 * max(acc):.2f}) | {stale_txt} | {sb:.0f} / {ib:.0f} |")


if __name__ == "__main__":
    main(*arguments(__doc__, "ps_summary.py SUMMARY_CSV", 1, 1))
