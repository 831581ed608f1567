"""The emulated processes of one run, spawned on one Timekeeper and ended together.

The spawning process becomes the subreaper of everything they start, so orphans come back
to it: `kill_all` can then find and end every process of the run, and nothing outlives it."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from revati.timewarp.priority import ahead

PR_SET_CHILD_SUBREAPER = 36
TERM_GRACE_S = 3.0
SHM_DIR = "/dev/shm/"


class ClockOwner(Protocol):
    """What a tree needs of its Timekeeper (local or remote)."""

    def reserve(self, owner_pid: int) -> int: ...
    def child_started(self, idx: int, pid: int) -> None: ...
    def pids(self) -> list[int]: ...


def _shm_inodes(pids: Iterable[int]) -> set[int]:
    """The inodes of the /dev/shm files that these processes have mapped or open. Inodes,
    not names: a POSIX named semaphore (Python multiprocessing's sem.mp-*) is mapped under a
    temporary name that sem_open links to the real one and unlinks, so the maps show the
    temporary name, deleted, and the inode is what ties the mapping to the file."""
    found: set[int] = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
            fds = list(os.scandir(f"/proc/{pid}/fd"))
        except OSError:  # gone, or not ours to read
            continue
        # a maps line: address perms offset dev inode [path]; anonymous ones have no path
        fields = [line.split(maxsplit=5) for line in maps.splitlines()]
        found |= {int(f[4]) for f in fields if len(f) == 6 and f[5].startswith(SHM_DIR)}
        for fd in fds:
            try:
                if os.readlink(fd.path).startswith(SHM_DIR):
                    found.add(os.stat(fd.path).st_ino)
            except OSError:  # closed meanwhile
                continue
    return found


def _all_pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


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
        self.shm: set[int] = set()  # inodes of the /dev/shm files the run's processes held

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
            with ahead():  # ahead of this host's other programs where permitted (priority.py)
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

    def _end(self, pid: int, sig: signal.Signals, grace_s: float) -> None:
        """Send sig to one child and wait up to grace_s of real time for it to exit."""
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while self.exit_code(pid) is None and time.monotonic() < deadline:
            time.sleep(0.05)

    def kill(self, pid: int, grace_s: float = 5.0) -> None:
        """End one child now (SIGKILL) and reap it, leaving the rest of the run alone."""
        self._end(pid, signal.SIGKILL, grace_s)

    def kill_all(self, first: int | None = None, grace_s: float = 30.0) -> None:
        """End every process of the run. `first` (a child), when given, is asked first:
        SIGTERM and up to grace_s of real time to exit normally (a server ending its own
        workers). Then the rest: SIGTERM, a grace period, SIGKILL. Last, remove the
        shared-memory files the run's processes held that no living process holds any more:
        engines stopped by a signal never unlink theirs (SGLang leaves 25 MB per server in
        /dev/shm; vLLM's TP x PP workers, killed while starting, one multiprocessing
        semaphore each)."""
        self.note_shm()
        if first is not None and self.exit_code(first) is None:
            self._end(first, signal.SIGTERM, grace_s)
        for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if self._signal_all(sig, grace):
                break
        orphans = self.shm - _shm_inodes(_all_pids())
        for entry in os.scandir(SHM_DIR) if orphans else ():
            if entry.inode() in orphans:
                Path(entry.path).unlink(missing_ok=True)
        self.shm.clear()

    def note_shm(self) -> None:
        """Remember the shared-memory files the run's processes hold now: call it before a
        signal that may end them out of kill_all's sight (a server ending its workers)."""
        self.shm |= _shm_inodes(self.pids())

    def pids(self) -> set[int]:
        """The run's processes alive now (this one excluded)."""
        known = set() if self.shared else set(self.tk.pids())
        return (_descendants() | known) - {os.getpid()}

    def _signal_all(self, sig: signal.Signals, grace: float) -> bool:
        """Send sig to every process of the run and wait up to grace seconds for them to
        end; True once none is left."""
        victims = self.pids()
        if not victims:
            return True
        self.shm |= _shm_inodes(victims)
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.reap()
            if not (_descendants() - {os.getpid()}):
                return True
            time.sleep(0.02)
        return False
