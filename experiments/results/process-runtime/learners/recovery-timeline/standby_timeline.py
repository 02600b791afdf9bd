#!/usr/bin/env python3
"""Medians over the failures of one run of the DBG lines printed with standby-prints.patch applied (AFS_DBG=1):
per failure of all workers, ms from the first SIGKILL to each learner's (workers 2 and 3) assignment to a spare,
its worker process's start, its Worker running, its prefetched chain in hand (and its size), its state restored,
its hello; and the backup server's time on each learner's state-chain request (the store read, then the whole
request: read, reply encoded, sent) and when its reply was sent (ms from the kill). The earlier learner of each failure is 'first', the other 'second'.

    standby_timeline.py run.log"""
import statistics
import sys

rows = [l.split() for l in open(sys.argv[1]) if l.startswith("DBG")]
events, cur = [], None
for r in rows:
    if len(r) > 3 and r[2] == "kill" and (cur is None or float(r[3]) - cur["t0"] > 50):
        cur = {"t0": float(r[3]), "rows": []}
        events.append(cur)
    if cur:
        cur["rows"].append(r)

cols = ["start", "run", "fetched", "restored", "hello"]
table = {("first", c): [] for c in cols + ["read", "request", "sent", "MB"]}
table.update({("second", c): [] for c in cols + ["read", "request", "sent", "MB"]})
for e in events:
    t = lambda x: float(x) - e["t0"]
    per = {}
    for r in e["rows"]:
        w = r[1]
        if w not in ("w2", "w3"):
            continue
        d = per.setdefault(w, {})
        if r[2] in cols and r[2] not in d:
            d[r[2]] = t(r[3])
            if r[2] == "fetched":
                d["MB"] = int(r[4]) / 1e6
        if r[2] == "srvread" and "read" not in d:
            d["read"] = t(r[4]) - t(r[3])
            d["read_start"] = t(r[3])
    # the server's whole request for a learner's chain: the srvreq line (state-chain kind) that starts with its read
    # (srvreq lines carry the request kind's index in the variant: x2 is a state-chain request)
    for d in per.values():
        if "read_start" not in d:
            continue
        around = [r for r in e["rows"] if r[1] == "x2" and r[2] == "srvreq" and t(r[3]) <= d["read_start"] + 1e-6
                  and t(r[4]) >= d["read_start"] + d["read"] - 1e-6]
        if around:
            r = max(around, key=lambda r: float(r[3]))
            d["request"] = t(r[4]) - t(r[3])
            d["sent"] = t(r[4])
    if len(per) != 2 or any("restored" not in d for d in per.values()):
        continue
    order = sorted(per.values(), key=lambda d: d["restored"])
    for name, d in zip(("first", "second"), order):
        for c in cols + ["read", "request", "sent", "MB"]:
            if c in d:
                table[(name, c)].append(d[c])

print(f"{len(events)} failures; medians (ms from the first SIGKILL; read, request: durations in the server)")
print("| learner | " + " | ".join(cols + ["server: read", "server: request", "server: reply sent", "chain MB"]) + " |")
print("|---" * (len(cols) + 5) + "|")
for name in ("first", "second"):
    vals = [table[(name, c)] for c in cols + ["read", "request", "sent", "MB"]]
    print(f"| {name} restored | " + " | ".join(f"{statistics.median(v):.1f}" if v else "-" for v in vals) + " |")
