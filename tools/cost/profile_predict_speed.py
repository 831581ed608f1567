#!/usr/bin/env python3
"""Measure the C predictor's cost per prediction (target: < 5 us on average).

Replays the launches of the e2e check (H200 profile) as the emulator would issue them: whole
forwards of kernels, cuBLAS calls and attention-by-shape calls, decode steps repeating the same
shapes. Prints first-sight (uncached) and steady-state cost, and the
ctypes call overhead included in both, measured on a no-op export.

    .venv/bin/python tools/cost/profile_predict_speed.py [--forwards 200]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(forwards: int) -> None:
    from revati.predict import features as F
    from revati.predict import registry
    from revati.predict.hwprofile import read_profile
    from revati.predict.train import assign_families
    from revati.profile import e2e

    profile = read_profile(registry.profile_dir("h200"))
    kernels = profile.e2e_kernels.copy()
    for col in set(F.LAUNCH_COLUMNS) - set(kernels.columns):
        kernels[col] = 0
    kernels["family"] = assign_families(kernels)
    lib = F.native()
    if "arch" not in kernels.columns:
        kernels["arch"] = e2e.DEFAULT_ARCH
    calls = []  # (launch, shape or None) in launch order, one forward per e2e case
    for (arch, case), g in kernels.groupby(["arch", "case"]):
        a = e2e.ARCHS[str(arch)]
        b, q, kv = e2e.CASES[case]
        for row in g.sort_values("position").to_dict("records"):
            shape = (F.AttnShape(b, q, kv, a.heads, a.kv_heads, a.head_dim)
                     if row["family"] == "attention" else None)
            calls.append((F.to_launch(row), shape))
    src = ctypes.c_int()

    def one_pass() -> float:
        t0 = time.perf_counter()
        for launch, shape in calls:
            if shape is None:
                lib.rv_predict_ns(ctypes.byref(launch), ctypes.byref(src))
            else:
                lib.rv_predict_attention_ns(ctypes.byref(launch), ctypes.byref(shape),
                                            ctypes.byref(src))
        return time.perf_counter() - t0

    t_load = time.perf_counter()
    lib.rv_predict_ns(ctypes.byref(calls[0][0]), ctypes.byref(src))  # loads spec and models
    t_load = time.perf_counter() - t_load
    first = one_pass()
    steady = min(one_pass() for _ in range(forwards))
    t0 = time.perf_counter()
    for _ in calls:
        lib.rv_spec_len()
    overhead = time.perf_counter() - t0
    n = len(calls)
    total = first + steady * forwards
    print(f"launches per pass (one forward per e2e case): {n}")
    print(f"model load: {t_load * 1e3:.1f} ms")
    print(f"first pass: {first / n * 1e6:.2f} us/prediction (incl. ctypes)")
    print(f"cached:     {steady / n * 1e6:.2f} us/prediction (incl. ctypes)")
    print(f"ctypes no-op call: {overhead / n * 1e6:.2f} us")
    print(f"average over {forwards + 1} passes: {total / (n * (forwards + 1)) * 1e6:.2f} us")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--forwards", type=int, default=200)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.forwards)
        return 0
    from revati.predict import registry
    from revati.predict.hwprofile import read_profile

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "h200.txt"
        spec.write_text(read_profile(registry.profile_dir("h200")).spec.flat_text())
        env = dict(os.environ, **registry.predictor_env("h200", spec))
        return subprocess.call([sys.executable, __file__, "--child",
                                "--forwards", str(args.forwards)], env=env)


if __name__ == "__main__":
    sys.exit(main())
