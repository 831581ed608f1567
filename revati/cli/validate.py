"""`revati validate`: emulate what a real `vllm bench serve` run measured, and compare."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from revati.bench.compare import render, validate
from revati.bench.errors import BenchError
from revati.bench.options import add_arguments, from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="compare an emulated run with a real `vllm bench serve` result",
        description="Replay the requests of RESULT.json (written by `vllm bench serve "
        "--save-result --save-detailed` on a real GPU) against the emulated engine and print "
        "every summary metric, emulated vs real, with the relative error.")
    p.add_argument("--real", type=Path, required=True, metavar="RESULT.json[.gz]")
    add_arguments(p, ["engine", "model", "hardware", "tp", "pp", "engine_python",
                      "num_warmups", "out", "cpu_dilation", "engine_args"],
                  help={"engine": "the engine the real run served with",
                        "num_warmups": "warm the emulated engine up first, as a real server "
                        "that had served earlier runs was (see revati bench --num-warmups)"})
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    opts = from_args(args)
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
