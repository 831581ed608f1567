"""The newest vLLM release with a lock file in requirements/, beside the pinned one (issue
#29): `revati bench --engine vllm==VERSION` makes its venv on first use (kept under
~/.cache/revati and reused by every later run and clone) and serves a load end to end. A
module of its own, so that no idle emulated server competes with its deployment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from revati.engines import versions

pytestmark = pytest.mark.e2e

NEWEST = versions.releases("vllm")[-1]


@pytest.mark.skipif(NEWEST == versions.pinned_version("vllm"),
                    reason="no vLLM release beside the pinned one has a lock file")
def test_the_newest_vllm_release_serves_exact_lengths(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "revati.cli.main", "bench", "--engine", f"vllm=={NEWEST}",
         "--model", "llama3_8b", "--hardware", "h200", "--input-len", "128", "--output-len",
         "32", "--num-prompts", "8", "--request-rate", "inf", "--num-warmups", "2", "--out",
         str(tmp_path), "--", "--max-model-len", "4096"],
        capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["completed"] == 8 and s["total_input_tokens"] == 8 * 128
    assert s["total_output_tokens"] == 8 * 32
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "num_gpu_blocks"):
        assert s[key] > 0, key
    assert s["revati"]["release"] == f"vllm=={NEWEST}"
    # the server that ran is that release (vLLM logs its version at start-up)
    assert f"v{NEWEST}" in (tmp_path / "engine.log").read_text()
    # how much of the measured GPU time came from kernels the models never saw
    assert 0 <= s["predictor_measured"]["unseen_kernel_share"] < 1
