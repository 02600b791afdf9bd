#!/usr/bin/python3
"""frontier.sh's rows -> a Markdown table: per setting, medians over rounds of approx/none (wall and CPU, same round),
the converged time without failures against none's, and the delay with 8 failures against the same setting's
failure-free run (same round)."""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
by = {(r["round"], r["setting"], r["failures"]): r for r in rows}
rounds = sorted({r["round"] for r in rows}, key=int)
settings = list(dict.fromkeys(r["setting"] for r in rows if r["setting"] != "none"))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


print("| ft.replay-items-max | approx / none (wall) | CPU approx / none | converged s, 0 failures (none: %.2f) "
      "| delay with 8 failures | backups, MB per run |" % med([float(by[(r, "none", "0")]["converged_seconds"])
                                                           for r in rounds]))
print("|---|---|---|---|---|---|")
for s in settings:
    wall, cpu, conv0, delay, mb, nb = [], [], [], [], [], []
    for r in rounds:
        n, a, f = by.get((r, "none", "0")), by.get((r, s, "0")), by.get((r, s, "8"))
        if not (n and a and f):
            continue
        wall.append(float(n["seconds"]) / float(a["seconds"]))
        cpu.append(float(a["cpu_s"]) / float(n["cpu_s"]))
        conv0.append(float(a["converged_seconds"]))
        delay.append(float(f["converged_seconds"]) / float(a["converged_seconds"]) - 1)
        mb.append(float(a["backup_bytes"]) / 1e6)
        nb.append(int(a["state_backups"]))
    print(f"| {s} | {med(wall):.0%} | {med(cpu):.0%} | {med(conv0):.2f} | {med(delay):+.1%} "
          f"({', '.join(f'{d:+.0%}' for d in delay)}) | {med(nb):.0f}, {med(mb):.0f} |")
