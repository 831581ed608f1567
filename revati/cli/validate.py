"""`revati validate`: emulate what a real `vllm bench serve` run measured, and compare."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from revati.cli.bench import add_cpu_dilation
from revati.engines import ENGINES
from revati.workload.bench import BenchError, BenchOptions
from revati.workload.validate import render, validate


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="compare an emulated run with a real `vllm bench serve` result",
        description="Replay the requests of RESULT.json (written by `vllm bench serve "
        "--save-result --save-detailed` on a real GPU) against the emulated engine and print "
        "every summary metric, emulated vs real, with the relative error.")
    p.add_argument("--real", type=Path, required=True, metavar="RESULT.json")
    p.add_argument("--engine", default="vllm", choices=sorted(ENGINES),
                   help="the engine the real run served with")
    p.add_argument("--model", required=True)
    p.add_argument("--hardware", required=True)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--engine-python", type=Path)
    p.add_argument("--num-warmups", type=int, default=0,
                   help="warm the emulated engine up first, as a real server that had served "
                   "earlier runs was (see revati bench --num-warmups)")
    p.add_argument("--out", type=Path, required=True)
    add_cpu_dilation(p)
    p.add_argument("engine_args", nargs=argparse.REMAINDER, metavar="-- ENGINE FLAGS")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    extra = args.engine_args[1:] if args.engine_args[:1] == ["--"] else args.engine_args
    opts = BenchOptions(model=args.model, hardware=args.hardware, engine=args.engine,
                        tp=args.tp, pp=args.pp, engine_python=args.engine_python, out=args.out,
                        num_warmups=args.num_warmups, cpu_dilation=args.cpu_dilation,
                        engine_args=extra)
    try:
        rows, report = validate(args.real, opts)
    except (BenchError, OSError, ValueError) as e:
        print(f"revati validate: {e}", file=sys.stderr)
        return 1
    print(render(rows))
    measured = report["emulated_measured_wall_s"]
    print(f"\nemulated wall {report['emulated_wall_s']:.1f} s (the measured requests: "
          f"{'?' if measured is None else f'{measured:.1f}'} s) for a real run of "
          f"{report['real_duration_s']:.1f} s; KV-cache blocks (emulated) "
          f"{report['num_gpu_blocks_emulated']}; written to {args.out}/validation.md")
    return 0
