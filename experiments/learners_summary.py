#!/usr/bin/env python3
"""Side-by-side table of the learners (learners_table.sh): for each (task, data) pair and runtime, mode none's
updates per second and approx / exact as the median of per-round ratios against none on the same runtime, with the
held-out accuracy (binary and multiclass tasks) or squared loss (linear regression) of approx."""
import csv
import statistics

from repo_paths import arguments  # experiments/repo_paths.py, beside this script


def main(out, pairs):
    print("| learner | data | runtime | none (updates/s) | approx vs none | exact vs none | held-out (approx) |")
    print("|---|---|---|---|---|---|---|")
    for pair in pairs:
        task, data = pair.split(":")
        rows = list(csv.DictReader(open(f"{out}/{task}-{data}/summary.csv")))
        ips = {(r["runtime"], r["mode"], r["round"]): float(r["items_per_s"]) for r in rows}
        for runtime in dict.fromkeys(r["runtime"] for r in rows):
            def ratio(mode):
                v = [ips[(runtime, mode, rd)] / ips[(runtime, "none", rd)]
                     for (rt, m, rd) in ips if rt == runtime and m == mode and (runtime, "none", rd) in ips]
                return f"{100 * statistics.median(v):.0f}%" if v else "-"
            none = statistics.median(ips[k] for k in ips if k[0] == runtime and k[1] == "none")
            approx = [r for r in rows if r["runtime"] == runtime and r["mode"] == "approx"]
            if task == "linear":
                held = f"loss {statistics.median(float(r['holdout_loss']) for r in approx):.4g}"
            else:
                held = f"{100 * statistics.median(float(r['holdout_accuracy']) for r in approx):.2f}%"
            print(f"| {task} | {data} | {runtime} | {none:.3g} | {ratio('approx')} | {ratio('exact')} | {held} |")
    print()
    print("Medians over rounds; ratios within a round (modes and runtimes interleaved).")


if __name__ == "__main__":
    args = arguments(__doc__, "learners_summary.py OUT_DIR [TASK:DATA ...]", 1, 1000)
    main(args[0], args[1:])
