"""Profile rows from a serving engine's own kernels: a real GPU's trace of an engine under load,
completed with the kernel-argument sizes of the same engine's launches under emulation.

The micro sweeps time PyTorch's eager kernels; an engine also runs kernels no sweep launches,
above all the Triton kernels torch.compile generates for vLLM (fused residual add + RMSNorm,
SiLU-and-mul, rotary: `triton_red_fused_*`, `triton_poi_fused_*`). Without rows of their own the
launch-predicted families extrapolate from other kernels: a fused add + RMSNorm over 8,192
tokens was predicted at 363 us where the H200 took 48-76 us.

    revati profile engine-rows --trace REAL_TRACE.json.gz --launch-log LOG.tsv \
        --sweep engine_vllm_llama3_8b --out ROWS.jsonl [--trace T2 --launch-log L2 ...]
    revati profile rows --profile revati/predict/data/profiles/h200 ROWS.jsonl

REAL_TRACE: the engine's torch-profiler trace on the real GPU (Kineto JSON; its GPU events
suffice). LOG: REVATI_LAUNCH_LOG of `revati bench` running the same model and load (the shim
writes every queued operation with the features the predictor sees). One row per distinct
plain launch (kernel name, grid, block) of a family predicted from its launch, the median of
its real durations; families predicted by shape (GEMMs, attention, fused MoE) are left to
their own sweeps. A launch the emulated log lacks is reported and left out: its argument sizes
would be unknown.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from revati.predict.families import BY_NAME, family_of
from revati.predict.features import Op
from revati.profile.args import MARK, parse_launch
from revati.profile.kineto import gpu_records

Key = tuple[str, int, int, int, int, int, int]  # name, grid xyz, block xyz
LAUNCH = ("kernel", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")  # as Key


def real_kernels(path: Path) -> dict[Key, list[int]]:
    """Durations (ns) of every kernel of a Kineto trace, by launch."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        records = gpu_records(json.load(f))
    out: dict[Key, list[int]] = defaultdict(list)
    for rec, _stream in records:
        if rec.op == Op.KERNEL:
            out[(rec.name, *rec.grid, *rec.block)].append(rec.duration_ns)
    return out


def emulated_launches(path: Path) -> dict[Key, tuple[int, int, int]]:
    """(shared bytes, arg_max, arg_sum) of each kernel launch in a REVATI_LAUNCH_LOG, the most
    frequent where one launch shape was logged with several."""
    seen: dict[Key, Counter] = defaultdict(Counter)
    for line in path.read_text().splitlines():
        if line.startswith(MARK):
            continue
        r = parse_launch(line)
        if r["op"] == Op.KERNEL:
            seen[tuple(r[c] for c in LAUNCH)][(r["shared_bytes"], r["arg_max"], r["arg_sum"])] += 1
    return {k: c.most_common(1)[0][0] for k, c in seen.items()}


def rows(trace: Path, log: Path, sweep: str) -> tuple[list[dict], dict[str, object]]:
    real, emulated = real_kernels(trace), emulated_launches(log)
    out, missing = [], Counter()
    for key, durs in sorted(real.items()):
        fam = family_of(int(Op.KERNEL), key[0])
        if fam is None or BY_NAME[fam].launch_only:
            continue
        if key not in emulated:
            missing[key[0][:80]] += sum(durs)
            continue
        shared, arg_max, arg_sum = emulated[key]
        out.append(dict(op=int(Op.KERNEL), kernel=key[0], grid_x=key[1], grid_y=key[2],
                        grid_z=key[3], block_x=key[4], block_y=key[5], block_z=key[6],
                        shared_bytes=shared, arg_max=arg_max, arg_sum=arg_sum, sweep=sweep,
                        point=len(out), position=0, duration_ns=int(statistics.median(durs)),
                        reps=len(durs)))
    kept = sum(r["duration_ns"] * r["reps"] for r in out)
    lost = sum(missing.values())
    summary = {"trace": str(trace), "launch_log": str(log), "rows": len(out),
               "gpu_time_kept_ms": round(kept / 1e6, 3),
               "gpu_time_unmatched_ms": round(lost / 1e6, 3),
               "unmatched_top": missing.most_common(5)}
    return out, summary


def write_rows(traces: list[Path], logs: list[Path], sweep: str, out: Path) -> int:
    """Rows of every (trace, launch log) pair into out (JSON lines); the same launch in
    several traces is one row over all its real durations. Returns the rows written."""
    merged: dict[tuple, dict] = {}
    for trace, log in zip(traces, logs, strict=True):
        got, summary = rows(trace, log, sweep)
        print(json.dumps(summary), file=sys.stderr)
        for r in got:
            key = tuple(r[c] for c in LAUNCH)
            if key in merged:
                old = merged[key]
                n = old["reps"] + r["reps"]
                # weighted by occurrences: a close stand-in for the median of both
                old["duration_ns"] = round((old["duration_ns"] * old["reps"]
                                            + r["duration_ns"] * r["reps"]) / n)
                old["reps"] = n
            else:
                merged[key] = r
    with out.open("w") as f:
        for i, r in enumerate(merged.values()):
            f.write(json.dumps({**r, "point": i}) + "\n")
    return len(merged)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, action="append", required=True,
                        help="the engine's torch-profiler trace on the real GPU (repeatable)")
    parser.add_argument("--launch-log", type=Path, action="append", required=True,
                        help="REVATI_LAUNCH_LOG of the same load emulated, one per --trace")
    parser.add_argument("--sweep", required=True, help="the rows' sweep name")
    parser.add_argument("--out", type=Path, required=True, help="rows, JSON lines")


def run(args: argparse.Namespace) -> int:
    if len(args.trace) != len(args.launch_log):
        print("revati profile engine-rows: give one --launch-log per --trace", file=sys.stderr)
        return 2
    n = write_rows(args.trace, args.launch_log, args.sweep, args.out)
    print(f"{n} rows -> {args.out}", file=sys.stderr)
    return 0
