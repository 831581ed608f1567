"""Launch records out of a PyTorch profiler (Kineto) Chrome trace.

Why Kineto: its CUPTI activity records carry, per kernel, the demangled name, grid, block,
shared memory and the GPU execution time (no launch gap), which are the fields the device shim
sees at cuLaunchKernel; per copy and memset, the bytes and the direction. It ships with every
CUDA build of torch, so a profile can be taken on any GPU machine without building anything.
(The alternative, a record mode of the device shim around a real libcuda, would also see
cuBLAS arguments, but needs the shim to forward to a real driver; see docs/predictor.md.)

Each measured repetition of a sweep point runs inside a profiler range named
"rv#<point>#<rep>". A GPU record belongs to the range whose host interval contains the runtime
or driver call that launched it (joined by CUPTI correlation id), so anything launched outside
(warm-ups, L2 flushes) is left out.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass

RANGE = re.compile(r"^rv#(\d+)#(\d+)$")
_COPY_KIND = {"htod": 1, "dtoh": 2, "dtod": 3, "htoh": 4, "ptop": 5}


@dataclass(frozen=True)
class GpuRecord:
    """One kernel, copy or memset as CUPTI saw it."""

    op: int                 # features.Op: 0 kernel, 2 memcpy, 3 memset
    name: str
    ts_us: float
    duration_ns: int
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    bytes: int = 0
    copy_kind: int = 0


def _record(ev: dict) -> GpuRecord | None:
    cat, args = ev.get("cat", ""), ev.get("args", {})
    dur = int(round(float(ev.get("dur", 0)) * 1000))
    if cat == "kernel":
        return GpuRecord(0, ev["name"], float(ev["ts"]), dur,
                         tuple(int(v) for v in args.get("grid", (1, 1, 1))),
                         tuple(int(v) for v in args.get("block", (1, 1, 1))),
                         int(args.get("shared memory", 0)))
    if cat in ("gpu_memcpy", "gpu_memset"):
        kind = 0
        if cat == "gpu_memcpy":
            # "Memcpy HtoD (Pinned -> Device)"
            token = ev["name"].split()[1].lower() if len(ev["name"].split()) > 1 else ""
            kind = _COPY_KIND.get(token, 0)
        return GpuRecord(2 if cat == "gpu_memcpy" else 3, ev["name"], float(ev["ts"]), dur,
                         bytes=int(args.get("bytes", 0)), copy_kind=kind)
    return None


def records_by_range(trace: dict) -> dict[tuple[int, int], list[GpuRecord]]:
    """{(point, rep): GPU records launched inside that range, in GPU start order}."""
    events = trace.get("traceEvents", [])
    ranges = []  # (start, end, point, rep) per host thread
    launches: dict[int, tuple[float, object]] = {}
    gpu: list[tuple[int, GpuRecord]] = []
    for ev in events:
        if ev.get("ph") != "X":
            continue
        cat = ev.get("cat", "")
        if cat == "user_annotation":
            m = RANGE.match(ev.get("name", ""))
            if m:
                start = float(ev["ts"])
                ranges.append((start, start + float(ev.get("dur", 0)), ev.get("tid"),
                               int(m.group(1)), int(m.group(2))))
        elif cat in ("cuda_runtime", "cuda_driver"):
            corr = ev.get("args", {}).get("correlation")
            if corr is not None:
                launches[int(corr)] = (float(ev["ts"]), ev.get("tid"))
        else:
            rec = _record(ev)
            corr = ev.get("args", {}).get("correlation")
            if rec is not None and corr is not None:
                gpu.append((int(corr), rec))
    by_thread: dict[object, list[tuple[float, float, int, int]]] = defaultdict(list)
    for start, end, tid, point, rep in ranges:
        by_thread[tid].append((start, end, point, rep))
    starts = {}
    for tid, lst in by_thread.items():
        lst.sort()
        starts[tid] = [r[0] for r in lst]
    out: dict[tuple[int, int], list[GpuRecord]] = defaultdict(list)
    for corr, rec in gpu:
        host = launches.get(corr)
        if host is None or host[1] not in by_thread:
            continue
        ts, tid = host
        lst = by_thread[tid]
        i = bisect.bisect_right(starts[tid], ts) - 1
        if i >= 0 and lst[i][0] <= ts <= lst[i][1]:
            out[(lst[i][2], lst[i][3])].append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: r.ts_us)
    return dict(out)


def gpu_records(trace: dict) -> list[tuple[GpuRecord, int]]:
    """Every GPU record of a trace with its stream, in GPU start order."""
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") == "X" and (rec := _record(ev)) is not None:
            out.append((rec, int(ev.get("args", {}).get("stream", -1))))
    out.sort(key=lambda x: x[0].ts_us)
    return out
