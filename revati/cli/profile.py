"""`revati profile`: measure a real GPU into a hardware profile (needs torch with CUDA).

    revati profile micro --out DIR      shape sweeps of the kernel families serving uses
    revati profile e2e --out DIR        Llama-3.1-8B and Qwen2.5-14B-shaped forwards, per kernel
    revati profile devinfo --out FILE   every attribute the driver, torch and NVML report
    revati profile merge --out DIR IN...  one profile out of several runs on one GPU model
    revati profile rows --profile DIR ROWS.jsonl [--meta META.json]  add a sweep script's rows
    revati profile trace --out DIR -- python-program ...  every launch of a Python program
    revati profile args --profile DIR   kernel-argument features of a profile, replayed on an
                                        emulated GPU (no GPU needed)
    revati profile engine-rows --trace T --launch-log L --sweep S --out ROWS.jsonl
                                        rows of an engine's own kernels: a real trace of it
                                        under load, sizes from the same load emulated
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _micro(args: argparse.Namespace) -> int:
    from revati.profile import micro

    return micro.run(args, " ".join(["revati", *sys.argv[1:]]))


def _e2e(args: argparse.Namespace) -> int:
    from revati.profile import e2e

    return e2e.main(["--out", str(args.out)])


def _devinfo(args: argparse.Namespace) -> int:
    from revati.profile import devinfo

    argv = ["--out", str(args.out)] + (["--cuda-h", str(args.cuda_h)] if args.cuda_h else [])
    return devinfo.main(argv)


def _trace(args: argparse.Namespace) -> int:
    from revati.profile import trace

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    return trace.trace(args.out, program, " ".join(["revati", *sys.argv[1:]]))


def _merge(args: argparse.Namespace) -> int:
    from revati.profile.merge import merge

    profile = merge(args.inputs, args.out)
    print(f"merged {len(args.inputs)} profiles: {len(profile.launches)} rows -> {args.out}")
    return 0


def _rows(args: argparse.Namespace) -> int:
    from revati.profile.merge import add_rows

    n = add_rows(args.profile, args.rows, args.meta)
    print(f"added {n} rows of {args.rows} to {args.profile}")
    return 0


def _engine_rows(args: argparse.Namespace) -> int:
    from revati.profile import engine_rows

    return engine_rows.run(args)


def _args(args: argparse.Namespace) -> int:
    from revati.profile import args as launch_args

    return launch_args.run(args)


def register(subparsers) -> None:
    parser = subparsers.add_parser("profile", help="measure a real GPU into a hardware profile",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="profile_command", required=True)
    from revati.profile.micro import add_arguments

    micro = sub.add_parser("micro", help="kernel-family shape sweeps")
    add_arguments(micro)
    micro.set_defaults(func=_micro)
    e2e = sub.add_parser("e2e", help="end-to-end model-shaped kernel check")
    e2e.add_argument("--out", required=True, type=Path)
    e2e.set_defaults(func=_e2e)
    dev = sub.add_parser("devinfo", help="dump device attributes as JSON")
    dev.add_argument("--out", required=True, type=Path)
    dev.add_argument("--cuda-h", type=Path, default=None)
    dev.set_defaults(func=_devinfo)
    merge = sub.add_parser("merge", help="merge profiles of one GPU model")
    merge.add_argument("--out", required=True, type=Path)
    merge.add_argument("inputs", nargs="+", type=Path)
    merge.set_defaults(func=_merge)
    rows = sub.add_parser("rows", help="add a sweep script's rows (tools/profile/profile_*.py)")
    rows.add_argument("--profile", required=True, type=Path)
    rows.add_argument("--meta", type=Path, default=None, help="the script's *_meta.json")
    rows.add_argument("rows", type=Path)
    rows.set_defaults(func=_rows)
    from revati.profile.trace import add_arguments as trace_arguments

    tr = sub.add_parser("trace", help="record every GPU launch of a Python program")
    trace_arguments(tr)
    tr.set_defaults(func=_trace)
    from revati.profile.args import add_arguments as args_arguments

    ar = sub.add_parser("args", help="kernel-argument features from an emulated replay (no GPU)")
    args_arguments(ar)
    ar.set_defaults(func=_args)
    from revati.profile.engine_rows import add_arguments as engine_rows_arguments

    er = sub.add_parser("engine-rows", help="profile rows of an engine's own kernels, from a "
                        "real trace of it and the same load's emulated launch log")
    engine_rows_arguments(er)
    er.set_defaults(func=_engine_rows)
