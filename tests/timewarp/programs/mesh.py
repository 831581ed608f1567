"""N member processes wake at seeded random virtual times; at each wake a member reports to
a collector process and waits for its reply before sleeping again.

Wake times sit on a 1 s grid plus 100 ms per member, so no two members ever wake within
the real scheduling noise of each other, even on a loaded 2-core machine
and the virtual order is fixed by the seed alone; process start-up (real CPU time, which
counts) is taken out by starting everybody from one common virtual time.
Prints the collector's view: every (virtual receive time, member, step) as JSON."""

import json
import multiprocessing as mp
import random
import sys
import time


def member(i: int, steps: int, seed: int, to_collector, from_collector, start) -> None:
    rng = random.Random(seed * 100 + i)
    t0 = start.recv()
    wake = t0
    for step in range(steps):
        wake += rng.randint(1, 25)
        time.sleep(wake + i * 0.1 - time.monotonic())
        to_collector.put((i, step))
        from_collector.recv()


def collector(n: int, steps: int, inbox, replies, out) -> None:
    events = []
    for _ in range(n * steps):
        i, step = inbox.get()
        events.append((time.monotonic(), i, step))
        replies[i].send("ok")
    out.put(events)


if __name__ == "__main__":
    n, steps, seed = map(int, sys.argv[1:4])
    inbox, out = mp.Queue(), mp.Queue()
    pipes = [mp.Pipe() for _ in range(n)]
    starts = [mp.Pipe() for _ in range(n)]
    procs = [mp.Process(target=member, args=(i, steps, seed, inbox, pipes[i][0], starts[i][0]))
             for i in range(n)]
    procs.append(mp.Process(target=collector, args=(n, steps, inbox, [p[1] for p in pipes], out)))
    for p in procs:
        p.start()
    t0 = time.monotonic() + 1.0
    for s in starts:
        s[1].send(t0)
    events = out.get()
    for p in procs:
        p.join()
    print(json.dumps({"events": events}))
