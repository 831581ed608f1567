"""Helpers for running programs under `revati run` in the time-warp tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

import pytest

from tests.host import stolen_s


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    stolen_s: float  # what the hypervisor took meanwhile (tests/host.py)

    def json(self) -> dict:
        return json.loads(self.stdout.strip().splitlines()[-1])


def revati_run(args: list[str], timeout: float = 120, run_opts: list[str] | None = None,
               **kw) -> Result:
    cmd = [sys.executable, "-m", "revati.cli.main", "run", *(run_opts or []), "--", *args]
    t0, stolen0 = time.monotonic(), stolen_s()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()  # revati run ends the whole emulated tree on SIGTERM
        p.communicate(timeout=30)
        raise
    return Result(p.returncode, out, err, time.monotonic() - t0, stolen_s() - stolen0)


def run_py(code: str, timeout: float = 120, run_opts: list[str] | None = None, **kw) -> Result:
    """Run Python code under emulation; it prints its results as JSON on the last line."""
    return revati_run([sys.executable, "-c", textwrap.dedent(code)], timeout=timeout,
                      run_opts=run_opts, **kw)


@pytest.fixture
def emulated():
    return run_py


def processes_of(marker: str) -> list[str]:
    """Command lines of live processes whose command line contains marker."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def descendants(root: int) -> dict[int, str]:
    """Live (non-zombie) descendants of process root: pid -> command line."""
    parent, cmd = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z":
            parent[int(pid)], cmd[int(pid)] = int(ppid), line
    found = {}
    for pid in parent:
        p = pid
        while p in parent and p != root:
            p = parent[p]
        if p == root and pid != root:
            found[pid] = cmd[pid]
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
