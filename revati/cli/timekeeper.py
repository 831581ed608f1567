"""`revati timekeeper`: a standalone Timekeeper that several `revati run` commands share."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from revati.timewarp.server import serve
from revati.timewarp.timekeeper import parse_cores


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "timekeeper", help="serve one virtual clock to several `revati run --timekeeper` commands",
        description="Run a Timekeeper until SIGINT/SIGTERM. Commands started with "
        "`revati run --timekeeper ADDRESS -- ...` on this machine share its virtual clock.")
    p.add_argument("--address", required=True,
                   help="ZeroMQ address to listen on, e.g. ipc:///tmp/revati.ipc or "
                   "tcp://127.0.0.1:5555")
    p.add_argument("--trace", type=Path, help="write every jump as a Chrome trace on exit")
    p.add_argument("--deadlock-timeout", type=float, default=30.0, metavar="SECONDS")
    p.add_argument("--cores", type=parse_cores, default=0, metavar="N|auto|off",
                   help="CPU-contention correction, as for `revati run --cores`")
    p.add_argument("--log-level", choices=["error", "warn", "info", "debug"], default="warn")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper().replace("WARN", "WARNING"),
                        format="revati timekeeper: %(message)s")
    return serve(args.address, args.trace, args.deadlock_timeout, cores=args.cores)
