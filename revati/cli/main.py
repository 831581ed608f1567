"""`revati` command line: one subcommand per module in revati.cli, each with register()."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

# Each module defines register(subparsers) and sets a `func(args) -> int` default.
SUBCOMMANDS = ["run", "timekeeper", "profile", "predictor", "doctor", "bench", "validate",
               "compare"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="revati", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"revati.cli.{name}").register(sub)
    return parser


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C (exit status 143), so that every command's cleanup runs
    and nothing it started outlives it. Further SIGTERMs are ignored from then on: `timeout`
    or a process-group kill often sends a second one, which would cut that cleanup short
    (a Timekeeper's shared-memory segment was left in /dev/shm that way)."""

    def unwind(*_: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, unwind)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "run":  # revati run forwards SIGTERM to its command instead
        exit_on_sigterm()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
