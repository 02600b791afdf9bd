"""Summarizes experiments/modes_table.sh's summary.csv into a Markdown table: per job and mode, medians over rounds
of throughput, of the per-round ratio to mode none, of latency p50 / p99 and backup bytes (failure-free runs), and
of the recovery time (runs with failures)."""
import csv
import statistics
from collections import defaultdict

from repo_paths import arguments  # experiments/repo_paths.py, beside this script

LABELS = {"none": "none", "approx": "approx (Theta 1e5, L 1e3)", "exact": "exact (upstream backup)",
          "mb1": "microbatch 1 s", "mb2": "microbatch 2 s", "mb5": "microbatch 5 s", "mb10": "microbatch 10 s",
          "ckpt100ms": "checkpoint 100 ms", "ckpt1s": "checkpoint 1 s", "ckpt5s": "checkpoint 5 s",
          "ack": "ack (Storm)", "ask": "ask (backtrack)"}


def main(path):
    rows = list(csv.DictReader(open(path)))
    free = defaultdict(list)
    failed = defaultdict(list)
    none = {}
    for r in rows:
        key = (r["job"], r["mode"])
        (free if r["failures"] == "0" else failed)[key].append(r)
        if r["mode"] == "none":
            none[(r["job"], r["round"])] = float(r["items_per_s"])
    med = lambda rs, k: statistics.median(float(r[k]) for r in rs) if rs else float("nan")
    print("| job | mode | items/s | vs none | latency p50 / p99 (ms) | backup MB | recovery (ms) | replayed |")
    print("|---|---|---|---|---|---|---|---|")
    order = list(dict.fromkeys((r["job"], r["mode"]) for r in rows))
    for key in order:
        rs = free.get(key, [])
        ratios = [float(r["items_per_s"]) / none[(r["job"], r["round"])] for r in rs
                  if (r["job"], r["round"]) in none]
        # Without mode none in the same rounds (MODES="exact ask") there is nothing to divide by: "-", as in
        # jobs_summary.py (the median of no ratios was a traceback after every run, and table.md had no rows).
        vs_none = f"{100 * statistics.median(ratios):.0f}%" if ratios else "-"
        fs = failed.get(key, [])
        rec = f"{med(fs, 'recovery_ms_median'):.0f}" if fs else "-"
        rep = f"{med(fs, 'trees_replayed'):.0f}" if fs and key[1] == "ack" else "-"
        print(f"| {key[0]} | {LABELS.get(key[1], key[1])} | {med(rs, 'items_per_s'):.3g} | "
              f"{vs_none} | {med(rs, 'latency_p50_ms'):.2g} / "
              f"{med(rs, 'latency_p99_ms'):.2g} | {med(rs, 'backup_bytes') / 1e6:.0f} | {rec} | {rep} |")


if __name__ == "__main__":
    main(*arguments(__doc__, "modes_summary.py SUMMARY_CSV", 1, 1))
