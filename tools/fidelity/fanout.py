"""Does the clock rate count a tensor-parallel step's CPU work right when the workers outnumber
the cores? A coordinator (vLLM's engine core) works E ms of CPU, then wakes N workers (its TP
ranks), each of which works W ms and answers; the coordinator waits for all N answers before
the next step. On the node every process has a core, so a step is E + W ms of CPU plus the
hand-offs, whatever N: its virtual time should read that on any number of cores.

    .venv/bin/python tools/fidelity/fanout.py [--workers 4] [--cpus 1,2] [--engine-ms 1]
                                              [--worker-ms 3]

runs it under `revati run --cores C` on the first C CPUs of this process's affinity, for each
C in --cpus, and prints the virtual time per step beside the node's E + W. With --program it
runs the deployment alone in real time, which on a host with a core for each process (the
lent GPU machine's 16) measures the node's answer, hand-offs included. On C < N cores the
workers run by turns: one that has answered waits, no longer runnable, while the rest still
work, so the rate (cores over runnable threads, docs/timewarp.md, "One rate for CPU work")
rises as the step goes on, and the last worker's work counts at full rate although on the node
it overlapped the others' (docs/timewarp.md, "What one rate cannot do").
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from pinned import emulated

STEPS = 200


def spin(s: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < s:
        pass


def program(steps: int, workers: int, engine_s: float, worker_s: float) -> None:
    """The deployment run under `revati run`: prints the virtual ms a step took."""
    ends = []
    for _ in range(workers):
        a, b = socket.socketpair()
        if os.fork() == 0:
            a.close()
            for _ in range(steps):
                b.recv(1)
                spin(worker_s)
                b.send(b"y")
            os._exit(0)
        b.close()
        ends.append(a)
    t0 = time.monotonic()
    for _ in range(steps):
        spin(engine_s)
        for a in ends:
            a.send(b"x")
        for a in ends:
            a.recv(1)
    print((time.monotonic() - t0) / steps * 1000)
    for _ in ends:
        os.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpus", default="1,2", help="CPU counts to run on (each: --cores C)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--engine-ms", type=float, default=1.0)
    p.add_argument("--worker-ms", type=float, default=3.0)
    p.add_argument("--program", action="store_true",
                   help="run the deployment alone, in real time, and print ms a step: on a "
                        "host with a core for each of its processes, the node's answer")
    args = p.parse_args()
    if args.program:
        program(STEPS, args.workers, args.engine_ms / 1000, args.worker_ms / 1000)
        return 0
    node_ms = args.engine_ms + args.worker_ms
    for n in (int(c) for c in args.cpus.split(",")):
        ms = emulated(n, str(n), [__file__, "--program", "--workers", str(args.workers),
                                  "--engine-ms", str(args.engine_ms),
                                  "--worker-ms", str(args.worker_ms)])
        print(f"{args.workers} workers on {n} CPU(s) (--cores {n}): {ms:.3f} ms of virtual time "
              f"a step ({node_ms:.3f} ms of CPU on the node plus hand-offs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
