"""Processes that read CLOCK_MONOTONIC as fast as they can for DURATION_S of virtual time,
with sleeps of 0-12 ms between bursts, so that the number of runnable threads, and with it
the clock's rate under `--cores`, changes all the time. Prints how often and by how much a
process saw the clock go back, and how many reads it made."""

import json
import multiprocessing as mp
import sys
import time

DURATION_S = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
PROCS = 4


def reader(q: "mp.Queue[tuple[int, float, int]]") -> None:
    back, worst, n = 0, 0.0, 0
    last = time.monotonic()
    end = last + DURATION_S
    t = last
    while t <= end:
        t = time.monotonic()
        if t < last:
            back, worst = back + 1, max(worst, last - t)
        last = max(last, t)
        n += 1
        if n % 20000 == 0:
            time.sleep(0.002 * (n // 20000 % 7))
    q.put((back, worst, n))


if __name__ == "__main__":
    q: "mp.Queue[tuple[int, float, int]]" = mp.Queue()
    procs = [mp.Process(target=reader, args=(q,)) for _ in range(PROCS)]
    for p in procs:
        p.start()
    got = [q.get() for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps({"back": sum(g[0] for g in got), "worst_s": max(g[1] for g in got),
                      "reads": sum(g[2] for g in got)}))
