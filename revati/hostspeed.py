"""Single-thread CPU speed of a host, as a serving engine's Python sees it.

CPU work counts in virtual time at the speed it runs on the emulation host, so a request's
TTFT (HTTP handling, tokenisation, scheduling, detokenisation) and a CPU-bound step follow the
host's single-thread speed. This measures that speed the same way on any machine, to compare
the emulation host with the GPU node a real run came from (docs/validation.md, "The
host's CPU speed"): median milliseconds per repetition of a fixed workload of what an engine's
request path does in Python (objects created and methods called, dicts and lists built and
sorted, strings formatted and split, JSON encoded and decoded), after an untimed warm-up.
Standard library only, so it runs on a GPU node with nothing installed (from the repository
root); `revati bench` and `revati validate` run it before and after the load
(`host_cpu_ms` in summary.json):

    python -m revati.hostspeed [--seconds S] [--warmup S] [--workload python|torch]
        [--cpu-time]

`--workload torch` times what an engine step's input preparation does with PyTorch on the
CPU instead (small tensors made from lists, indexed, summed, concatenated and turned back
into lists: PyTorch's operator dispatch, which the engines' per-step work is full of).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

ROUNDS = 200  # one timed repetition: 18-42 ms on the H200 node and on the development VM


class _Request:
    __slots__ = ("rid", "prompt", "tokens", "params")

    def __init__(self, rid: int, prompt: str, params: dict[str, object]) -> None:
        self.rid = rid
        self.prompt = prompt
        self.tokens = [len(word) * 31 % 50257 for word in prompt.split()]
        self.params = params

    def step(self, token: int) -> bool:
        self.tokens.append(token)
        return len(self.tokens) < 64


def _round(i: int) -> int:
    params = {"max_tokens": 32 + i % 7, "temperature": 0.7, "top_p": 0.95, "stream": True}
    prompt = " ".join(f"word{j % 97}" for j in range(i % 13, i % 13 + 40))
    requests = [_Request(i * 8 + r, prompt, params) for r in range(8)]
    live = list(requests)
    while live:
        live = [q for q in live if q.step((q.rid * 2654435761 + len(q.tokens)) % 50257)]
    live.sort(key=lambda q: (q.tokens[-1], q.rid))
    body = json.dumps({"id": f"cmpl-{i}", "choices": [
        {"index": q.rid, "text": " ".join(map(str, q.tokens[-16:])), "finish_reason": "length"}
        for q in requests]})
    return len(json.loads(body)["choices"]) + sum(len(q.tokens) for q in requests)


def _torch_round(i: int) -> int:
    import torch

    lens = [(i * 7 + r * 13) % 200 + 1 for r in range(32)]
    seq = torch.tensor(lens, dtype=torch.int32)
    starts = torch.cumsum(seq, 0) - seq
    positions = torch.cat([torch.arange(n) for n in lens[:8]])
    picked = torch.index_select(starts, 0, torch.tensor([0, 3, 5, 7]))
    mask = (seq > 50) & (seq < 150)
    out = (seq[mask] + 1).tolist() + picked.tolist() + positions[:4].tolist()
    return len(out) + int(seq.max())


def repetition(one_round=_round, clock=time.perf_counter) -> float:
    """Seconds one repetition of the workload takes, by `clock` (the Timekeeper's probe
    uses the thread's CPU time, so that waiting for a core does not count)."""
    t0 = clock()
    check = 0
    for i in range(ROUNDS):
        check += one_round(i)
    elapsed = clock() - t0
    assert check > 0
    return elapsed


def measure(seconds: float = 1.0, warmup_s: float = 1.0, one_round=_round,
            clock=time.perf_counter) -> list[float]:
    """Seconds per repetition by `clock`, for every repetition timed in `seconds` after
    `warmup_s` of untimed ones: a CPU that was idle runs slower for its first few hundred
    milliseconds of work (1.7x on the development VM), and the steady speed is the one both
    sides can reproduce."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup_s:
        repetition(one_round)
    times: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(times) < 5:
        times.append(repetition(one_round, clock))
    return times


def torch_ms(python: str) -> float:
    """Milliseconds of the fastest repetition of the torch workload in a second, timed in the
    thread's CPU time (a core's speed, whatever else the host runs) by `python` (an engine's
    interpreter: the workload needs its PyTorch) in a process of its own."""
    proc = subprocess.run([python, "-I", __file__, "--workload", "torch", "--seconds", "1",
                           "--warmup", "0.5", "--cpu-time"], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode:
        raise RuntimeError(f"{python} could not time PyTorch's dispatch: "
                           f"{proc.stderr.strip()[-500:]}")
    return round(json.loads(proc.stdout.strip().splitlines()[-1])["min"] * 1000, 2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds (default 1)")
    p.add_argument("--warmup", type=float, default=1.0, help="untimed seconds first")
    p.add_argument("--workload", choices=("python", "torch"), default="python")
    p.add_argument("--cpu-time", action="store_true",
                   help="time each repetition in the thread's CPU time, not real time: a "
                        "core's speed, whatever else the host runs")
    args = p.parse_args(argv)
    times = measure(args.seconds, args.warmup,
                    _torch_round if args.workload == "torch" else _round,
                    time.thread_time if args.cpu_time else time.perf_counter)
    print(json.dumps({"workload": args.workload, "seconds": statistics.median(times),
                      "min": min(times), "max": max(times),
                      "reps": len(times), "python": platform.python_version(),
                      "cpu": _cpu_name()}))
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
