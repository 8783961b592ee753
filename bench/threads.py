#!/usr/bin/env python3
"""CPU seconds of a running piidx sync, by thread: bench/threads.py PID OUT.tsv

Reads /proc/PID/task/*/stat ten times a second until PID is gone, keeping
each thread's last user + system time, then writes OUT.tsv: one line per
group (`writer`: the main thread, which walks and plans, then is the one
writer of the main database; `shards`: the full-text shard writers, threads named
`piidx-fts<N>`; `workers`: every other thread, i.e. the parse workers),
then one line per thread (`tid:<tid>:<name>`). A thread's last tenth of a
second before it ends can be missed, so the groups sum to a little less
than the process's CPU time (which /usr/bin/time reports exactly).

Why: a cold sync's CPU per MB grows with the corpus, and the whole-process
figure does not say which thread grows (docs/performance.md).
"""
import os
import sys
import time


def sample(pid, last):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended between listdir and open
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue  # a zombie's times are no longer its own
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14, 15)
        last[int(tid)] = (name, ticks)
    return True


def main():
    pid, out = int(sys.argv[1]), sys.argv[2]
    tick = os.sysconf("SC_CLK_TCK")
    last = {}
    while sample(pid, last):
        time.sleep(0.1)
    groups = {"writer": 0, "workers": 0, "shards": 0}
    for tid, (name, ticks) in last.items():
        if tid == pid:
            groups["writer"] += ticks
        elif name.startswith("piidx-fts"):
            groups["shards"] += ticks
        else:
            groups["workers"] += ticks
    with open(out, "w") as f:
        for group, ticks in groups.items():
            f.write(f"{group}\t{ticks / tick:.2f}\n")
        for tid, (name, ticks) in sorted(last.items()):
            f.write(f"tid:{tid}:{name}\t{ticks / tick:.2f}\n")


if __name__ == "__main__":
    main()
