"""`revati compare`: one load on two or more engine configurations, with the run-to-run
spread beside each difference (revati/bench/variants.py)."""

from __future__ import annotations

import argparse
import sys

from revati.bench.errors import BenchError
from revati.bench.options import add_arguments, from_args
from revati.bench.variants import parse_variant, run_variants, table, write


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="run one load on several engine configurations and print the "
        "differences of every metric with the run-to-run spread",
        description="Each --variant NAME=FLAGS adds its engine flags to those after --; each "
        "variant gets a fresh emulated server that serves the load --repeat times. Writes "
        "OUT/compare.md, OUT/compare.json and OUT/<variant>/run<i>/summary.json.")
    p.add_argument("--variant", action="append", required=True, type=_variant,
                   metavar="NAME=FLAGS", help="e.g. 'default=' or 'seqs64=--max-num-seqs 64'")
    p.add_argument("--repeat", type=int, default=3, help="runs per variant (default 3)")
    add_arguments(p)
    p.set_defaults(func=main)


def _variant(text: str):
    try:
        return parse_variant(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(args: argparse.Namespace) -> int:
    opts = from_args(args)
    try:
        runs = run_variants(opts, args.variant, args.repeat)
    except BenchError as e:
        print(f"revati compare: {e}", file=sys.stderr)
        return 1
    text, rows = table(runs)
    write(opts.out, text, rows, runs)
    print(text)
    print(f"[revati compare] written to {opts.out}/compare.md and compare.json")
    return 0
