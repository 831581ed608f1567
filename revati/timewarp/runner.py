"""Run one command tree in virtual time: the engine of `revati run`.

The runner spawns the command with the shim preloaded, waits for it while forwarding
SIGINT/SIGTERM, ends the run on a deadlock, and leaves no process behind: it is the
subreaper of everything the command starts, so orphans come back to it and are ended."""

from __future__ import annotations

import logging
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from revati.cache import CACHE_DIR
from revati.device.env import emulated_device_env
from revati.device.spec import load_spec
from revati.native import NativeNotBuilt
from revati.timewarp.native import time_shim_path
from revati.timewarp.server import RemoteTimekeeper
from revati.timewarp.timekeeper import Contention, Timekeeper
from revati.timewarp.trace import merge_trace
from revati.timewarp.tree import ProcessTree

log = logging.getLogger("revati.run")

EXIT_DEADLOCK = 125
EXIT_NOT_FOUND = 127
# how long a command may take to end after a forwarded SIGINT/SIGTERM before it is killed
SIGNAL_GRACE_S = 10.0


class RunError(Exception):
    """A run that cannot start: bad options, an unreachable Timekeeper, no shim."""


@dataclass
class RunOptions:
    command: list[str]
    trace: Path | None = None
    log_level: str = "warn"
    deadlock_timeout_s: float = 30.0
    timekeeper: str | None = None  # address of a shared `revati timekeeper`
    hardware: str | None = None    # emulated GPU (revati/conf/hardware/NAME.yaml); None: no GPUs
    gpus: int = 1
    cores: int = 0                 # CPU-contention correction (Timekeeper cores); 0: off
    extra_env: dict[str, str] = field(default_factory=dict)


def emulated_env(segment: Path, log_level: str, extra: dict[str, str]) -> dict[str, str]:
    """Environment of an emulated process: the shim first in LD_PRELOAD, then whatever the
    caller and `extra` (e.g. the device shim's libraries) ask for."""
    env = dict(os.environ)
    preload = [str(time_shim_path())]
    paths = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LIBRARY_PATH")
    for key in paths:
        parts = [p for p in (extra.get(key, ""), env.get(key, "")) if p]
        if key == "LD_PRELOAD":
            parts = preload + parts
        if parts:
            env[key] = ":".join(parts)
    env.update({k: v for k, v in extra.items() if k not in paths})
    env["REVATI_SHM"] = str(segment)
    env["REVATI_LOG_LEVEL"] = log_level
    env["REVATI_NOTICES"] = str(NOTICES)
    return env


# What the shim noticed in the last run (unimplemented entry points, unsupported values):
# rewritten by every run, read by `revati doctor`.
NOTICES = CACHE_DIR / "last-run-notices.tsv"


def start_notices() -> None:
    NOTICES.parent.mkdir(parents=True, exist_ok=True)
    NOTICES.write_text("")


def log_rate(c: Contention, node_cpu_ms: float | None) -> None:
    """The rate applied while CPU work ran, as `revati bench` records it in summary.json."""
    speed = (f"the GPU node's speed ({node_cpu_ms} ms for revati.hostspeed there)"
             if node_cpu_ms else "this host's speed")
    log.info("CPU work counted at %s: %.3f real s became %.3f virtual s, rate %.3f-%.3f, "
             "host factor %.3f-%.3f (mean %.3f)", speed, c.cpu_real_s, c.cpu_virtual_s,
             c.rate_min, c.rate_max, c.host_min, c.host_max, c.host_mean)


def run(opts: RunOptions) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="revati-run-"))
    extra_env = dict(opts.extra_env)
    if opts.hardware:
        try:
            extra_env.update(emulated_device_env(opts.hardware, opts.gpus, workdir))
        except (ValueError, NativeNotBuilt) as e:
            shutil.rmtree(workdir, ignore_errors=True)
            raise RunError(str(e)) from e
    trace_dir = None
    if opts.timekeeper:
        try:
            tk: Timekeeper | RemoteTimekeeper = RemoteTimekeeper(opts.timekeeper)
        except ConnectionError as e:
            shutil.rmtree(workdir, ignore_errors=True)
            raise RunError(str(e)) from e
    else:
        trace_dir = Path(tempfile.mkdtemp(prefix="revati-trace-")) if opts.trace else None
        # CPU work counts at the emulated GPU node's speed, as under `revati bench`
        # (docs/timewarp.md, "One rate for CPU work"); without hardware, at this host's
        node_cpu_ms = load_spec(opts.hardware).host_cpu_ms if opts.hardware else None
        tk = Timekeeper(trace_dir=trace_dir, deadlock_timeout_s=opts.deadlock_timeout_s,
                        cores=opts.cores, node_cpu_ms=node_cpu_ms)
    forwarded: list[int] = []
    signalled_at: list[float] = []
    child = -1

    def forward(signum: int, _frame: object) -> None:
        forwarded.append(signum)
        signalled_at.append(time.monotonic())
        if child > 0:
            if tree is not None:
                tree.note_shm()
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    status: int | None = None
    tree: ProcessTree | None = None
    try:
        start_notices()
        tk.start()
        tree = ProcessTree(tk, shared=opts.timekeeper is not None)
        env = emulated_env(tk.segment, opts.log_level, extra_env)
        try:
            child = tree.spawn(opts.command, env)
        except FileNotFoundError:
            print(f"revati run: command not found: {opts.command[0]}", file=sys.stderr)
            return EXIT_NOT_FOUND
        except PermissionError:
            print(f"revati run: cannot execute {opts.command[0]}", file=sys.stderr)
            return EXIT_NOT_FOUND
        pidfd = os.pidfd_open(child)
        try:
            while status is None:
                try:
                    select.select([pidfd], [], [], 0.1)
                except InterruptedError:
                    pass
                status = tree.exit_code(child)
                if status is None and signalled_at and \
                        time.monotonic() - signalled_at[0] > SIGNAL_GRACE_S:
                    print(f"revati run: the command did not end {SIGNAL_GRACE_S:.0f} s after "
                          f"signal {forwarded[0]}: killing it", file=sys.stderr)
                    tree.kill_all()
                    return 128 + forwarded[0]
                if status is None and tk.deadlocked:
                    report = "\n  ".join(str(t) for t in tk.threads())
                    print(f"revati run: deadlock: every emulated thread waits with no deadline "
                          f"and nothing in flight:\n  {report}", file=sys.stderr)
                    tree.kill_all()
                    return EXIT_DEADLOCK
        finally:
            os.close(pidfd)
        tree.kill_all()
    finally:
        if status is None and tree is not None:
            tree.kill_all()
        if isinstance(tk, Timekeeper) and opts.cores:
            log_rate(tk.contention(), node_cpu_ms)
        tk.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for s, h in old.items():
            signal.signal(s, h)
        if trace_dir and opts.trace:
            n = merge_trace(trace_dir, opts.trace)
            log.info("wrote %d trace events to %s", n, opts.trace)
            shutil.rmtree(trace_dir, ignore_errors=True)
    return status
