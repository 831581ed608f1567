"""Costs of the device shim, printed (issue "Device emulation", Measure and report).

Runs under `revati run --hardware h200_sxm` (the shipped H200 duration models) and reads real
time through the time shim's rv_real_ns:
- a kernel launch: torch's `x.add_(1)` on a small tensor (torch dispatch + cudart + the shim
  with its timeline bookkeeping + a cached prediction);
- a host synchronisation: `torch.cuda.synchronize()` right after one launch (a time-warp
  wait until the stream's virtual completion: block, Timekeeper jump, wake);
- the wall time of the done-when-3 workload (GEMMs in 3 dtypes, SDPA, CUDA-graph replays)
  against the virtual time it represents.

Usage: python tools/cost/bench_device.py [--repeat 3]"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROGRAM = r"""
import ctypes, json, time, torch
import torch.nn.functional as F
real = ctypes.CDLL(None).rv_real_ns
real.restype = ctypes.c_int64
x = torch.ones(256, device="cuda")
for _ in range(200): x.add_(1)
torch.cuda.synchronize()
n = 20000
t = real(1)
for _ in range(n): x.add_(1)
launch_us = (real(1) - t) / n / 1e3
torch.cuda.synchronize()
syncs = []
for _ in range(500):
    x.add_(1)
    t = real(1); torch.cuda.synchronize(); syncs.append((real(1) - t) / 1e3)
syncs.sort()
# the done-when-3 workload, with the real duration models
w0, v0 = real(1), time.perf_counter()
for _ in range(20):
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a = torch.randn(4096, 4096, device="cuda", dtype=dtype); (a @ a)
    q = torch.randn(8, 32, 2048, 128, device="cuda", dtype=torch.bfloat16)
    F.scaled_dot_product_attention(q, q, q, is_causal=True)
torch.cuda.synchronize()
print(json.dumps({"launch_us": launch_us, "sync_us_median": syncs[len(syncs) // 2],
                  "sync_us_p99": syncs[int(len(syncs) * 0.99)],
                  "workload_wall_s": (real(1) - w0) / 1e9,
                  "workload_virtual_s": time.perf_counter() - v0}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = []
    for _ in range(args.repeat):
        out = subprocess.check_output(
            [sys.executable, "-m", "revati.cli.main", "run", "--hardware", "h200_sxm", "--",
             sys.executable, "-c", PROGRAM], text=True)
        runs.append(json.loads(out.strip().splitlines()[-1]))
    for key in runs[0]:
        vals = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(vals):.3f} (min {min(vals):.3f}, "
              f"max {max(vals):.3f}, n={len(vals)})")


if __name__ == "__main__":
    main()
