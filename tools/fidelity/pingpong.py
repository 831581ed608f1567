"""Does the clock rate count alternating CPU work right? Two processes pass a byte back and
forth, one working 1 ms of CPU before each send, the other 2 ms: each round is 3 ms of CPU
plus two hand-offs, whatever the host, so its virtual time should read a little over 3 ms.

    .venv/bin/python tools/fidelity/pingpong.py [--cores off,1] [--cpus 1] [--after MS]

runs it under `revati run --cores C` for each C, on the first --cpus CPUs of this process's
affinity (1: both processes share one core, so the waker is often preempted by the thread it
woke and waits, runnable, with nothing left to do), and prints the virtual time per round.
--after MS: the waker also works MS of CPU after each send, which on the node overlaps the
other's 2 ms (a round is 1 + max(2, MS) ms there) and on one core cannot
(docs/timewarp.md, "What one rate cannot do").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pinned import emulated, first_cpus

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "tests" / "timewarp" / "programs" / "pingpong.py"
ROUNDS = 300


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cores", default="off,1", help="revati run --cores values to try")
    p.add_argument("--cpus", type=int, default=1, help="CPUs the run may use")
    p.add_argument("--after", type=float, default=0.0,
                   help="ms of CPU work the waker does after each send")
    args = p.parse_args()
    node_ms = 1 + max(2, args.after)
    for cores in args.cores.split(","):
        ms = emulated(args.cpus, cores, [str(PROGRAM), str(ROUNDS), str(args.after)])
        print(f"--cores {cores} on CPUs {first_cpus(args.cpus)}: {ms:.3f} ms of virtual time a "
              f"round ({node_ms:.3f} ms of CPU on the node plus two hand-offs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
