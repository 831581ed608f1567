"""vLLM as Revati runs it: the `vllm serve` command line, its environment under emulation,
readiness, and what it reports about itself.

Nothing here depends on one vLLM version beyond the flags and endpoints every recent
release has (`vllm serve`, `vllm bench serve`, /health, /metrics, /v1/models,
/reset_prefix_cache)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from revati.engines.common import (
    SERVER_KEEP_ALIVE_S,
    has_module,
    http_get,
    http_ok,
    http_post,
    with_observers,
)

NAME = "vllm"
MODULE = "vllm"
# the engine flag that sets the context (prompt plus output) a request may have
CONTEXT_FLAG = "--max-model-len"
# the flag of the share of GPU memory the engine takes, and its default (vllm/config/cache.py)
MEMORY_FLAG, MEMORY_DEFAULT = "--gpu-memory-utilization", 0.92
# vLLM refuses to start unless its KV cache holds one request of the whole context
KV_FOR_ONE_CONTEXT = True
# flags after which the weights on a GPU are not the checkpoint's dtype in full
WEIGHT_FLAGS = ("--quantization", "-q", "--cpu-offload-gb")
BENCH_BACKEND = "vllm"
# What vLLM's jit_monitor logs for a kernel compiled after its warm-up, while serving
# (vllm/utils/jit_monitor.py; once per kernel and configuration): the kernel's name
JIT_DURING_SERVING = re.compile(r"JIT compilation during inference: ([^\s.(]+)")
# Batches of these many requests, each alone, before any load: the V2 sampler's Triton
# kernels take the batch size as an argument, and Triton compiles a kernel again for a size
# of 1, a multiple of 16 and any other, at its first batch of each. A warm server has them
# all; under emulation the compile's CPU time would land in the load's first steps
# (`_topk_topp_kernel` in the measured window: mean TPOT doubled for 32 requests).
WARM_BATCHES = (1, 3, 16)

# the prefix of the variables vLLM reads as settings (vllm/envs.py): summary.json records
# those the server ran with, a user's among them
ENV_PREFIXES = ("VLLM_",)

# Set for every emulated vLLM process, with the reason:
ENV = {
    # FlashInfer's sampler is JIT-compiled at start-up against CUDA headers (curand.h)
    # that a CPU host has no reason to carry; vLLM's own sampler serves the same requests
    # (the H200 reference runs use the same setting, see docs/validation.md).
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    # No usage reports or downloads from an emulation host.
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "NCCL_NVLS_ENABLE": "0",
    # Where the engine's processes meet (its torch.distributed store): loopback, the only
    # interface of a deployment's network (revati/bench/network.py). Unset, vLLM looks
    # for the host's route to the internet and, finding none there, warns and uses 0.0.0.0.
    "VLLM_HOST_IP": "127.0.0.1",
    # Serves POST /reset_prefix_cache (reset_cache), which a server that takes several loads
    # needs: the same seed sends the same prompts, which would hit the cache the previous
    # load filled. It adds development routes; the serving path is unchanged.
    "VLLM_SERVER_DEV_MODE": "1",
    # Idle connections outlive the load generator's (revati.engines.common).
    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": SERVER_KEEP_ALIVE_S,
}


# vLLM reads --max-model-len as a human-readable count (vllm/utils/argparse_utils.py):
# "8k" is 8,000, "8K" 8,192; "auto" or -1 leaves it to the model
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def context_value(text: str) -> int | None:
    """The context CONTEXT_FLAG's value sets, or None where vLLM chooses it or the value is
    one vLLM will reject itself."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT]?)", text.strip())
    if not m:
        return None
    number, suffix = m.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        return None
    return int(number) * _BINARY.get(suffix, 1)


def serve_env(base: dict[str, str], python: Path) -> dict[str, str]:
    """The environment of the emulated `vllm serve` (run by `python`): base, ENV, and
    Revati's batch observer (a vLLM plugin, see revati.engines.observers)."""
    return with_observers(base | ENV)


def has_engine(python: Path) -> bool:
    return has_module(python, MODULE)


def serve_command(python: Path, model_dir: Path, tokenizer_dir: Path, port: int, tp: int,
                  pp: int, extra: list[str]) -> list[str]:
    return [str(python), "-m", "vllm.entrypoints.cli.main", "serve", str(model_dir),
            "--tokenizer", str(tokenizer_dir), "--load-format", "dummy",
            "--host", "127.0.0.1", "--port", str(port),
            "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp), *extra]


def is_ready(port: int) -> bool:
    return http_ok(port, "/health")


def reset_cache(port: int) -> bool:
    """Empty the prefix cache (no request may be running); whether the server did."""
    body = http_post(port, "/reset_prefix_cache")
    return body is not None and json.loads(body).get("success") is True


_BLOCKS = re.compile(r'vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"')


def num_gpu_blocks(port: int) -> int | None:
    """The KV-cache block count the engine reports on /metrics (cache_config_info)."""
    body = http_get(port, "/metrics")
    m = _BLOCKS.search(body.decode()) if body is not None else None
    return int(m.group(1)) if m else None


def bench_command(python: Path, backend: str, port: int, model_dir: Path, tokenizer_dir: Path,
                  result_dir: Path, result_file: str, load: dict[str, str | None]) -> list[str]:
    """`vllm bench serve`, unmodified, as the load generator of every engine (one client, so
    the metrics of two engines are defined alike). `load` maps its flags (without the
    leading dashes) to values, None for a flag without one."""
    cmd = [str(python), "-m", "vllm.entrypoints.cli.main", "bench", "serve",
           "--backend", backend, "--base-url", f"http://127.0.0.1:{port}",
           "--model", str(model_dir), "--tokenizer", str(tokenizer_dir),
           "--ignore-eos", "--save-result", "--save-detailed",
           "--result-dir", str(result_dir), "--result-filename", result_file,
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    for flag, value in load.items():
        cmd += [f"--{flag}"] + ([] if value is None else [value])
    return cmd
