"""`revati profile trace --out DIR -- python ...`: record every GPU launch of a Python program.

Runs the program (a script, `-m module` or `-c code`, with its arguments) in this interpreter
under the PyTorch profiler and writes each kernel, copy and memset its process launched, with
the fields the device shim sees (kineto.py) plus the GPU start time and stream, so a real run
can be compared launch by launch with an emulated run of the same program. Only the process
started here is traced: programs that do their GPU work in child processes (vLLM's V1 engine
core) need the shim's record mode instead (docs/predictor.md, section 3).

    DIR/launches.parquet   op, kernel, grid/block, shared_bytes, bytes, copy_kind,
                           ts_us (GPU start), duration_ns, stream, in launch order
    DIR/trace.yaml         command, exit status, GPU, torch/CUDA versions, date, counts
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import runpy
import sys
import tempfile
from pathlib import Path

from revati.predict.features import empty_launch_row
from revati.profile.kineto import gpu_records


def run_program(argv: list[str]) -> int:
    """Run `argv` ([script, args...], ["-m", module, args...] or ["-c", code, args...]) as
    __main__; returns its exit status."""
    if not argv:
        raise SystemExit("revati profile trace: no program given after --")
    saved = sys.argv[:]
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        else:
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved
    return 0


def trace(out: Path, argv: list[str], command: str) -> int:
    import pandas as pd
    import torch
    import yaml
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        status = run_program(argv)
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            records = gpu_records(json.load(f))
    rows = []
    for rec, stream in records:
        row = empty_launch_row(rec.op)
        row.update(kernel=rec.name if rec.op == 0 else "", grid_x=rec.grid[0],
                   grid_y=rec.grid[1], grid_z=rec.grid[2], block_x=rec.block[0],
                   block_y=rec.block[1], block_z=rec.block[2], shared_bytes=rec.shared_bytes,
                   bytes=rec.bytes, copy_kind=rec.copy_kind, ts_us=rec.ts_us,
                   duration_ns=rec.duration_ns, stream=stream)
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(out / "launches.parquet", index=False, compression="zstd")
    meta = {"command": command, "exit_status": status, "launches": len(rows),
            "gpu_time_ns": int(sum(r["duration_ns"] for r in rows)),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
            "date": datetime.datetime.now(datetime.UTC).isoformat()}
    (out / "trace.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    print(f"[trace] {len(rows)} launches, {meta['gpu_time_ns'] / 1e6:.3f} ms GPU time -> {out}",
          file=sys.stderr)
    return status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="folder to write")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="-- then: script.py args | -m module args | -c code args")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="revati.profile.trace", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    command = " ".join(["python -m revati.profile.trace", *(sys.argv[1:] if argv is None
                                                              else argv)])
    return trace(args.out, program, command)


if __name__ == "__main__":
    sys.exit(main())
