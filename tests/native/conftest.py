"""Run Python programs as emulated-GPU processes (the environment `revati run` gives them).

The device shim is exercised standalone, without a Timekeeper: host synchronisations then
sleep on the real clock until the virtual completion time, so timing tests keep their
predicted durations tiny (REVATI_PREDICT_FIXED_NS) and compare with a tolerance.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from revati.device.env import apply_env, emulated_device_env
from tests.host import stolen_s


class Emulated:
    def __init__(self, workdir: pathlib.Path):
        self.workdir = workdir
        self.stolen_s = 0.0  # what the hypervisor took over the last run (tests/host.py)

    def env(self, gpus: int = 1, hardware: str = "h200_sxm", **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("REVATI_")}
        base.pop("CUDA_VISIBLE_DEVICES", None)
        env = apply_env(base, emulated_device_env(hardware, gpus, self.workdir))
        env.update(extra)
        return env

    def run(self, code: str, gpus: int = 1, hardware: str = "h200_sxm", timeout: float = 180,
            check: bool = True, **extra: str) -> subprocess.CompletedProcess:
        script = self.workdir / "program.py"  # a file: Triton reads its kernels' source
        script.write_text(textwrap.dedent(code))
        return self.run_with(pathlib.Path(sys.executable), [str(script)], gpus, hardware, timeout,
                             check, **extra)

    def run_with(self, python: pathlib.Path, argv: list[str], gpus: int = 1,
                 hardware: str = "h200_sxm", timeout: float = 180, check: bool = True,
                 **extra: str) -> subprocess.CompletedProcess:
        """Run `python argv` (this interpreter or an engine's) as an emulated process."""
        stolen0 = stolen_s()
        proc = subprocess.run([str(python), *argv],
                              env=self.env(gpus, hardware, **extra), cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout)
        self.stolen_s = stolen_s() - stolen0
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr[-4000:]}")
        return proc

    def json(self, code: str, **kw) -> dict:
        """Run `code`, which prints one JSON object as its last line of output."""
        out = self.run(code, **kw).stdout.strip().splitlines()
        return json.loads(out[-1])


@pytest.fixture
def emulated(tmp_path: pathlib.Path) -> Emulated:
    return Emulated(tmp_path)
