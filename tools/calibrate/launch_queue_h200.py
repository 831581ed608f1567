"""How many launches can a CUDA stream hold before the next launch call blocks the CPU?

    python tools/calibrate/launch_queue_h200.py OUT.json      on the GPU machine (torch with CUDA)

A real GPU takes work into a bounded queue: once enough launches wait behind a running
kernel, the next launch call waits on the CPU until the GPU has made room. vLLM's prefill
steps outside CUDA graphs queue ~510 kernels each, and with async scheduling the next step's
are queued while the previous step still runs, so the bound may decide when the engine's
thread gets back to the scheduler. For each kind of launch this puts a ~1 s spin kernel
(torch.cuda._sleep) at the head of a stream, then times every launch call that follows:
the index of the first one that waited (took over 20 ms) is what the stream held. Kinds:
small elementwise kernels, multi-tensor kernels with a large argument block, cuBLAS GEMMs,
pinned host-to-device copies, event records, and launches on a second stream while the
first holds the spin. One probe runs under torch.profiler to see whether the wait shows
in the launch call's recorded duration (the traces' api time).
"""

from __future__ import annotations

import json
import sys
import time

BLOCKED_S = 0.02


def main(out: str) -> None:
    import torch

    dev = "cuda"
    torch.cuda.init()
    one = torch.zeros(1, device=dev)
    many = [torch.zeros(1, device=dev) for _ in range(96)]
    a = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)
    host = torch.zeros(1, pin_memory=True)
    side = torch.cuda.Stream()
    events = [torch.cuda.Event() for _ in range(16)]

    # cycles for ~1 s: time a short spin first
    torch.cuda.synchronize()
    t = time.perf_counter()
    torch.cuda._sleep(100_000_000)
    torch.cuda.synchronize()
    cycles = int(100_000_000 / (time.perf_counter() - t))
    kinds = {
        "elementwise add_ (1 element)": lambda i: one.add_(1),
        "_foreach_add_ over 96 tensors": lambda i: torch._foreach_add_(many, 1),
        "cuBLAS mm 64x64x64 bf16": lambda i: torch.mm(a, a),
        "H2D copy 4 B pinned": lambda i: one.copy_(host, non_blocking=True),
        "event record": lambda i: events[i % 16].record(),
    }

    def probe(launch, n: int, on_side: bool = False) -> dict:
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        times = []
        ctx = torch.cuda.stream(side) if on_side else torch.cuda.stream(torch.cuda.current_stream())
        with ctx:
            for i in range(n):
                t0 = time.perf_counter()
                launch(i)
                times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        drain = time.perf_counter() - t0
        blocked = [i for i, d in enumerate(times) if d > BLOCKED_S]
        return {"launches": n, "first_blocked": blocked[0] if blocked else None,
                "blocked_calls": len(blocked), "longest_call_ms": round(max(times) * 1e3, 3),
                "median_call_us": round(sorted(times)[n // 2] * 1e6, 2),
                "sum_calls_ms": round(sum(times) * 1e3, 1), "drain_after_ms": round(drain * 1e3, 1)}

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "spin_cycles": cycles, "probes": {}}
    for name, fn in kinds.items():
        fn(0)  # first-use set-up (cuBLAS handle, workspace) outside the probe
        results["probes"][name] = probe(fn, 6000)
        print(name, results["probes"][name], flush=True)
    results["probes"]["elementwise add_ on a second stream (spin on the first)"] = r = probe(
        kinds["elementwise add_ (1 element)"], 6000, on_side=True)
    print("second stream", r, flush=True)
    # the spin on the side stream, launches on the current one behind nothing
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(cycles)
    t0 = time.perf_counter()
    for _ in range(6000):
        one.add_(1)
    results["probes"]["elementwise add_ on the first stream (spin on a second)"] = {
        "sum_calls_ms": round((time.perf_counter() - t0) * 1e3, 1)}
    torch.cuda.synchronize()

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        r = probe(kinds["elementwise add_ (1 element)"], 6000)
    longest = max((e for e in prof.events() if e.name == "cudaLaunchKernel"),
                  key=lambda e: e.cpu_time_total)
    r["profiled_longest_cudaLaunchKernel_ms"] = round(longest.cpu_time_total / 1e3, 3)
    results["probes"]["elementwise add_ under torch.profiler"] = r
    print("profiled", r, flush=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "launch_queue.json")
