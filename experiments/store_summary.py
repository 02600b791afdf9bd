#!/usr/bin/env python3
"""Backup-server rates per backend and the RocksDB store's size over long runs, from store_table.sh's rates.csv,
samples.csv and sizes.csv, as Markdown tables.

Rates: "written" is a run's backup bytes over its whole time; "sustained" the median of its per-second rates
(metrics.jsonl, first and last second left out), then the median over rounds. Sizes: store_bytes is what the backup
server's RocksDB directory holds on disk (SST files, write-ahead log, info logs), sampled every second."""
import csv
import json
import statistics
from collections import defaultdict

from repo_paths import arguments, shown  # experiments/repo_paths.py, beside this script

med = lambda v: statistics.median(v) if v else float("nan")
num = lambda v: "-" if v != v else f"{v:.0f}"


def per_second_rates(samples):
    rates = []
    for a, b in zip(samples, samples[1:]):
        dt = float(b["t"]) - float(a["t"])
        if dt > 0:
            rates.append((float(b["backup_bytes"]) - float(a["backup_bytes"])) / dt)
    return rates[1:-1] if len(rates) > 2 else rates


def main(rates_path, samples_path, sizes_path):
    rows = list(csv.DictReader(open(rates_path)))
    samples = defaultdict(list)
    for r in csv.DictReader(open(samples_path)):
        samples[(r["workload"], r["store"], r["round"])].append(r)
    order = list(dict.fromkeys((r["workload"], r["store"]) for r in rows))
    by = defaultdict(list)
    for r in rows:
        by[(r["workload"], r["store"])].append(r)
    written = {(r["workload"], r["store"], r["round"]): float(r["backup_bytes"]) / float(r["seconds"]) for r in rows}

    if rows:
        print_rates(order, by, written, samples)
    print_sizes(sizes_path, rates_path)


def print_rates(order, by, written, samples):
    print("### Backup bytes per second into each backend")
    print()
    print("| workload | store | runs | items/s | backup MB written | MB/s over the run | MB/s sustained (median "
          "second) | MB/s, best second | rocksdb vs memory (MB/s over the run) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in order:
        rs = by[key]
        per = [per_second_rates(samples[(r["workload"], r["store"], r["round"])]) for r in rs]
        ips = med([float(r["items"]) / float(r["seconds"]) for r in rs])
        total = med([float(r["backup_bytes"]) / 1e6 for r in rs])
        over = med([written[(r["workload"], r["store"], r["round"])] / 1e6 for r in rs])
        sustained = med([med(p) / 1e6 for p in per if p])
        best = med([max(p) / 1e6 for p in per if p])
        ratio = "-"
        if key[1] == "rocksdb":
            vals = [written[(r["workload"], "rocksdb", r["round"])] / written[(r["workload"], "memory", r["round"])]
                    for r in rs if (r["workload"], "memory", r["round"]) in written]
            ratio = f"{100 * med(vals):.0f}%" if vals else "-"
        print(f"| {key[0]} | {key[1]} | {len(rs)} | {ips:.3g} | {total:.0f} | {over:.0f} | {num(sustained)} | "
              f"{num(best)} | {ratio} |")
    print()


def print_sizes(sizes_path, rates_path):
    sizes = defaultdict(list)
    for r in csv.DictReader(open(sizes_path)):
        sizes[r["workload"]].append(r)
    print("### RocksDB store on disk over a long run")
    print()
    print("| workload | seconds | items | backup MB written | store MB: max | store MB: median of the second half | "
          "store MB at the end | max store / written |")
    print("|---|---|---|---|---|---|---|---|")
    for w, rs in sizes.items():
        store = [float(r["store_bytes"]) / 1e6 for r in rs]
        wrote = float(rs[-1]["backup_bytes"]) / 1e6
        print(f"| {w} | {float(rs[-1]['t']):.0f} | {int(rs[-1]['source_items']):.3g} | {wrote:.0f} | "
              f"{max(store):.0f} | {med(store[len(store) // 2:]):.0f} | {store[-1]:.0f} | "
              f"{100 * max(store) / wrote if wrote else 0:.1f}% |")
    print()
    for w, rs in sizes.items():
        step = max(1, len(rs) // 10)
        print(f"Size over time, {w} (one row every {step} samples of about a second):")
        print()
        print("| t (s) | items | backup MB written | store MB on disk |")
        print("|---|---|---|---|")
        picked = rs[::step]
        if picked[-1] is not rs[-1]:
            picked.append(rs[-1])
        for r in picked:
            print(f"| {float(r['t']):.0f} | {int(r['source_items']):.3g} | {float(r['backup_bytes']) / 1e6:.0f} | "
                  f"{float(r['store_bytes']) / 1e6:.1f} |")
        print()
    print(f"From `{shown(rates_path)}` and `{shown(sizes_path)}`.")


if __name__ == "__main__":
    main(*arguments(__doc__, "store_summary.py RATES_CSV SAMPLES_CSV SIZES_CSV", 3, 3))
