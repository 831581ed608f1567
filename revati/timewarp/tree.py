"""The emulated processes of one run, spawned on one Timekeeper and ended together.

The spawning process becomes the subreaper of everything they start, so orphans come back
to it: `kill_all` can then find and end every process of the run, and nothing outlives it."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path
from typing import Protocol

PR_SET_CHILD_SUBREAPER = 36
TERM_GRACE_S = 3.0


class ClockOwner(Protocol):
    """What a tree needs of its Timekeeper (local or remote)."""

    def reserve(self, owner_pid: int) -> int: ...
    def child_started(self, idx: int, pid: int) -> None: ...
    def pids(self) -> list[int]: ...


def _descendants() -> set[int]:
    """Pids whose parent chain leads to this process."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in found}
        found |= frontier
    return found


class ProcessTree:
    def __init__(self, tk: ClockOwner, shared: bool = False) -> None:
        """shared: tk is a standalone Timekeeper that other runs use too, so the processes it
        knows are not all this run's (kill_all ends only this run's descendants then)."""
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.tk = tk
        self.shared = shared
        self.status: dict[int, int | None] = {}  # our direct children: wait status once reaped

    def spawn(self, cmd: list[str], env: dict[str, str], log: Path | None = None) -> int:
        """Start cmd as an emulated process (env from runner.emulated_env), its output to
        `log` when given. The clock waits for it from before its start."""
        idx = self.tk.reserve(os.getpid())
        actions = []
        fd = -1
        if log is not None:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            actions = [(os.POSIX_SPAWN_DUP2, fd, 1), (os.POSIX_SPAWN_DUP2, fd, 2)]
        try:
            pid = os.posix_spawnp(cmd[0], cmd, env, file_actions=actions)
        finally:
            if fd >= 0:
                os.close(fd)
        self.tk.child_started(idx, pid)
        self.status[pid] = None
        return pid

    def reap(self) -> None:
        """Collect every exited descendant (orphans come back to us)."""
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.status:
                self.status[pid] = st

    def exit_code(self, pid: int) -> int | None:
        """The shell-style exit code of a child once it ended (128+N: killed by signal N)."""
        self.reap()
        st = self.status.get(pid)
        if st is None:
            return None
        return 128 + os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)

    def kill_all(self) -> None:
        """End every process of the run: SIGTERM, a grace period, then SIGKILL."""
        for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            known = set() if self.shared else set(self.tk.pids())
            victims = (_descendants() | known) - {os.getpid()}
            if not victims:
                return
            for pid in victims:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                self.reap()
                if not (_descendants() - {os.getpid()}):
                    return
                time.sleep(0.02)
