"""CPU seconds each thread of a process tree used while a benchmark client ran.

Emulated GPU time costs no wall time, but every process's own CPU work runs at this host's
speed, so the CPU that the engine's threads use during the load bounds how fast an emulated
benchmark can be. This samples /proc every 0.2 s for the descendants of ROOT (the
`revati bench`/`revati validate` process), takes the window in which a process whose command
line contains CLIENT (the load generator) was alive, and prints each thread's CPU seconds
in that window, most first, with the window's wall time:

    python3 tools/fidelity/cpu_by_thread.py ROOT_PID [--client 'bench serve'] [--top 15]

It stops when ROOT exits. Threads that end inside the window count up to their last sample.
"""

from __future__ import annotations

import argparse
import os
import time

TICK = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += children(p)
    return pids


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def thread_cpu(pid: int) -> dict[tuple[int, int], tuple[str, float]]:
    """(pid, tid) -> (thread name, CPU seconds so far)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[(pid, int(tid))] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=int)
    ap.add_argument("--client", default="bench serve")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    first: dict[tuple[int, int], float] = {}
    last: dict[tuple[int, int], tuple[str, float]] = {}
    names: dict[int, str] = {}
    start = end = None
    while os.path.exists(f"/proc/{args.root}"):
        pids = tree(args.root)
        client_alive = any(args.client in cmdline(p) for p in pids)
        now = time.monotonic()
        if client_alive or start is not None and end is None:
            for p in pids:
                names.setdefault(p, cmdline(p)[:80])
                for key, (name, cpu) in thread_cpu(p).items():
                    first.setdefault(key, cpu if start is None else 0.0)
                    last[key] = (name, cpu)
            if start is None:
                start = now
            if not client_alive:
                end = now
        time.sleep(0.2)
    if start is None:
        raise SystemExit(f"no process matching {args.client!r} ran under {args.root}")
    wall = (end or time.monotonic()) - start
    used = sorted(((cpu - first[key], key, name) for key, (name, cpu) in last.items()),
                  reverse=True)
    print(f"window: {wall:.1f} s of wall time; CPU seconds in it: "
          f"{sum(u for u, _, _ in used):.1f} in all")
    by_process: dict[int, float] = {}
    for u, (pid, _), _ in used:
        by_process[pid] = by_process.get(pid, 0.0) + u
    for pid, u in sorted(by_process.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {u:7.2f} s  pid {pid:<7} {names.get(pid, '')}")
    print("threads:")
    for u, (pid, tid), name in used[: args.top]:
        print(f"  {u:7.2f} s  pid {pid:<7} tid {tid:<7} {name}")


if __name__ == "__main__":
    main()
