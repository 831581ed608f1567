"""GPU time of vLLM's decode steps by kernel family, real against emulated: a torch-profiler
trace of the real server (Kineto JSON, gzipped or not) and `revati bench --gpu-trace`'s
OUT/gpu_trace.json of the same load. Both are cut into steps the same way, at each launch of
the kernel that starts vLLM's Llama forward (the fused embedding + RMSNorm), and the steps
that are a decode graph replay (a kernel count within --ops) are compared: median time per
step of each family, summed over every stream.

    python tools/fidelity/decode_kernels_compare.py REAL_TRACE EMULATED_TRACE [--ops 430-470]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

STEP_START = "embedding_rms_norm"
FAMILIES = ("gemm", "attention", "kv-write", "triton", "other", "copy/memset")


def family(name: str) -> str:
    n = name.lower()
    if "memcpy" in n or "memset" in n:
        return "copy/memset"
    if "nvjet" in n or "splitk" in n or "gemm" in n or "cublas" in n:
        return "gemm"
    if "reshape_and_cache" in n:
        return "kv-write"
    if "flash" in n:
        return "attention"
    return "triton" if n.startswith("triton") else "other"


def gpu_ops(path: Path) -> list[dict]:
    """(name, ts, dur in us) of every GPU operation, in start order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           or (e.get("ph") == "X" and str(e.get("tid", "")).startswith("GPU"))]
    return sorted(ops, key=lambda e: e["ts"])


def steps(ops: list[dict], lo: int, hi: int) -> list[dict[str, float]]:
    """Per-family GPU time (ms) of each decode-like step."""
    starts = [i for i, e in enumerate(ops) if STEP_START in e["name"]]
    out = []
    for a, b in zip(starts, starts[1:], strict=False):
        if lo <= b - a <= hi:
            fams = dict.fromkeys(FAMILIES, 0.0)
            for e in ops[a:b]:
                fams[family(e["name"])] += e["dur"] / 1e3
            out.append(fams)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("real", type=Path)
    p.add_argument("emulated", type=Path)
    p.add_argument("--ops", default="430-470", help="kernel count of a decode step (range)")
    args = p.parse_args()
    lo, hi = (int(x) for x in args.ops.split("-"))
    real, emu = steps(gpu_ops(args.real), lo, hi), steps(gpu_ops(args.emulated), lo, hi)
    if not real or not emu:
        raise SystemExit(f"no decode-like steps ({len(real)} real, {len(emu)} emulated)")
    print(f"family | real ms/step ({len(real)} steps) | emulated ({len(emu)}) | error")
    for fam in (*FAMILIES, "total"):
        r = statistics.median(sum(s.values()) if fam == "total" else s[fam] for s in real)
        m = statistics.median(sum(s.values()) if fam == "total" else s[fam] for s in emu)
        err = f"{(m / r - 1) * 100:+.1f} %" if r else "-"
        print(f"{fam} | {r:.3f} | {m:.3f} | {err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
