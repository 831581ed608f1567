"""The emulated deployment: a Timekeeper, the processes it runs on one virtual clock, the
private network they share, and what its logs say when something fails."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from revati.bench.errors import BenchError
from revati.bench.network import PrivateNetwork
from revati.timewarp.timekeeper import Timekeeper
from revati.timewarp.trace import merge_trace
from revati.timewarp.tree import ProcessTree

_PROC_PREFIX = re.compile(r"^\([\w-]+ pid=\d+\)\s?")


def _first_error(lines: list[str], context: int = 8) -> list[str]:
    """The end of the log's first traceback: where a multi-process engine failed first,
    which its last lines (the API server's own traceback) no longer show."""
    body = [_PROC_PREFIX.sub("", line) for line in lines]
    start = next((i for i, b in enumerate(body) if b.startswith("Traceback (most recent")),
                 None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(body))
                if body[i] and not body[i][0].isspace()), len(body) - 1)
    return lines[max(start, end - context):end + 1]


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    tail = text[-lines:]
    first = _first_error(text)
    if first and first[-1] not in tail:
        return "\n".join(["first error:", *first, "...", "last lines:", *tail])
    return "\n".join(tail)


_PROGRESS = re.compile(r"(\d+)/(\d+) \[")


def _requests_done(client_log: Path) -> str:
    try:
        found = _PROGRESS.findall(client_log.read_text(errors="replace")[-4000:])
    except OSError:
        return "?"
    return f"{found[-1][0]}/{found[-1][1]}" if found else "0"



class Deployment:
    """The emulated engine and its load generator on one virtual clock."""

    def __init__(self, cores: int, trace: Path | None = None,
                 node_cpu_ms: float | None = None) -> None:
        """cores, node_cpu_ms: the clock rate's corrections (Timekeeper); trace: write every
        process's GPU work and the clock's jumps there (Chrome trace) when the deployment
        closes."""
        self.trace = trace
        self.trace_parts = None if trace is None else trace.with_suffix(".parts")
        if self.trace_parts is not None:
            shutil.rmtree(self.trace_parts, ignore_errors=True)
            self.trace_parts.mkdir(parents=True)
        self.network = PrivateNetwork()
        self.network.enter()
        try:
            self.tk = Timekeeper(trace_dir=self.trace_parts, deadlock_timeout_s=120.0,
                                 cores=cores, node_cpu_ms=node_cpu_ms)
            self.tk.start()
        except BaseException:
            self.network.leave()
            raise
        self.tree = ProcessTree(self.tk)
        self.virtual_start = self.tk.virtual_ns / 1e9
        # (real, virtual) CLOCK_MONOTONIC seconds, sampled while waiting on a process: what
        # maps the virtual times a client records back to the real time they took
        self.clock: list[tuple[float, float]] = []

    def spawn(self, cmd: list[str], env: dict[str, str], log: Path) -> int:
        """Start a process of the deployment on its clock and in its network."""
        return self.tree.spawn(cmd, env | self.network.env(), log)

    def virtual_s(self) -> float:
        return self.tk.virtual_ns / 1e9 - self.virtual_start

    def progress(self, what: str, wall0: float) -> None:
        print(f"[revati bench] {what}: virtual {self.virtual_s():.1f} s, wall "
              f"{time.monotonic() - wall0:.1f} s", flush=True)

    def wait(self, pid: int, until, what: str, timeout_s: float, log: Path,
             on_poll: Callable[[], None] | None = None) -> None:
        """Wait for `until()` (or, with until=None, for pid to exit 0), failing when pid
        dies first, the run deadlocks or timeout_s of real time pass; on_poll() runs at
        every look (0.2 s of real time apart)."""
        wall0 = last = time.monotonic()
        while True:
            if on_poll is not None:
                on_poll()
            code = self.tree.exit_code(pid)
            if until is None and code == 0:
                return
            if code is not None:
                raise BenchError(f"{what} failed (exit {code}); from {log}:\n"
                                 f"{tail(log)}")
            if until is not None and until():
                return
            if self.tk.deadlocked:
                threads = "\n  ".join(str(t) for t in self.tk.threads())
                raise BenchError(f"{what}: the emulated deployment deadlocked:\n  {threads}")
            now = time.monotonic()
            self.clock.append((now, self.tk.virtual_ns / 1e9))
            if now - wall0 > timeout_s:
                raise BenchError(f"{what}: not done after {timeout_s:.0f} s; see {log}")
            if now - last > 10:
                last = now
                done = "" if until else f", requests {_requests_done(log)}"
                self.progress(what + done, wall0)
            time.sleep(0.2)

    def close(self, server: int | None = None, grace_s: float = 30.0) -> None:
        """End the deployment: the server first, gently (SIGTERM and up to grace_s of real
        time, so that its processes exit normally and leave their predictor totals), then
        whatever is left."""
        self.tree.kill_all(first=server, grace_s=grace_s)
        self.tk.stop()
        self.network.leave()
        if self.trace is not None and self.trace_parts is not None:
            n = merge_trace(self.trace_parts, self.trace)
            shutil.rmtree(self.trace_parts, ignore_errors=True)
            print(f"[revati bench] {n} trace events in {self.trace}", flush=True)
