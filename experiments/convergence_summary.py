#!/usr/bin/python3
"""The table and plots of experiments/convergence.sh (issue 5, item 5), from OUT/summary.csv and OUT/traces/.

Table (Markdown on stdout): per dataset, config and failure count, medians over rounds of the held-out prediction
rate, the progressive accuracy, converged_items and converged_seconds, and the convergence delay: per round,
converged(k failures) / converged(0 failures) of the same config and dataset, in items and in seconds; the median
of those ratios, minus 1, in percent (the paper's +13% / +20% with 8 failures); and the same delay measured inside
each run from the time each failure set the workers back (set_back below), which run-to-run noise does not reach. "never" counts the rounds that did not
converge. A second table gives the prediction-rate change with failures against the failure-free run of the same
config (points; the paper loses 3.9 points after 10 failures at Theta 10, L 1e3).

Plots (OUT/convergence-DATASET.png and .pdf; needs matplotlib, so run with /usr/bin/python3 here): round 1's traces,
progressive loss, progressive accuracy and L1 model change against items (top) and against seconds (bottom), one line
per config and failure count; failures marked at their at_items from failures.csv (on the time axis at the time the
trace reached those items, interpolated)."""
import csv
import math
import os
import statistics
import sys

from repo_paths import arguments  # experiments/repo_paths.py, beside this script


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def med(vals):
    vals = [v for v in vals if not math.isnan(v)]
    return statistics.median(vals) if vals else float("nan")


def fmt(v, digits=1, pct=False, sign=False):
    if math.isnan(v):
        return "n/a"
    if pct:
        v *= 100
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def repeated_per_failure(traces, ds, cfg, fails, rnd):
    """Mean over the run's recoveries of a learner (or sink) of the input items it processed again (failures.csv
    repeated_items; -1, unknown, for sources); None without the file or the column."""
    path = os.path.join(traces, f"{ds}-{cfg.replace(' ', '')}-{fails}-r{rnd}.failures.csv")
    if not fails or not os.path.exists(path):
        return None
    vals = [num(f["repeated_items"]) for f in read_csv(path) if "repeated_items" in f and num(f["repeated_items"]) >= 0]
    return statistics.mean(vals) if vals else None


def set_back(traces, ds, cfg, fails, rnd, converged_items, converged_seconds):
    """What the run's failures set the job back, measured inside the run (failures.csv caught_up_ms: kill to the
    moment a recovered worker had processed again everything its crashed incarnation had processed). Per failure of all
    workers (the rows sharing at_items), the slowest worker's; returns (mean over the failures in ms, the delay they
    add to convergence: their sum over the failures that sent the workers back before the convergence point, over
    the run's converged time less that sum), or None without the file or the column. Not counted: a slowdown that
    outlasts the recovery (the extra backups of halved thresholds; a rewound source without an in-flight limit
    producing the rest of its input at once, as in approx A0). Run-to-run noise does not enter: both parts come from
    the same run, at the machine's speed of the moment."""
    path = os.path.join(traces, f"{ds}-{cfg.replace(' ', '')}-{fails}-r{rnd}.failures.csv")
    if not fails or not os.path.exists(path):
        return None
    by_event, rewound = {}, {}
    for f in read_csv(path):
        v = num(f.get("caught_up_ms"))
        if not math.isnan(v) and v >= 0:
            at = num(f["at_items"])
            by_event[at] = max(by_event.get(at, 0.0), v)
            rewound[at] = rewound.get(at, 0.0) + max(num(f["repeated_items"]), 0.0)
    if not by_event:
        return None
    # A failure delays convergence when it sends the workers back before the convergence point (the trace points
    # from there on are taken again, later): at_items, less what they processed again, below converged_items.
    before = sum(v for at, v in by_event.items() if at - rewound[at] < converged_items)
    total_ms = 1000 * converged_seconds
    delay = before / (total_ms - before) if total_ms > before else float("nan")
    return statistics.mean(by_event.values()), delay


def table(rows, traces):
    configs = []
    for r in rows:
        if r["config"] not in configs:
            configs.append(r["config"])
    by = {}
    for r in rows:
        by.setdefault((r["dataset"], r["config"], int(r["failures_planned"])), {})[r["round"]] = r
    out = ["| dataset | config | failures | held-out prediction rate | vs 0 failures (points) | progressive accuracy |"
           " converged items | converged s | delay (items) | delay (s) | delay (ms) | repeated per failure |"
           " set back per failure (ms) | delay (set back) | never converged |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for ds in sorted({k[0] for k in by}, key=lambda d: ["higgs", "kdd"].index(d) if d in ("higgs", "kdd") else 9):
        for cfg in configs:
            for f in sorted({k[2] for k in by if k[0] == ds and k[1] == cfg}):
                runs = by[(ds, cfg, f)]
                base = by.get((ds, cfg, 0), {})
                acc = med([num(r["holdout_accuracy"]) for r in runs.values()])
                dacc = med([num(r["holdout_accuracy"]) - num(base[k]["holdout_accuracy"]) for k, r in runs.items()
                            if k in base])
                pacc = med([num(r["progressive_accuracy"]) for r in runs.values()])
                ci = med([num(r["converged_items"]) for r in runs.values()])
                cs = med([num(r["converged_seconds"]) for r in runs.values()])
                ratio = lambda col: med([num(r[col]) / num(base[k][col]) - 1 for k, r in runs.items()
                                         if k in base and num(base[k][col]) > 0])
                delay_ms = med([1000 * (num(r["converged_seconds"]) - num(base[k]["converged_seconds"]))
                                for k, r in runs.items() if k in base])
                repeated = med([v for v in (repeated_per_failure(traces, ds, cfg, f, k) for k in runs) if v is not None])
                backs = [v for v in (set_back(traces, ds, cfg, f, k, num(r["converged_items"]),
                                              num(r["converged_seconds"])) for k, r in runs.items()) if v is not None]
                back_ms = med([b[0] for b in backs])
                back_delay = med([b[1] for b in backs])
                never = sum(1 for r in runs.values() if math.isnan(num(r["converged_items"])))
                out.append(f"| {ds} | {cfg} | {f} | {fmt(acc, 2, True)}% | "
                           f"{fmt(dacc, 2, True, True) if f else ''} | {fmt(pacc, 2, True)}% | "
                           f"{fmt(ci, 0)} | {fmt(cs, 2)} | "
                           f"{(fmt(ratio('converged_items'), 1, True, True) + '%') if f else ''} | "
                           f"{(fmt(ratio('converged_seconds'), 1, True, True) + '%') if f else ''} | "
                           f"{fmt(delay_ms, 0, sign=True) if f else ''} | {fmt(repeated, 0) if f else ''} | "
                           f"{fmt(back_ms, 1) if f else ''} | "
                           f"{(fmt(back_delay, 1, True, True) + '%') if f else ''} | {never}/{len(runs)} |")
    return "\n".join(out)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def plots(out_dir, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = os.path.join(out_dir, "traces")
    for ds in sorted({r["dataset"] for r in rows}):
        runs = [r for r in rows if r["dataset"] == ds and r["round"] == "1"]
        if not runs:
            continue
        fig, axes = plt.subplots(2, 3, figsize=(16, 9))
        cmap = plt.get_cmap("tab10")
        for n, r in enumerate(runs):
            tag = f"{ds}-{r['config'].replace(' ', '')}-{r['failures_planned']}-r1"
            tpath = os.path.join(traces, tag + ".trace.csv")
            if not os.path.exists(tpath):
                continue
            t = read_csv(tpath)
            items = [num(p["items"]) for p in t]
            secs = [num(p["seconds"]) for p in t]
            label = f"{r['config']}, {r['failures_planned']} failures"
            style = {"color": cmap(n % 10), "linewidth": 1.2, "label": label,
                     "linestyle": "-" if r["failures_planned"] == "0" else ("--" if r["failures_planned"] == "4" else ":")}
            fails = sorted({num(f["at_items"]) for f in read_csv(os.path.join(traces, tag + ".failures.csv"))})
            for col, (ax_items, ax_time) in zip(("progressive_loss", "progressive_accuracy", "l1_change"),
                                                zip(axes[0], axes[1])):
                y = [num(p[col]) for p in t]
                ax_items.plot(items, y, **style)
                ax_time.plot(secs, y, **style)
                for a in fails:
                    ax_items.axvline(a, color=style["color"], alpha=0.25, linewidth=0.8)
                    if len(items) > 1:
                        ax_time.axvline(interp(a, items, secs), color=style["color"], alpha=0.25, linewidth=0.8)
        for j, (col, name) in enumerate((("progressive_loss", "progressive loss"),
                                         ("progressive_accuracy", "progressive accuracy"),
                                         ("l1_change", "L1 model change per trace point"))):
            axes[0][j].set_xlabel("training examples")
            axes[1][j].set_xlabel("seconds")
            for ax in (axes[0][j], axes[1][j]):
                ax.set_ylabel(name)
                if col == "l1_change":
                    ax.set_yscale("log")
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{ds}-like data, logistic SGD: convergence with failures of all workers "
                     "(vertical lines: failures; round 1)")
        fig.tight_layout()
        for ext in ("png", "pdf"):
            fig.savefig(os.path.join(out_dir, f"convergence-{ds}.{ext}"), dpi=110)
        plt.close(fig)


def interp(x, xs, ys):
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]) if xs[i] > xs[i - 1] else 0
            return ys[i - 1] + f * (ys[i] - ys[i - 1])
    return ys[-1]


def main():
    args = arguments(__doc__, "convergence_summary.py [OUT_DIR]", 0, 1)
    out_dir = args[0] if args else "experiments/results/convergence"
    rows = read_csv(os.path.join(out_dir, "summary.csv"))
    for r in rows:
        r["failures_planned"] = str(len([p for p in r["fail_points"].split(",") if p]))
    print(table(rows, os.path.join(out_dir, "traces")))
    print()
    print("Delay: median over rounds of converged(k failures) / converged(0 failures) - 1, same dataset and config; "
          "in ms, the median of converged_seconds(k) - converged_seconds(0). Repeated per failure: the input items a "
          "recovered worker processed again (failures.csv repeated_items; behind the replayable source everything "
          "after the backup it restored), mean over the recoveries of a run, median over rounds. "
          "Set back per failure: per failure of all workers, the slowest worker's time from the kill until it had "
          "processed again everything its crashed incarnation had processed (failures.csv caught_up_ms), mean over a "
          "run's failures, median over rounds; delay (set back): their sum over the failures that sent the workers "
          "back before the convergence point, over the run's converged time less that sum, median over rounds: the "
          "delay measured inside each run, free of the run-to-run noise that the delay in seconds carries "
          "(failure-free runs of one config differ by up to 30% on a shared 2-core machine), but blind to a slowdown "
          "that outlasts the recoveries (approx A0: its rewound source, with no in-flight limit, produces the rest of "
          "its input at once). "
          "Converged: the first trace point (one per 1% of the input) after which the relative L1 model change "
          "(mean over the 2 learner copies of ||w - w_prev||_1, over the mean ||w||_1) stays below learn.tolerance "
          "(0.2 dense, 0.025 sparse) for learn.window = 5 points. Seconds: wall time from the job's start.")
    try:
        plots(out_dir, rows)
    except ImportError as e:
        print(f"\n(no plots: {e}; run with /usr/bin/python3)", file=sys.stderr)


if __name__ == "__main__":
    main()
