#!/usr/bin/python3
"""Timeline of the failures of all workers in a process-runtime run, from the lines the temporary prints of
timeline-prints.patch write to stderr (AFS_DBG=1): per failure event, from the first SIGKILL to the last worker
started, to the last worker process's main(), and to the last restore done; per learner restore (chains over 1 MB),
the backup server's time for the fetch, the worker's wait for its prefetched chain, its application, and the chain's
size. Usage: timeline.py LOG..."""
import re
import statistics as st
import sys

for path in sys.argv[1:]:
    events, fetch_ms, wait_ms, apply_ms, chain_mb = [], [], [], [], []
    for line in open(path):
        if m := re.match(r"SRV [\d.]+ FETCH w\d in \d+ out (\d+) took ([\d.]+) ms", line):
            if int(m.group(1)) > 1 << 20:
                fetch_ms.append(float(m.group(2)))
            continue
        m = re.match(r"(KILL|MAIN|DBG|STARTED) ([\d.]+) w(\d)", line)
        if not m:
            continue
        kind, t = m.group(1), float(m.group(2))
        if kind == "KILL" and (not events or t - events[-1]["kill"] > 0.5):
            events.append({"kill": t, "STARTED": [], "MAIN": [], "DBG": []})
        if not events or kind == "KILL" or (kind == "DBG" and " fail0 " in line):
            continue
        events[-1][kind].append(t)
        if kind == "DBG" and (d := re.search(r"wait ([\d.]+) ms chain \d+ recs (\d+) bytes apply ([\d.]+) ms", line)):
            if int(d.group(2)) > 1 << 20:
                wait_ms.append(float(d.group(1)))
                chain_mb.append(int(d.group(2)) / 1e6)
                apply_ms.append(float(d.group(3)))
    events = [e for e in events if e["DBG"] and e["STARTED"] and e["MAIN"]]
    med = lambda k: st.median(1000 * (max(e[k]) - e["kill"]) for e in events)
    print(f"{path}: {len(events)} events; from the first kill to the last worker started {med('STARTED'):.0f} ms, "
          f"its main() {med('MAIN'):.0f} ms, the last restore done {med('DBG'):.0f} ms (medians); learners' restores: "
          f"chain {st.median(chain_mb):.1f} MB, server {st.median(fetch_ms) if fetch_ms else float('nan'):.0f} ms, "
          f"wait {st.median(wait_ms):.0f} ms, apply {st.median(apply_ms):.0f} ms (medians)")
