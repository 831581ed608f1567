"""Bad input to `revati bench` (and `revati predictor`) ends the command with one line that
names the value, exit status 1, before any engine, Timekeeper or output of a run exists."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from revati.bench.checks import check_memory, context_length
from revati.bench.errors import BenchError
from revati.models.catalog import load_model

REVATI = [sys.executable, "-m", "revati.cli.main"]
BENCH = [*REVATI, "bench", "--model", "llama3_8b", "--hardware", "h200"]
SHM = Path("/dev/shm")


def shm_segments() -> set[Path]:
    return set(SHM.glob("revati-*")) if SHM.is_dir() else set()


@pytest.fixture
def bad_trace(tmp_path: Path) -> Path:
    path = tmp_path / "bad.csv"
    path.write_text("timestamp,input_length,output_length\n0.0,100,10\n0.5,lots,10\n")
    return path


CASES = {
    "negative rate": (["--request-rate", "-1"],
                      "--request-rate must be above 0 (inf: all at once), not -1.0"),
    "zero prompts": (["--num-prompts", "0"], "--num-prompts must be at least 1, not 0"),
    "prompt beyond the context": (
        ["--input-len", "9000", "--", "--max-model-len", "4096"],
        "input_len=9000 + output_len=128 exceeds --max-model-len=4096"),
    "beyond the model's positions": (
        ["--input-len", "131000"],
        "exceeds llama3_8b's max_position_embeddings=131072"),
    "a context beyond the model's positions": (
        ["--", "--max-model-len", "200000"],
        "--max-model-len=200000 exceeds max_position_embeddings=131072 of llama3_8b"),
    "weights beyond the GPU's memory": (
        ["--model", "llama3_70b"],
        "llama3_70b at tp=1 pp=1: weights 131.4 GiB per GPU exceed the 128.1 GiB usable of "
        "139.8 GiB at --gpu-memory-utilization=0.92 (its default)"),
    "one whole-context request beyond the KV cache": (
        ["--model", "llama3_70b", "--tp", "2", "--", "--max-model-len", "131072",
         "--gpu-memory-utilization", "0.55"],
        "weights 65.7 GiB + KV of one 131072-token sequence 20.00 GiB per GPU exceed the "
        "76.4 GiB usable"),
    "layout against the heads": (
        ["--tp", "3"], "tensor_parallel_size=3 does not divide num_attention_heads=32"),
    "more GPUs than a node": (["--tp", "16"], "--tp 16 x --pp 1 = 16 GPUs; one h200_sxm node"),
    "unknown model": (["--model", "gpt5"], "unknown model 'gpt5'"),
    "a bad trace row": (["--dataset", "trace", "--trace", "BAD"], "not a number"),
    "an unwritable output folder": (["--out", "/proc/nope/x"], "cannot write there"),
    "a factor below 1 without the clock rate": (
        ["--cpu-dilation", "0.8", "--cores", "off"],
        "--cpu-dilation 0.8: a factor below 1 slows the clock rate, which --cores off turns off"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_bench_input_is_one_line_before_anything_starts(case, tmp_path, bad_trace):
    args, message = CASES[case]
    args = [str(bad_trace) if a == "BAD" else a for a in args]
    out = tmp_path / "out"
    if "--out" not in args:
        args = ["--out", str(out), *args]
    before = shm_segments()
    r = subprocess.run([*BENCH, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("revati bench: "), r.stderr
    assert message in lines[0], lines[0]
    # no engine, no Timekeeper, no run: nothing written beyond the (empty) output folder
    assert not out.exists() or not any(out.iterdir())
    assert shm_segments() <= before


def test_predictor_report_names_an_unknown_hardware(tmp_path):
    r = subprocess.run([*REVATI, "predictor", "report", "--hardware", "z999"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip() == ("revati predictor: unknown hardware 'z999'; known: "
                                "h100_sxm, h200_sxm")


def _opts(engine: str, model: str, tp: int, *engine_args: str) -> SimpleNamespace:
    return SimpleNamespace(engine=engine, model=model, tp=tp, pp=1, engine_args=list(engine_args))


def _memory(opts: SimpleNamespace, hardware: str) -> None:
    config = load_model(opts.model).config
    check_memory(opts, config, hardware, *context_length(opts, config))


def test_memory_is_the_engines_to_judge_where_the_weights_shrink_or_the_share_is_its_own():
    # quantized or offloaded weights are not the checkpoint's bytes: left to the engine
    _memory(_opts("vllm", "llama3_70b", 1, "--quantization", "fp8"), "h200_sxm")
    _memory(_opts("vllm", "llama3_70b", 1, "--cpu-offload-gb", "40"), "h200_sxm")
    # SGLang sizes its share from the GPU: only the whole memory bounds it
    _memory(_opts("sglang", "llama3_70b", 1), "h200_sxm")
    with pytest.raises(BenchError, match=r"--mem-fraction-static=1.0 \(the whole GPU\)"):
        _memory(_opts("sglang", "llama3_70b", 1), "h100_sxm")
    # a share the user gives counts, in both engines
    with pytest.raises(BenchError, match="--mem-fraction-static=0.8$"):
        _memory(_opts("sglang", "llama3_70b", 2, "--mem-fraction-static", "0.8"), "h100_sxm")
    _memory(_opts("vllm", "llama3_70b", 2, "--gpu-memory-utilization", "0.95"), "h100_sxm")


def test_a_context_flag_reads_as_its_engine_reads_it():
    config = load_model("llama3_8b").config
    positions = (131072, "llama3_8b's max_position_embeddings")
    # vLLM's human-readable counts: k is 1,000, K is 1,024; auto leaves it to the model
    for value, tokens in (("8k", 8000), ("8K", 8192), ("25.6k", 25600), ("4096", 4096)):
        opts = _opts("vllm", "llama3_8b", 1, f"--max-model-len={value}")
        assert context_length(opts, config) == (tokens, "--max-model-len")
    assert context_length(_opts("vllm", "llama3_8b", 1, "--max-model-len", "auto"),
                          config) == positions
    with pytest.raises(BenchError, match=r"--max-model-len=200k \(200,000 tokens\) exceeds"):
        context_length(_opts("vllm", "llama3_8b", 1, "--max-model-len", "200k"), config)
    # SGLang reads a plain integer; what it would reject is its own to say
    assert context_length(_opts("sglang", "llama3_8b", 1, "--context-length", "8192"),
                          config) == (8192, "--context-length")
    assert context_length(_opts("sglang", "llama3_8b", 1, "--context-length", "8k"),
                          config) == positions
