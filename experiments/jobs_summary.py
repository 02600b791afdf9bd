#!/usr/bin/env python3
"""The per-job tables of experiments/jobs_table.sh from its summary.csv (blocks of rows, one block per job, each
with its own header because every job has its own scores), as Markdown.

Throughput ratios are taken per round (each round runs every mode of a job back to back) and the median of the
ratios is reported, which is robust to a noisy shared machine. Where the rows carry cpu_s (the run's CPU seconds,
since the fourteenth session), "CPU vs none" is the median of the per-round ratios of CPU time to none's: the cost
of a mode in work done, steadier than wall time on a shared machine. Accuracy columns are medians over rounds."""
import csv
import io
import statistics

from repo_paths import arguments  # experiments/repo_paths.py, beside this script

# Scores worth a column when a job reports them, in this order (the rest stay in summary.csv); the learners' are
# holdout_accuracy and progressive_accuracy.
SHOWN = ["precision", "recall", "are", "relative_error", "covered", "sum_relative_error", "lost_sample_bound",
         "standard_error", "words_wrong", "max_abs_error", "exact_match", "mb_per_s", "bytes_per_s", "lines_per_s",
         "words_per_s", "matches", "holdout_accuracy", "progressive_accuracy"]
PERCENT = {"precision", "recall", "covered"}
PERCENT_2 = {"holdout_accuracy", "progressive_accuracy"}  # rates that differ in the second decimal of a percent


def blocks(path):
    text = open(path).read()
    for chunk in text.split("\n\n"):
        if chunk.strip():
            yield list(csv.DictReader(io.StringIO(chunk)))


def med(rs, col):
    vals = [float(r[col]) for r in rs if r.get(col) not in (None, "", "nan")]
    return statistics.median(vals) if vals else float("nan")


def fmt(col, v):
    if v != v:
        return "-"
    if col in PERCENT:
        return f"{100 * v:.1f}%"
    if col in PERCENT_2:
        return f"{100 * v:.2f}%"
    if col.endswith("_per_s"):
        return f"{v:.3g}"
    return f"{v:.4g}"


def row_line(cells):
    """A Markdown table row of cells: the header, the separator and every row go through here, so that they have
    the same number of cells."""
    return "| " + " | ".join(cells) + " |"


def table(rows):
    label = rows[0]["label"]
    scores = [c for c in SHOWN if c in rows[0]]
    none = {r["round"]: float(r["items_per_s"]) for r in rows if r["config"] == "none" and r["failures"] == "0"}
    cpu = "cpu_s" in rows[0]
    none_cpu = {r["round"]: float(r["cpu_s"]) for r in rows
                if cpu and r["config"] == "none" and r["failures"] == "0"}
    order = list(dict.fromkeys((r["config"], r["setting"], int(r["failures"])) for r in rows))
    print(f"### {label}")
    print()
    head = (["config", "failures", "items/s (median)", "vs none (median of per-round ratios)"] +
            (["CPU vs none (per-round ratios)"] if cpu else []) + ["state backups", "backup MB"] + scores)
    print(row_line(head))
    print("|" + "---|" * len(head))
    for config, setting, fails in order:
        rs = [r for r in rows if (r["config"], r["setting"], int(r["failures"])) == (config, setting, fails)]
        ratios = [float(r["items_per_s"]) / none[r["round"]] for r in rs if r["round"] in none and fails == 0]
        ratio = f"{100 * statistics.median(ratios):.0f}% ({', '.join(f'{100 * x:.0f}' for x in ratios)})" if ratios else "-"
        cpu_cells = []
        if cpu:
            cr = [float(r["cpu_s"]) / none_cpu[r["round"]] for r in rs if r["round"] in none_cpu and fails == 0]
            cpu_cells = [f"{100 * statistics.median(cr):.0f}% ({', '.join(f'{100 * x:.0f}' for x in cr)})" if cr else "-"]
        name = config if config in ("none", "exact") else f"{config}: {setting.replace('--ft.mode approx ', '')}"
        cells = ([name, str(fails), f"{med(rs, 'items_per_s'):.3g}", ratio] + cpu_cells +
                 [f"{med(rs, 'state_backups'):.0f}", f"{med(rs, 'backup_bytes') / 1e6:.1f}"] +
                 [fmt(c, med(rs, c)) for c in scores])
        assert len(cells) == len(head)
        print(row_line(cells))
    print()
    print(f"{len(rows)} runs, {len({r['round'] for r in rows})} rounds; medians over rounds.")
    print()


def main(path):
    for rows in blocks(path):
        if rows:
            table(rows)


if __name__ == "__main__":
    main(*arguments(__doc__, "jobs_summary.py SUMMARY_CSV", 1, 1))
