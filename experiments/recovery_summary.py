#!/usr/bin/env python3
"""Recovery phases per state size and store, from the failures.csv and summary.csv made by recovery_table.sh.

Every recovery of every round counts once (medians, 90th percentiles). Columns of failures.csv (afstream run --out,
process runtime), all in ms from the SIGKILL:
  detect_ms     kill to detection (0: the controller kills and reaps the process itself)
  restore_ms    in the restarted worker: fetch the state chain from the backup server and restore it
  recovery_ms   kill to the restarted worker's hello (process started, state restored, sockets bound)
  replay_ms     in the worker: restored to every logged item replayed (after the hello)
  first_item_ms kill to the first item the worker processed from upstream after the recovery (-1: none)
Derived here: restart = recovery - detect - restore (fork/exec, job setup, the hello's way to the controller);
reconnect = first_item - recovery - replay (the controller's broadcast, upstream rewinding and resending, the
restarted worker's synchronous backup of its compensated state, its first item)."""
import csv
import statistics
from collections import defaultdict

from repo_paths import arguments, shown  # experiments/repo_paths.py, beside this script


def pct(vals, p):
    vals = sorted(vals)
    if not vals:
        return float("nan")
    k = (len(vals) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)


def fmt(v):
    if v != v:  # nan
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"


def main(failures_path, summary_path):
    rows = list(csv.DictReader(open(failures_path)))
    runs = list(csv.DictReader(open(summary_path)))
    order = list(dict.fromkeys((r["size"], r["store"]) for r in runs))
    by = defaultdict(list)
    for r in rows:
        by[(r["size"], r["store"])].append(r)
    runs_by = defaultdict(list)
    for r in runs:
        runs_by[(r["size"], r["store"])].append(r)

    print("| counters per worker | store | runs | recoveries | detect | restart | restore (fetch + apply) | replay | "
          "reconnect | kill to hello | **kill to first item** (median) | first item p90 | first item < 100 ms | "
          "items/s (median run) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in order:
        rs = by.get(key, [])
        f = lambda r, c: float(r[c])
        detect = [f(r, "detect_ms") for r in rs]
        restore = [f(r, "restore_ms") for r in rs]
        replay = [f(r, "replay_ms") for r in rs]
        hello = [f(r, "recovery_ms") for r in rs]
        restart = [f(r, "recovery_ms") - f(r, "detect_ms") - f(r, "restore_ms") for r in rs]
        done = [r for r in rs if f(r, "first_item_ms") >= 0]
        first = [f(r, "first_item_ms") for r in done]
        reconnect = [f(r, "first_item_ms") - f(r, "recovery_ms") - f(r, "replay_ms") for r in done]
        med = lambda v: statistics.median(v) if v else float("nan")
        under = f"{100 * sum(1 for v in first if v < 100) / len(first):.0f}%" if first else "-"
        ips = med([float(r["items_per_s"]) for r in runs_by[key]])
        print(f"| {key[0]} | {key[1]} | {len(runs_by[key])} | {len(rs)} | {fmt(med(detect))} | {fmt(med(restart))} | "
              f"{fmt(med(restore))} | {fmt(med(replay))} | {fmt(med(reconnect))} | {fmt(med(hello))} | "
              f"**{fmt(med(first))}** | {fmt(pct(first, 0.9))} | {under} | {ips:.3g} |")
    print()
    print(f"Milliseconds, medians over {len(rows)} recoveries from `{shown(failures_path)}` (every recovery of every round); "
          "phase medians need not add up to the total's median. restart = kill to hello - detect - restore; "
          "reconnect = first item - kill to hello - replay. The first item's columns (and `< 100 ms`) count the "
          f"recoveries that processed an item from upstream after it ({sum(1 for r in rows if float(r['first_item_ms']) >= 0)} "
          f"of {len(rows)}; first_item_ms -1: the worker's input had ended, or the run ended first).")


if __name__ == "__main__":
    main(*arguments(__doc__, "recovery_summary.py FAILURES_CSV SUMMARY_CSV", 2, 2))
