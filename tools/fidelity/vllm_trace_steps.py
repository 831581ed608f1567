"""One line per engine step of a vLLM torch-profiler trace (`--profiler-config` with
profiler=torch, then /start_profile and /stop_profile): the step's annotation (context
requests and tokens, generation requests and tokens), the CPU time of execute_model, its
GPU span, the summed time of its kernels, copies and memsets, how many there were, and the
CUDA runtime/driver calls the step's thread made with their summed CPU time. A step whose
GPU span far exceeds its kernels' time was waiting for the CPU to launch them.

    python tools/fidelity/vllm_trace_steps.py TRACE.json.gz > steps.tsv
"""

from __future__ import annotations

import bisect
import gzip
import json
import sys


def steps(trace: dict) -> list[dict[str, object]]:
    ev = trace["traceEvents"]
    by_ts = lambda cat: sorted((e for e in ev if e.get("cat") == cat  # noqa: E731
                                and e["name"].startswith("execute_")), key=lambda e: e["ts"])
    cpu, gpu = by_ts("user_annotation"), by_ts("gpu_user_annotation")
    if not cpu:
        return []
    tid = cpu[0]["tid"]
    api = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and e["tid"] == tid), key=lambda e: e["ts"])
    work = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                  key=lambda e: e["ts"])
    api_ts, work_ts = [e["ts"] for e in api], [e["ts"] for e in work]

    def inside(events, times, start, dur):
        return events[bisect.bisect_left(times, start):bisect.bisect_left(times, start + dur)]

    rows = []
    for c, g in zip(cpu, gpu, strict=False):
        if c["name"] != g["name"]:
            raise ValueError(f"CPU and GPU annotations out of step: {c['name']} / {g['name']}")
        calls = inside(api, api_ts, c["ts"], c["dur"])
        ops = inside(work, work_ts, g["ts"], g["dur"])
        rows.append({"step": c["name"], "cpu_ms": c["dur"] / 1e3, "gpu_span_ms": g["dur"] / 1e3,
                     "gpu_work_ms": sum(k["dur"] for k in ops) / 1e3, "gpu_ops": len(ops),
                     "api_calls": len(calls), "api_ms": sum(a["dur"] for a in calls) / 1e3})
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with gzip.open(argv[0]) as f:
        rows = steps(json.load(f))
    cols = ("step", "cpu_ms", "gpu_span_ms", "gpu_work_ms", "gpu_ops", "api_calls", "api_ms")
    print("\t".join(cols))
    for r in rows:
        print("\t".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
