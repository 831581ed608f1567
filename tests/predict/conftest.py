"""Shared helpers: the C predictor reads its environment once per process, so every test that
exercises rv_predict_ns runs it in a fresh Python subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from revati.predict.roofline import RooflineSpec

DATA = Path(__file__).parent / "data"
SMALL_PROFILE = DATA / "h200_small"
REPO = Path(__file__).resolve().parents[2]

# A made-up GPU with round numbers, so expected roofline values are easy to compute by hand.
TEST_SPEC = {"name": "TestGPU", "sm_count": 100, "memory_bytes": 80e9,
             "peak_flops": {"fp32": 50e12, "tf32": 400e12, "fp16": 1000e12, "bf16": 1000e12,
                            "fp8": 2000e12},
             "hbm_bytes_per_s": 4e12, "nvlink_bytes_per_s": 400e9, "pcie_bytes_per_s": 50e9,
             "launch_overhead_ns": 2000}


@pytest.fixture
def spec() -> RooflineSpec:
    return RooflineSpec.from_mapping(TEST_SPEC)


@pytest.fixture
def spec_file(tmp_path: Path, spec: RooflineSpec) -> Path:
    path = tmp_path / "spec.txt"
    path.write_text(spec.flat_text())
    return path


# The start of a script for run_predictor: the native predictor loaded, and predict(row) giving
# [ns, source] of a launch row by rv_predict_ns
PREDICT_PRELUDE = """
import ctypes, json
from revati.predict import features as F
lib = F.native()
src = ctypes.c_int()
def predict(row):
    ns = lib.rv_predict_ns(ctypes.byref(F.to_launch(row)), ctypes.byref(src))
    return [ns, src.value]
"""


def run_predictor(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `code` (which prints one JSON document) in a fresh interpreter with `env` added."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("REVATI_")}
    full.update(env)
    full["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


def predictor_json(code: str, env: dict[str, str]) -> object:
    proc = run_predictor(code, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
