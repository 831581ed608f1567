"""`revati run`: run any command in virtual time (and, with --hardware, on emulated GPUs)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from revati.timewarp.runner import EXIT_DEADLOCK, RunError, RunOptions, run
from revati.timewarp.timekeeper import parse_cores

LEVELS = ["error", "warn", "info", "debug"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run a command in virtual time",
        description="Run CMD with the time-warp shim preloaded into it and every descendant. "
        f"Exits with CMD's exit code; {EXIT_DEADLOCK} when the run deadlocked.")
    p.add_argument("--trace", type=Path, help="write every jump (and GPU work) as a Chrome trace")
    p.add_argument("--timekeeper", metavar="ADDRESS",
                   help="share the clock of a standalone `revati timekeeper` at ADDRESS")
    p.add_argument("--log-level", choices=LEVELS, default="warn")
    p.add_argument("--deadlock-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="real seconds every thread may wait with no deadline before the run "
                   "is declared deadlocked (0: never)")
    p.add_argument("--hardware", metavar="NAME",
                   help="emulate GPUs of this model (revati/conf/hardware/NAME.yaml, "
                        "e.g. h200_sxm)")
    p.add_argument("--gpus", type=int, default=1, help="number of emulated GPUs (with --hardware)")
    p.add_argument("--cores", type=parse_cores, default=0, metavar="N|auto|off",
                   help="correct for CPU contention: virtual time runs at the share of a core "
                   "each running emulated thread gets: N/runnable while more than N are "
                   "runnable, or less where other programs take the cores too (auto: this "
                   "host's cores; default off: CPU work counts at real speed)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        print("revati run: no command given (usage: revati run [options] -- CMD ARGS...)")
        return 2
    logging.basicConfig(level=args.log_level.upper().replace("WARN", "WARNING"),
                        format="revati: %(message)s")
    opts = RunOptions(command=cmd, trace=args.trace, log_level=args.log_level,
                      deadlock_timeout_s=args.deadlock_timeout, timekeeper=args.timekeeper,
                      hardware=args.hardware, gpus=args.gpus, cores=args.cores)
    if args.timekeeper and (args.trace or args.cores):
        print("revati run: --trace and --cores belong to the shared timekeeper "
              "(revati timekeeper --trace/--cores)")
        return 2
    try:
        return run(opts)
    except RunError as e:
        print(f"revati run: {e}", file=sys.stderr)
        return 2
