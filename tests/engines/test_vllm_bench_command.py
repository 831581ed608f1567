"""The whole `revati bench` command for vLLM: bad input refused clearly, pipeline stages
alone and with TP 2 in each, synchronous scheduling, and the KV cache of a real H100's
server (TP 2 alone: test_vllm_tp2_cores.py).

Apart from the shared server of test_vllm_e2e.py, so that no idle emulated engine competes
with these deployments for the host's two cores."""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest

from tests.engines.conftest import BENCH, run_bench_command

pytestmark = pytest.mark.e2e
# vLLM 0.26.0's default server (V2 model runner), --max-model-len 4096, on a real H100, started
# on a cold compile cache and again on a warm one
REAL_H100 = (Path(__file__).parents[2] / "validation/vllm/llama3_8b-v2-runner"
             / "2026-12-06-real-restart")


def test_bench_command_fails_clearly_on_bad_input(tmp_path: Path) -> None:
    base = [*BENCH, "--hardware", "h200", "--out", str(tmp_path)]
    r = subprocess.run([*base, "--model", "gpt5"], capture_output=True, text=True)
    assert r.returncode == 1 and "gpt5" in r.stderr
    r = subprocess.run([*BENCH, "--model", "llama3_8b", "--hardware", "b999", "--out",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1 and "unknown hardware 'b999'" in r.stderr
    r = subprocess.run([*base, "--model", "llama3_8b", "--engine", "sglang",
                        "--engine-python", "/usr/bin/python3"], capture_output=True, text=True)
    assert r.returncode == 1 and "sglang is not installed for /usr/bin/python3" in r.stderr
    r = subprocess.run([*base, "--model", "llama3_8b", "--engine", "trt"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "unknown engine 'trt' (known: vllm, sglang)" in r.stderr
    # a release with no lock file in requirements/ (issue #29), before any venv is made
    r = subprocess.run([*base, "--model", "llama3_8b", "--engine", "vllm==9.9"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no lock file for vllm==9.9 (known releases: " in r.stderr


@pytest.mark.parametrize("tp", [1, 2])
def test_bench_command_end_to_end_with_two_pipeline_stages(tmp_path: Path, tp: int) -> None:
    """Pipeline parallelism (issue #26 item 4), alone (two emulated H200s) and with TP 2 in
    each stage (four): the activations pass between the stages over the emulated NCCL's
    send/recv, while each stage's all-reduce couples its workers, and every request is served
    at its exact lengths."""
    r, s = run_bench_command(
        tmp_path, ["--model", "llama3_8b", "--hardware", "h200", "--tp", str(tp), "--pp", "2",
                   "--input-len", "128", "--output-len", "32", "--num-prompts", "10",
                   "--request-rate", "10"],
        ["--max-model-len", "4096"])
    assert "[revati bench] done: 10 requests" in r.stdout
    assert s["completed"] == 10 and s["failed"] == 0, s["failure_reasons"]
    assert (s["revati"]["tp"], s["revati"]["pp"]) == (tp, 2)
    assert (tmp_path / "engine.log").exists() and (tmp_path / "client.log").exists()
    assert s["total_output_tokens"] == 10 * 32


def test_synchronous_scheduling_serves_every_request(tmp_path: Path) -> None:
    """`--no-async-scheduling`, one of the scheduler settings a sweep tries: the engine core
    reads each step's sampled token ids back from device memory that no kernel wrote here.
    Before kernel outputs read zero, those ids were what an earlier copy had left in the
    block (34359738368: an int32 pair read as one id) and vLLM's bookkeeping died at its
    first step with an OverflowError, failing every request."""
    r, s = run_bench_command(
        tmp_path, ["--model", "llama3_8b", "--hardware", "h200", "--input-len", "64",
                   "--output-len", "16", "--num-prompts", "8", "--request-rate", "inf",
                   "--num-warmups", "2"],
        ["--max-model-len", "4096", "--no-async-scheduling"])
    assert s["completed"] == 8 and s["failed"] == 0, s["failure_reasons"]
    rows = list(csv.DictReader((tmp_path / "requests.csv").open()))
    assert [(int(x["input_tokens"]), int(x["output_tokens"])) for x in rows] == [(64, 16)] * 8


def test_default_server_sizes_its_kv_cache_as_on_a_real_h100(tmp_path: Path) -> None:
    """vLLM's defaults, V2 model runner included, whose bookkeeping kernels are computed on the
    host: every request served with its exact lengths, and the KV cache as large as the real
    default server's on the same GPU started the same way (each block is 2 MiB of this model's
    KV). The real server held 28,934 blocks where inductor compiled the model (a machine's
    first start) and 29,051 where its caches held the compiled graph (0.23 GiB less
    activation memory in the profile). vLLM's log cannot tell the two apart (a graph vLLM
    compiles again reuses inductor's cache), so the emulated server compiles with every cache
    off and is held to the first figure."""
    _, s = run_bench_command(
        tmp_path, ["--model", "llama3_8b", "--hardware", "h100", "--input-len", "100",
                   "--output-len", "20", "--num-prompts", "6", "--request-rate", "inf",
                   "--num-warmups", "2"],
        ["--max-model-len", "4096"],
        env={"VLLM_DISABLE_COMPILE_CACHE": "1", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"})
    assert "Using V2 Model Runner" in (tmp_path / "engine.log").read_text()
    assert s["completed"] == 6 and s["total_output_tokens"] == 6 * 20
    real = re.search(r'num_gpu_blocks="(\d+)"',
                     (REAL_H100 / "num_gpu_blocks_default.txt").read_text())
    assert s["num_gpu_blocks"] == pytest.approx(int(real[1]), rel=0.001)
