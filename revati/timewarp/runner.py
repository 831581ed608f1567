"""Run one command tree in virtual time: the engine of `revati run`.

The runner spawns the command with the shim preloaded, waits for it while forwarding
SIGINT/SIGTERM, ends the run on a deadlock, and leaves no process behind: it is the
subreaper of everything the command starts, so orphans come back to it and are ended."""

from __future__ import annotations

import ctypes
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

from revati.device.env import ShimNotBuiltError as DeviceShimNotBuilt
from revati.device.env import emulated_device_env
from revati.timewarp.native import time_shim_path
from revati.timewarp.server import RemoteTimekeeper
from revati.timewarp.timekeeper import Timekeeper
from revati.timewarp.trace import merge_trace

log = logging.getLogger("revati.run")

EXIT_DEADLOCK = 125
EXIT_NOT_FOUND = 127
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 3.0
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
    hardware: str | None = None    # emulated GPU model (conf/hardware/NAME.yaml); None: no GPUs
    gpus: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)


def emulated_env(segment: Path, log_level: str, extra: dict[str, str]) -> dict[str, str]:
    """Environment of an emulated process: the shim first in LD_PRELOAD, then whatever the
    caller and `extra` (e.g. the device shim's libraries) ask for."""
    env = dict(os.environ)
    preload = [str(time_shim_path())]
    for key in ("LD_PRELOAD", "LD_LIBRARY_PATH"):
        parts = [p for p in (extra.get(key, ""), env.get(key, "")) if p]
        if key == "LD_PRELOAD":
            parts = preload + parts
        if parts:
            env[key] = ":".join(parts)
    env.update({k: v for k, v in extra.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")})
    env["REVATI_SHM"] = str(segment)
    env["REVATI_LOG_LEVEL"] = log_level
    return env


def _set_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _descendants() -> set[int]:
    """Pids whose parent chain leads to this process (orphans come back to us as subreaper)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    me, found = os.getpid(), set()
    frontier = {me}
    while frontier:
        nxt = {p for p, pp in parent.items() if pp in frontier and p not in found}
        found |= nxt
        frontier = nxt
    return found


def _reap(child: int) -> int | None:
    """Reap every exited descendant; return the main child's wait status once it exits."""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = st


def _kill_all(tk: Timekeeper | RemoteTimekeeper, child: int) -> None:
    """End every process of the run: SIGTERM, a grace period, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        victims = _descendants() | set(tk.pids())
        victims.discard(os.getpid())
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (GRACE_S if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            _reap(child)
            if not (_descendants() - {os.getpid()}):
                return
            time.sleep(0.02)


def run(opts: RunOptions) -> int:
    trace_dir = None
    if opts.timekeeper:
        try:
            tk: Timekeeper | RemoteTimekeeper = RemoteTimekeeper(opts.timekeeper)
        except ConnectionError as e:
            raise RunError(str(e)) from e
    else:
        trace_dir = Path(tempfile.mkdtemp(prefix="revati-trace-")) if opts.trace else None
        tk = Timekeeper(trace_dir=trace_dir, deadlock_timeout_s=opts.deadlock_timeout_s)
    _set_subreaper()
    workdir = Path(tempfile.mkdtemp(prefix="revati-run-"))
    extra_env = dict(opts.extra_env)
    if opts.hardware:
        try:
            extra_env.update(emulated_device_env(opts.hardware, opts.gpus, workdir))
        except (ValueError, DeviceShimNotBuilt) as e:
            shutil.rmtree(workdir, ignore_errors=True)
            raise RunError(str(e)) from e
    forwarded: list[int] = []
    signalled_at: list[float] = []
    child = -1

    def forward(signum: int, _frame: object) -> None:
        forwarded.append(signum)
        signalled_at.append(time.monotonic())
        if child > 0:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    status: int | None = None
    try:
        tk.start()
        idx = tk.reserve(os.getpid())
        env = emulated_env(tk.segment, opts.log_level, extra_env)
        try:
            child = os.posix_spawnp(opts.command[0], opts.command, env)
        except FileNotFoundError:
            print(f"revati run: command not found: {opts.command[0]}", file=sys.stderr)
            return EXIT_NOT_FOUND
        except PermissionError:
            print(f"revati run: cannot execute {opts.command[0]}", file=sys.stderr)
            return EXIT_NOT_FOUND
        tk.child_started(idx, child)
        pidfd = os.pidfd_open(child)
        try:
            while status is None:
                try:
                    select.select([pidfd], [], [], 0.1)
                except InterruptedError:
                    pass
                status = _reap(child)
                if status is None and signalled_at and \
                        time.monotonic() - signalled_at[0] > SIGNAL_GRACE_S:
                    print(f"revati run: the command did not end {SIGNAL_GRACE_S:.0f} s after "
                          f"signal {forwarded[0]}: killing it", file=sys.stderr)
                    _kill_all(tk, child)
                    return 128 + forwarded[0]
                if status is None and tk.deadlocked:
                    report = "\n  ".join(str(t) for t in tk.threads())
                    print(f"revati run: deadlock: every emulated thread waits with no deadline "
                          f"and nothing in flight:\n  {report}", file=sys.stderr)
                    _kill_all(tk, child)
                    return EXIT_DEADLOCK
        finally:
            os.close(pidfd)
        _kill_all(tk, child)
    finally:
        if status is None and child > 0:
            _kill_all(tk, child)
        tk.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for s, h in old.items():
            signal.signal(s, h)
        if trace_dir and opts.trace:
            n = merge_trace(trace_dir, opts.trace)
            log.info("wrote %d trace events to %s", n, opts.trace)
            shutil.rmtree(trace_dir, ignore_errors=True)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)
