"""When each engine step's tokens reached the client, against when the GPU ran the steps: the
spread that makes a run's inter-token tails. A `vllm bench serve --save-detailed` result (real
or emulated: `vllm_bench.json` of `revati bench` / `revati validate`) gives every token's
arrival (send time + TTFT + the ITLs before it); arrivals closer than GAP_MS belong to one step
(a step's tokens for all its running requests reach the client within a fraction of a
millisecond), and the period between two steps' first arrivals is what a request's ITL
follows. With `--gpu-trace` (the gpu_trace.json of the emulated run given first), the period
between the emulated GPU's steps while its client received tokens too (both on the virtual
clock), each step marked by its first kernel (STEP_KERNEL, a substring of its name: vLLM's
Llama-3.1 step opens with the fused embedding and RMSNorm).

    .venv/bin/python tools/fidelity/delivery.py RESULT.json[.gz] ... [--gpu-trace gpu_trace.json]

Prints, per file, the steps seen and the period's percentiles in milliseconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

from revati.bench.compare import read_result

GAP_MS = 1.0
STEP_KERNEL = "embedding"
WINDOW_LEAD_MS = 50.0   # the GPU steps counted start this long before the first token arrived
QUANTILES = (1, 10, 50, 90, 99)


def arrivals_ms(result: dict) -> list[float]:
    """Every token's arrival at the client, in ms on the client's clock, sorted."""
    out = []
    for start, ttft, itls in zip(result["start_times"], result["ttfts"], result["itls"],
                                 strict=True):
        t = start + ttft
        out.append(t)
        for gap in itls:
            t += gap
            out.append(t)
    return sorted(x * 1000 for x in out)


def step_starts(times: list[float], gap_ms: float) -> list[float]:
    """The first time of each run of times no further apart than gap_ms."""
    return [t for i, t in enumerate(times) if i == 0 or t - times[i - 1] > gap_ms]


def gpu_step_starts_ms(trace: Path, kernel: str) -> list[float]:
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted(e["ts"] / 1000 for e in events
                  if e.get("ph") == "X" and kernel in e.get("name", "")
                  and str(e.get("tid", "")).endswith("default stream"))


def percentiles(starts: list[float]) -> str:
    periods = [b - a for a, b in itertools.pairwise(starts)]
    if len(periods) < 2:
        return f"{len(starts)} steps: too few for a period"
    cuts = statistics.quantiles(periods, n=100, method="inclusive")
    cells = " / ".join(f"{cuts[q - 1]:.2f}" for q in QUANTILES)
    return f"{len(starts)} steps, period p{'/'.join(map(str, QUANTILES))} {cells} ms"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, nargs="+")
    p.add_argument("--gpu-trace", type=Path)
    p.add_argument("--step-kernel", default=STEP_KERNEL)
    p.add_argument("--gap-ms", type=float, default=GAP_MS)
    args = p.parse_args()
    window = None
    for path in args.results:
        times = arrivals_ms(read_result(path))
        window = window or (times[0], times[-1])
        print(f"{path}: client, {percentiles(step_starts(times, args.gap_ms))}")
    if args.gpu_trace:
        # the steps whose tokens the client received: from a step before the first arrival
        lo, hi = window[0] - WINDOW_LEAD_MS, window[1]
        starts = [t for t in gpu_step_starts_ms(args.gpu_trace, args.step_kernel) if lo <= t <= hi]
        print(f"{args.gpu_trace}: GPU, {percentiles(starts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
