"""The real SGLang on an emulated H200, end to end (issue: SGLang end to end under emulation).

One emulated SGLang server is shared by the tests of this module; the benchmark client is
the same `vllm bench serve` that measures vLLM, so the two engines' figures are defined
alike."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer
from revati.engines import sglang
from tests.engines.conftest import post

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    opts = BenchOptions(model="llama3_8b", hardware="h200", engine="sglang",
                        out=tmp_path_factory.mktemp("sgl"),
                        engine_args=["--context-length", "4096"], ready_timeout_s=1200)
    with EmulatedServer(opts) as srv:
        yield srv


def test_completion_has_exactly_max_tokens(server: EmulatedServer) -> None:
    out = post(server, "/v1/completions", {"model": str(server.folder.model_dir),
                                           "prompt": "t1 t2 t3 t4 t5 t6 t7", "max_tokens": 20,
                                           "ignore_eos": True})
    assert out["usage"]["prompt_tokens"] == 7
    assert out["usage"]["completion_tokens"] == 20
    assert out["choices"][0]["finish_reason"] == "length"


def test_top_p_and_top_k_sampling_runs(server: EmulatedServer) -> None:
    """top_p < 1 or top_k > 0 takes FlashInfer's top-k/top-p sampler, which SGLang compiles
    with nvcc on first use (curand's headers included): the pinned toolkit must build it."""
    out = post(server, "/v1/completions", {"model": str(server.folder.model_dir),
                                           "prompt": "t1 t2 t3", "max_tokens": 16,
                                           "temperature": 0.8, "top_p": 0.9, "top_k": 20,
                                           "ignore_eos": True})
    assert out["usage"]["completion_tokens"] == 16
    assert out["choices"][0]["finish_reason"] == "length"


def test_engine_reports_its_kv_cache_and_context(server: EmulatedServer) -> None:
    # SGLang sizes its KV cache in tokens (pages of one token by default): Llama-3.1-8B's
    # 128 KiB per token in the ~100 GiB an H200 leaves at --mem-fraction-static 0.9
    assert server.num_gpu_blocks is not None and 600_000 < server.num_gpu_blocks < 1_000_000
    assert server.max_model_len == 4096


def test_bench_summary_matches_vllms_keys(server: EmulatedServer, tmp_path: Path) -> None:
    opts = BenchOptions(model="llama3_8b", hardware="h200", engine="sglang", out=tmp_path,
                        input_len=128, output_len=32, num_prompts=12, request_rate=10.0,
                        seed=1)
    s = server.run_load(opts, tmp_path)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "request_throughput",
                "output_throughput", "duration", "completed", "num_gpu_blocks"):
        assert key in s, key
    assert s["completed"] == 12 and s["failed"] == 0
    assert s["total_output_tokens"] == 12 * 32
    assert s["revati"]["engine"] == "sglang"
    assert 0 < s["mean_ttft_ms"] < s["mean_e2el_ms"]
    # decode steps of a batch of ~a few requests on an H200: milliseconds, not zero
    assert 1.0 < s["mean_tpot_ms"] < 50.0
    rows = list(csv.DictReader((tmp_path / "requests.csv").open()))
    assert all(int(r["output_tokens"]) == 32 and not r["error"] for r in rows)


def test_decode_attention_follows_the_kv_length(server: EmulatedServer,
                                                tmp_path: Path) -> None:
    """Decode steps replay one CUDA graph per batch size, whatever the KV lengths: only the
    batch observer (an SGLang plugin) makes 32 requests at 3,500 tokens of context cost more
    attention than at 100. Their KV cache is ~460 MB per layer and step, ~0.1 ms at the
    H200's bandwidth, ~35x the short context's, and their prefill ~1,000x the FLOPs; the
    short context's launches are mostly their fixed cost, so the whole runs differ ~11x
    (47 and 536 ms on 2026-12-02). The attention time the predictor charged from the
    reported batches says so on any host; the inter-token latency shows it (~3 ms more per
    step) only where steps are GPU-bound, which they are not on a slow 2-core host (SGLang's
    scheduler then takes ~12 ms a step)."""
    itl, attention = {}, {}
    for n in (100, 3500):
        opts = BenchOptions(model="llama3_8b", hardware="h200", engine="sglang",
                            out=tmp_path / str(n), input_len=n, output_len=64,
                            num_prompts=32, seed=n)
        before = server.predictor_totals().get("attention_by_batch_ns", 0)
        itl[n] = server.run_load(opts, tmp_path / str(n))["median_itl_ms"]
        attention[n] = server.predictor_totals()["attention_by_batch_ns"] - before
    assert attention[100] > 0 and attention[3500] > 6 * attention[100], (attention, itl)


def sglang_bench_serving(server: EmulatedServer, out: Path, seed: int) -> dict:
    """SGLang's own client (sglang.bench_serving, greedy by default) against the shared
    server on the deployment's virtual clock: 32 prompts of 128 tokens, 64 tokens out each."""
    out.mkdir(parents=True, exist_ok=True)
    result = out / "sglang_bench.jsonl"
    server.run_client(sglang.bench_serving_command(
        server.python, server.port, server.folder.model_dir, server.folder.tokenizer_dir,
        result, 32, 128, 64, seed, []), out / "client.log", 900, {"HF_HUB_OFFLINE": "1"})
    return json.loads(result.read_text().splitlines()[-1])


def assert_every_request_got_64_tokens(r: dict) -> None:
    # its output_lens are the requested lengths unless the server reports usage, so count
    # the tokens of the text itself: the synthetic vocabulary's tokens are words
    assert r["completed"] == 32 and not any(r["errors"]), r["errors"]
    assert [len(t.split()) for t in r["generated_texts"]] == [64] * 32
    assert r["total_output_tokens_retokenized"] == r["total_output_tokens"] == 32 * 64


def test_sglang_bench_serving_gets_every_greedy_token(server: EmulatedServer,
                                                      tmp_path: Path) -> None:
    """bench_serving asks for greedy sampling (temperature 0): SGLang takes torch.argmax of
    the logits, into a block PyTorch's allocator gave out before. Before the device shim
    zeroed what kernels compute, the ids read back were what an earlier copy had left there
    (int32 pairs such as [128, 128] read as one int64 id), out of the vocabulary, and SGLang
    ended those requests after 1 to 14 of 64 tokens ("NaN happened")."""
    assert_every_request_got_64_tokens(sglang_bench_serving(server, tmp_path, seed=1))
