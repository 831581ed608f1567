"""SGLang as Revati runs it: the `sglang.launch_server` command line, its environment under
emulation, readiness, and what it reports about itself.

Nothing here depends on one SGLang version beyond the flags and endpoints every recent
release has (`--model-path`, `--tp-size`, /health, /server_info, /v1/models,
/flush_cache)."""

from __future__ import annotations

import os
from pathlib import Path

from revati.engines.common import (
    SERVER_KEEP_ALIVE_S,
    has_module,
    http_json,
    http_ok,
    http_post,
    with_observers,
)

NAME = "sglang"
MODULE = "sglang"
# the engine flag that sets the context (prompt plus output) a request may have
CONTEXT_FLAG = "--context-length"
# the flag of the share of GPU memory the engine takes; by default SGLang sizes it from the
# GPU's memory (no one figure), so only the whole memory bounds it
MEMORY_FLAG, MEMORY_DEFAULT = "--mem-fraction-static", None
# a KV cache shorter than the context serves shorter requests
KV_FOR_ONE_CONTEXT = False
# flags after which the weights on a GPU are not the checkpoint's dtype in full
WEIGHT_FLAGS = ("--quantization", "--cpu-offload-gb")
# `vllm bench serve` drives every engine; SGLang serves the same OpenAI completions API,
# which vLLM's client calls "openai" (the request function is the one of its "vllm")
BENCH_BACKEND = "openai"
# SGLang logs no compilation that happens while it serves
JIT_DURING_SERVING = None
# no batch-size warm-up before the loads (revati/engines/vllm.py says why vLLM has one)
WARM_BATCHES = ()

# the prefixes of the variables SGLang reads as settings (sglang/srt/environ.py): summary.json
# records those the server ran with, a user's among them
ENV_PREFIXES = ("SGLANG_", "SGL_")

# Set for every emulated SGLang process, with the reason:
ENV = {
    # No usage reports or downloads from an emulation host.
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "NCCL_NVLS_ENABLE": "0",
    # Idle connections outlive the load generator's (revati.engines.common).
    "SGLANG_TIMEOUT_KEEP_ALIVE": SERVER_KEEP_ALIVE_S,
}

# Flags Revati adds to every SGLang server, with the reason:
FLAGS = [
    # SGLang's start-up warm-up request is English text ("The capital city of France
    # is"), which the synthetic vocabulary cannot express (revati.models.tokenizer has no
    # unknown-word token on purpose). The warm-up measures nothing; `revati bench
    # --num-warmups` sends warm-up requests the vocabulary can express.
    "--skip-server-warmup",
    # An idle scheduler otherwise spins on its sockets at a full core (SGLang's own default:
    # on a GPU node every scheduler has a core to itself, so the spin delays nothing). On
    # the emulation host that core is shared with the API server, the detokenizer and the
    # load generator, whose CPU work counts on the virtual clock: measured on the 2-core
    # development VM, the idle scheduler took 0.92-0.95 of a core while the load generator
    # started, 0.04-0.08 with this flag, which blocks it in a zmq poll until a request
    # arrives (the flag changes nothing once a batch runs).
    "--sleep-on-idle",
]


def context_value(text: str) -> int | None:
    """The context CONTEXT_FLAG's value sets (SGLang reads a plain integer), or None where
    the value is one SGLang will reject itself."""
    return int(text) if text.strip().isdigit() else None


def cuda_home(python: Path) -> str | None:
    """The CUDA toolkit for SGLang's JIT kernels (rotary, activation and KV-cache stores are
    compiled with nvcc at start-up; FlashInfer's sampler needs curand's headers): $CUDA_HOME,
    else the toolkit that SGLang's own pip dependencies install beside it (nvidia/cu13)."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    for site in (python.parent.parent / "lib").glob("python3*/site-packages"):
        toolkit = site / "nvidia" / "cu13"
        if (toolkit / "bin" / "nvcc").exists():
            lay_out_runtime(toolkit)
            # the resolved path: .venv-sglang is a link per checkout, and FlashInfer keys
            # its JIT builds on the nvcc command, so a per-checkout path rebuilt its
            # sampler (100 s of nvcc) in every fresh clone
            return str(toolkit.resolve())
    return None


def lay_out_runtime(toolkit: Path) -> None:
    """SGLang's JIT builds link -lcudart from lib64, which the pip toolkit's wheels do not
    lay out: name them as a CUDA_HOME does, in whichever release's venv (made on first use)."""
    for link, target in ((toolkit / "lib64", "lib"),
                         (toolkit / "lib" / "libcudart.so", "libcudart.so.13")):
        if not (link.exists() or link.is_symlink()):
            link.symlink_to(target)


def serve_env(base: dict[str, str], python: Path) -> dict[str, str]:
    """The environment of the emulated SGLang server: base, ENV, the CUDA toolkit, and
    Revati's batch observer (an SGLang plugin, see revati.engines.observers)."""
    env = with_observers(base | ENV)
    home = cuda_home(python)
    if home:
        env["CUDA_HOME"] = home
        env["PATH"] = os.pathsep.join(p for p in (f"{home}/bin", base.get("PATH")) if p)
    return env


def has_engine(python: Path) -> bool:
    return has_module(python, MODULE)


def serve_command(python: Path, model_dir: Path, tokenizer_dir: Path, port: int, tp: int,
                  pp: int, extra: list[str]) -> list[str]:
    return [str(python), "-m", "sglang.launch_server", "--model-path", str(model_dir),
            "--tokenizer-path", str(tokenizer_dir), "--load-format", "dummy",
            "--host", "127.0.0.1", "--port", str(port),
            "--tp-size", str(tp), "--pp-size", str(pp), *FLAGS, *extra]


def is_ready(port: int) -> bool:
    # 503 until the server's start-up (and warm-up, when it runs one) is over. Each /health
    # generates a token, which takes virtual time: on a loaded host the clock runs at a
    # third of real speed or less, and a probe given up after 2 s of real time left its
    # generation queued and sent another (an MoE server with DP attention piled up 351 of
    # them and never answered in time). One probe at a time, waited for: SGLang ends its
    # own after 20 s of virtual time.
    return http_ok(port, "/health", timeout=300)


def reset_cache(port: int) -> bool:
    """Empty the radix (prefix) cache (no request may be running); whether the server did."""
    return http_post(port, "/flush_cache") is not None


def num_gpu_blocks(port: int) -> int | None:
    """KV-cache pages: SGLang's token capacity over its page size (1 token by default)."""
    info = http_json(port, "/server_info", timeout=10)
    tokens, page = info.get("max_total_num_tokens"), info.get("page_size") or 1
    return int(tokens) // int(page) if tokens else None


def bench_serving_command(python: Path, port: int, model_dir: Path, tokenizer_dir: Path,
                          result: Path, num_prompts: int, input_len: int, output_len: int,
                          seed: int, extra: list[str]) -> list[str]:
    """SGLang's own load generator, unmodified (`python -m sglang.bench_serving`): random-token
    prompts of exactly input_len tokens, output_len tokens each (ignore_eos, its default), one
    request in flight, after one warm-up request (the first prompt), SGLang's radix cache
    flushed after it so that the first measured request finds no prefix cached; its result,
    with the per-request details, as result's last JSON line. Two runs with one seed send the
    same prompts."""
    return [str(python), "-m", "sglang.bench_serving", "--backend", "sglang-oai",
            "--host", "127.0.0.1", "--port", str(port), "--model", str(model_dir),
            "--tokenizer", str(tokenizer_dir), "--dataset-name", "random-ids",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--random-range-ratio", "1", "--num-prompts", str(num_prompts),
            "--request-rate", "inf", "--max-concurrency", "1", "--seed", str(seed),
            "--warmup-requests", "1", "--flush-cache", "--disable-tqdm",
            "--output-file", str(result), "--output-details", *extra]
