"""A timing program run under `revati run --cores C` on the first N CPUs of this process's
affinity, as pingpong.py and fanout.py run theirs: the one number it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def first_cpus(n: int) -> str:
    """The first n CPUs this process may run on, as taskset takes them."""
    return ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:n])


def emulated(cpus: int, cores: str, program: Sequence[str]) -> float:
    """What `program` (a Python script and its arguments) prints, run under `revati run
    --cores CORES` on the first `cpus` CPUs."""
    out = subprocess.run(["taskset", "-c", first_cpus(cpus), sys.executable, "-m",
                          "revati.cli.main", "run", "--cores", cores, "--", sys.executable,
                          *program], capture_output=True, text=True, check=True, cwd=REPO)
    return float(out.stdout)
