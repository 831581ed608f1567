"""One real run of Llama-3.1-8B (vLLM 0.26.0 or SGLang 0.5.17; on the H200, or the GPU named)
replayed through `revati validate`, as knobs.py, host_states.py and loads.py do: the same
requests, 16 warm-ups, a 4,096-token context. The run is kept in OUT and reused when its
validation.json exists, so a script resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VALIDATION = REPO / "validation"
# the real runs of the vLLM tables (validation/README.md)
VLLM_LLAMA = VALIDATION / "vllm" / "llama3_8b"
VLLM_KNOBS = VALIDATION / "vllm" / "llama3_8b-knobs" / "2026-12-04-real"
SGLANG_LLAMA = VALIDATION / "sglang" / "llama3_8b"
# each engine's flag for the context length the real servers ran with
CONTEXT = {"vllm": ["--max-model-len", "4096"], "sglang": ["--context-length", "4096"]}
# what else the real servers ran with: vLLM's real runs here used its V1 model runner (the
# emulated engine inherits the environment of revati validate)
REAL_ENV = {"vllm": {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "sglang": {}}
# the catalog model the real runs served (Llama-3.1-8B shapes, dummy weights)
REAL_MODEL = "llama3_8b"
METRICS = (("mean_ttft_ms", "TTFT ms"), ("mean_tpot_ms", "TPOT ms"),
           ("output_throughput", "tok/s"))


def run_folders(out: Path, name: str, runs: int) -> list[Path]:
    """Where `runs` runs of one cell are kept: OUT/NAME, then OUT/NAME_1, OUT/NAME_2, ..."""
    return [out / (name + (f"_{i}" if i else "")) for i in range(runs)]


def replay(real: Path, out: Path, bench_args: Sequence[str] = (),
           engine_args: Sequence[str] = (), prefix: Sequence[str] = (), engine: str = "vllm",
           metrics: Sequence[str] = tuple(m for m, _ in METRICS), model: str = REAL_MODEL,
           hardware: str = "h200") -> dict[str, tuple[float, float]]:
    """metric -> (real, emulated) of `metrics`; `prefix` runs the command under another
    (taskset), bench_args go to revati validate, engine_args to the engine; model: the
    catalog model emulated; hardware: the GPU the real run had, emulated."""
    result = out / "validation.json"
    if not result.is_file():
        cmd = [*prefix, sys.executable, "-m", "revati.cli.main", "validate", "--real",
               str(real), "--engine", engine, "--model", model, "--hardware", hardware,
               "--num-warmups", "16", *bench_args, "--out", str(out), "--", *CONTEXT[engine],
               *engine_args]
        print(f"replay: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL,
                       env=os.environ | REAL_ENV[engine])
    rows = {r["metric"]: r for r in json.loads(result.read_text())["rows"]}
    return {m: (rows[m]["real"], rows[m]["emulated"]) for m in metrics}
