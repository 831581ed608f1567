"""`revati bench --engine sglang` on two emulated H200s: an MoE model with SGLang's expert
parallelism and data-parallel attention, whose two workers NCCL and gloo couple (the TP 2
path of a dense model adds nothing this one does not run, so it has no test of its own).

Apart from the shared server of test_sglang_e2e.py, so that no idle emulated engine competes
with this deployment for the host's two cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.conftest import run_bench_command

pytestmark = pytest.mark.e2e


def test_moe_with_expert_parallelism_and_dp_attention(tmp_path: Path) -> None:
    """Qwen3-30B-A3B (128 experts, 8 active) on two emulated H200s with SGLang's expert
    parallelism and data-parallel attention: every request served, the engine ran with
    both as asked."""
    _, s = run_bench_command(
        tmp_path, ["--engine", "sglang", "--model", "qwen3_30b_a3b", "--hardware", "h200",
                   "--tp", "2", "--input-len", "128", "--output-len", "16",
                   "--num-prompts", "8", "--request-rate", "10"],
        ["--context-length", "4096", "--ep-size", "2", "--enable-dp-attention",
         "--dp-size", "2"])
    assert s["completed"] == 8 and s["total_output_tokens"] == 8 * 16
    assert s["revati"]["tp"] == 2 and s["revati"]["engine"] == "sglang"
    assert s["num_gpu_blocks"] > 0
    # the two ranks' NCCL collectives took part of the predicted GPU time, from the spec's
    # table of published figures until the collectives are measured on multi-GPU H200s
    assert 0 < s["collective_share"] < 1 and s["revati"]["collective_table"] == "published"
    log = (tmp_path / "engine.log").read_text()
    assert "ep_size=2" in log and "enable_dp_attention=True" in log and "dp_size=2" in log
